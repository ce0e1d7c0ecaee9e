// SPDX-License-Identifier: BSD-3-Clause
// An ordered group endpoint's ordering (api/group_order.h) without EAL: members whose streams
// are FIFO per source and interleaved at random at each receiver, sends refused at random (a
// full ring), members crashing mid-stream (their streams cut, then ENDED), and hostile
// records. Each message carries what its sender had delivered, so the test checks causal
// order itself; total order's members must agree on one sequence; nothing is lost or
// delivered twice, and every buffer comes back once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "tests/api/order_net.h"

namespace {

using namespace imago::api::test;

/** The application's payload: its seq and what it had delivered of each member. */
std::vector<uint8_t> payload(const Member& me) {
  std::vector<uint8_t> p(4 + 4 * me.delivered.size());
  const uint32_t seq = me.sent_msgs + 1;
  std::memcpy(p.data(), &seq, 4);
  std::memcpy(p.data() + 4, me.delivered.data(), 4 * me.delivered.size());
  return p;
}

void check(Net& net, Member& me, imago_msg& d, const std::vector<bool>& crashed) {
  if (d.flags & IMAGO_MSG_F_EVENT) return;
  const auto* p = static_cast<const uint8_t*>(imago_msg_data(&d));
  const uint32_t s = static_cast<uint32_t>(d.src) - 1;
  ASSERT_EQ(d.len, 4 + 4 * me.delivered.size());
  uint32_t seq;
  std::memcpy(&seq, p, 4);
  std::vector<uint32_t> dep(me.delivered.size());
  std::memcpy(dep.data(), p + 4, 4 * dep.size());
  if (seq != me.delivered[s] + 1) ++net.violations;  // FIFO per source, once each
  for (uint32_t k = 0; k < dep.size(); ++k) {
    if (k == s || crashed[k]) continue;  // a crashed member's lost messages are waived
    if (k == me.slot ? dep[k] > me.sent_msgs : dep[k] > me.delivered[k]) ++net.violations;
  }
  me.delivered[s] = seq;
  me.log.emplace_back(static_cast<NodeId>(d.src), seq);
}

void receive(Net& net, Member& me, const std::vector<bool>& crashed) {
  imago_msg out[8];
  const unsigned want = 1 + static_cast<unsigned>(net.rng() % 8);
  const int n = me.g.receive(out, want, [&me](imago_msg* in, unsigned max) { return pull(me, in, max); });
  ASSERT_GE(n, 0);
  for (int i = 0; i < n; ++i) {
    check(net, me, out[i], crashed);
    give_back(net, out[i]);
  }
}

bool send_one(Member& me) {
  uint8_t head[order::kMaxRecord];
  if (me.g.prepare(head) != 0) return false;
  const std::vector<uint8_t> body = payload(me);
  const int rc = me.send({head, me.g.head_len()}, body, false);
  me.g.sent(rc == 0);
  if (rc == 0) ++me.sent_msgs;
  return rc == 0;
}

/** @p n members of @p mode's order of @p window, seeded @p seed, no send refused. */
bool open_net(Net& net, uint64_t seed, uint32_t n, order::Mode mode, uint32_t window) {
  net.rng.seed(seed);
  net.refuse = 0;
  return build(net, n, mode, window);
}

/** Cut @p x's streams at a random point at every member, then tell them it ended. */
void crash(Net& net, Member& x) {
  x.crashed = true;
  for (auto& o : net.m) {
    if (o.get() == &x) continue;
    auto& q = o->in[x.slot];
    const size_t keep = q.empty() ? 0 : net.rng() % (q.size() + 1);
    while (q.size() > keep) give_back(net, q.back()), q.pop_back();
    q.push_back(event(IMAGO_GROUP_ENDED, x.id, o->id, IMAGO_GROUP_END_GONE));
  }
}

void forge(Net& net, Member& to) {
  uint8_t junk[40];
  for (uint8_t& b : junk) b = static_cast<uint8_t>(net.rng());
  junk[0] = order::kMagic;
  const uint32_t s = static_cast<uint32_t>(net.rng() % net.m.size());
  if (s != to.slot && !net.m[s]->crashed) {
    imago_msg d = make(net, net.ids[s], {junk, 1 + net.rng() % sizeof junk}, {});
    to.in[s].push_back(d);  // in a member's name: bad, or a record that must do no harm
  }
}

struct Tally {
  uint64_t delivered = 0, sent = 0, bad = 0;
};

Tally run(uint64_t seed, order::Mode mode, uint32_t n, bool crashes, bool hostile) {
  Net net;
  net.rng.seed(seed);
  Tally r;
  if (!build(net, n, mode, 1 + static_cast<uint32_t>(net.rng() % 16))) {
    ADD_FAILURE() << "init";
    return r;
  }
  const uint32_t per = 200;
  std::vector<bool> crashed(n, false);
  for (int step = 0; step < 200000; ++step) {
    Member& me = *net.m[net.rng() % n];
    if (me.crashed) continue;
    if (crashes && step == 3000 && !crashed[1]) crashed[1] = true, crash(net, *net.m[1]);
    if (me.crashed) continue;  // it may be the one that just crashed: it sends no more
    if (hostile && net.chance(0.002) && mode == order::Mode::kCausal) forge(net, me);
    if (me.sent_msgs < per && net.chance(0.5)) {
      send_one(me);
    } else {
      receive(net, me, crashed);
    }
    bool done = true;
    for (auto& x : net.m)
      if (!x->crashed) {
        for (uint32_t s = 0; s < n; ++s)
          if (s != x->slot && !net.m[s]->crashed && x->delivered[s] < per) done = false;
        if (x->sent_msgs < per) done = false;
      }
    if (done) break;
  }
  EXPECT_EQ(net.violations, 0u) << "seed " << seed;
  for (auto& x : net.m) {
    if (x->crashed) continue;
    for (uint32_t s = 0; s < n; ++s)
      if (s != x->slot && !net.m[s]->crashed) {
        EXPECT_EQ(x->delivered[s], per) << "seed " << seed << " member " << x->id << " from " << s + 1;
      }
    r.delivered += x->log.size(), r.sent += x->sent_msgs, r.bad += x->g.counters().bad;
  }
  if (mode == order::Mode::kTotal) {
    // One order: a's sequence without b's messages is b's without a's.
    for (auto& a : net.m)
      for (auto& b : net.m) {
        if (a->crashed || b->crashed || a == b) continue;
        std::vector<std::pair<NodeId, uint32_t>> x, y;
        for (auto& e : a->log) if (e.first != b->id) x.push_back(e);
        for (auto& e : b->log) if (e.first != a->id) y.push_back(e);
        EXPECT_EQ(x, y) << "seed " << seed << " members " << a->id << ", " << b->id;
      }
  }
  close_all(net);
  EXPECT_EQ(net.buffers, 0u) << "seed " << seed << ": buffers not given back";
  return r;
}

TEST(GroupOrder, CausalOrderHoldsAcrossSourcesEveryMessageOnce) {
  Tally sum;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Tally r = run(seed, order::Mode::kCausal, 2 + seed % (kMaxN - 1), false, false);
    sum.delivered += r.delivered;
  }
  EXPECT_GT(sum.delivered, 0u);
}

TEST(GroupOrder, TotalOrderIsOneSequenceEveryMessageOnce) {
  for (uint64_t seed = 100; seed <= 160; ++seed) run(seed, order::Mode::kTotal, 2 + seed % (kMaxN - 1), false, false);
}

TEST(GroupOrder, ACrashedMemberLeavesAndTheOthersGoOn) {
  for (uint64_t seed = 200; seed <= 240; ++seed) {
    run(seed, order::Mode::kCausal, 3 + seed % 3, true, false);
    run(seed, order::Mode::kTotal, 3 + seed % 3, true, false);
  }
}

TEST(GroupOrder, ForgedRecordsAreDroppedAndCountedNeverDelivered) {
  uint64_t bad = 0;
  for (uint64_t seed = 300; seed <= 330; ++seed) bad += run(seed, order::Mode::kCausal, 3, false, true).bad;
  EXPECT_GT(bad, 0u);
}

TEST(GroupOrder, OptionsAreChecked) {
  Member m;
  const NodeId two[] = {1, 2};
  const NodeId one[] = {1};
  EXPECT_EQ(m.g.init(order::Mode::kCausal, one, 1, 4, 8, &m), -EINVAL);
  EXPECT_EQ(m.g.init(order::Mode::kCausal, two, 3, 4, 8, &m), -EINVAL);  // not a member
  EXPECT_EQ(m.g.init(order::Mode::kTotal, two, 1, 0, 8, &m), -EINVAL);
  EXPECT_EQ(m.g.init(order::Mode::kTotal, two, 1, 4, 8, nullptr), -EINVAL);
  EXPECT_EQ(m.g.init(order::Mode::kTotal, two, 2, 4, 8, &m), 0);
  uint8_t head[order::kMaxRecord];
  EXPECT_EQ(m.g.prepare(head), -EAGAIN);  // member 1 has not joined our stream
}


// A member's big messages (held in the big pool's share) not yet delivered everywhere stay
// within their own window, whatever order_window allows for the rest.
TEST(GroupOrder, BigMessagesHaveAWindowOfTheirOwn) {
  EXPECT_EQ(GroupOrder::big_window(order::Mode::kCausal, 2, 24), 24u);
  EXPECT_EQ(GroupOrder::big_window(order::Mode::kTotal, 2, 24), 12u);
  EXPECT_EQ(GroupOrder::big_window(order::Mode::kTotal, 4, 24), 4u);
  EXPECT_EQ(GroupOrder::big_window(order::Mode::kTotal, 64, 24), 1u);
  for (order::Mode mode : {order::Mode::kCausal, order::Mode::kTotal}) {
    Net net;
    ASSERT_TRUE(open_net(net, 11, 2, mode, 16));
    Member& a = *net.m[0];
    Member& b = *net.m[1];
    a.g.limit_big(2);
    const std::vector<bool> crashed(2, false);
    receive(net, a, crashed);  // b joined
    uint8_t head[order::kMaxRecord];
    auto send = [&](bool big) {
      const int rc = a.g.prepare(head, big);
      if (rc != 0) return rc;
      const bool went = a.send({head, a.g.head_len()}, payload(a), false) == 0;
      a.g.sent(went);
      a.sent_msgs += went;
      return 0;
    };
    EXPECT_EQ(send(true), 0);
    EXPECT_EQ(send(true), 0);
    EXPECT_EQ(send(true), -EAGAIN);
    EXPECT_EQ(send(false), 0);  // the rest of the window is the small ones'
    for (int i = 0; i < 200; ++i) receive(net, b, crashed), receive(net, a, crashed);
    EXPECT_EQ(send(true), 0) << "b delivered them: the big window opened again";
    close_all(net);
    EXPECT_EQ(net.buffers, 0u);
  }
}

// Total order, every other member gone: the one left holds and delivers alone, so
// its sends go on (they stopped after order_window more, -EAGAIN for good).
TEST(GroupOrder, TheLastMemberOfATotalOrderSendsOn) {
  for (uint32_t n : {2u, 3u}) {
    Net net;
    ASSERT_TRUE(open_net(net, 7 + n, n, order::Mode::kTotal, 4));
    std::vector<bool> crashed(n, false);
    for (uint32_t i = 1; i < n; ++i) crashed[i] = true, crash(net, *net.m[i]);
    Member& me = *net.m[0];
    uint32_t sent = 0;
    for (int step = 0; step < 2000 && sent < 100; ++step) {
      receive(net, me, crashed);
      if (send_one(me)) ++sent;
    }
    EXPECT_EQ(sent, 100u) << n << " members";
    EXPECT_EQ(me.g.pending(), 0u);
    close_all(net);
    EXPECT_EQ(net.buffers, 0u);
  }
}

/** @p me's receive call that pulls at most @p max messages, and only of source slot @p from
 *  (any: kMaxN), its events first; what it delivers is checked and given back.
 *  @return how many it pulled. */
int receive_only(Net& net, Member& me, unsigned max, uint32_t from = kMaxN) {
  const std::vector<bool> crashed(me.delivered.size(), false);
  unsigned left = max;
  auto take = [&](imago_msg* in, unsigned k) {
    unsigned n = 0;
    while (n < k && n < left && !me.events.empty()) in[n++] = me.events.front(), me.events.pop_front();
    for (uint32_t s = 0; s < me.in.size(); ++s)
      while ((from == kMaxN || s == from) && n < k && n < left && !me.in[s].empty())
        in[n++] = me.in[s].front(), me.in[s].pop_front();
    left -= n;
    return n;
  };
  imago_msg out[16];
  const int n = me.g.receive(out, 16, take);
  for (int i = 0; i < n; ++i) check(net, me, out[i], crashed), give_back(net, out[i]);
  return static_cast<int>(max - left);
}

/** @p me sends @p n messages. @return whether all went. */
bool send_n(Member& me, int n) {
  for (int i = 0; i < n; ++i)
    if (!send_one(me)) return false;
  return true;
}

/** @p n members of a causal order of @p window, seeded @p seed, no send refused, each having
 *  seen the others join its stream. */
bool causal_net(Net& net, uint64_t seed, uint32_t n, uint32_t window) {
  if (!open_net(net, seed, n, order::Mode::kCausal, window)) return false;
  for (auto& x : net.m) receive_only(net, *x, 8);
  return true;
}

// A member whose sends the ring refused while it delivered a source's messages told that
// source nothing: its stamps never went. It counted them as told, so once the source's small
// window was full it credited it only after kIdleCredit (64) receive calls that found nothing
// (an application that naps or waits between them: that many naps; one that waits in
// imago_wait() for a message: never). Now the credit goes out in the receive call that
// delivered half a window, and one credit message does it.
TEST(GroupOrder, ASenderWhoseWindowIsFullIsCreditedWithinAFewReceives) {
  Net net;
  ASSERT_TRUE(causal_net(net, 3, 2, 4));
  Member& a = *net.m[0];
  Member& b = *net.m[1];
  ASSERT_TRUE(send_n(a, 4));
  uint8_t head[order::kMaxRecord];
  EXPECT_EQ(a.g.prepare(head), -EAGAIN) << "the window (4) is full";
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(receive_only(net, b, 1), 1);  // one of a's
    net.refuse = 1;                         // b's ring is full: its message does not go
    EXPECT_FALSE(send_one(b));
    net.refuse = 0;
  }
  EXPECT_EQ(b.delivered[0], 4u);
  for (int i = 0; i < 4; ++i) receive_only(net, b, 8), receive_only(net, a, 8);
  EXPECT_TRUE(send_one(a)) << "b delivered all 4 of a's and a was not told within 4 receive calls";
  EXPECT_LE(b.g.counters().records, 2u) << "a credit a half window, no more";
  close_all(net);
  EXPECT_EQ(net.buffers, 0u);
}

// A source whose window is full of messages a member holds back for another's (their causal
// past) waits for that member: it is credited in the receive call that delivers the first of
// them, not once half a window of them got delivered. At a large window the credits are as
// few as before: one per half window.
TEST(GroupOrder, ASourceWaitingForAMemberIsCreditedAtItsFirstDelivery) {
  Net net;
  ASSERT_TRUE(causal_net(net, 4, 3, 4));
  Member& a = *net.m[0];
  Member& b = *net.m[1];
  Member& c = *net.m[2];
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(send_one(c));
  // a sends after each of c's: a1 after c1, a2 after c2, a3 and a4 after c3.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(receive_only(net, a, 1, c.slot), 1);
    ASSERT_TRUE(send_one(a));
  }
  ASSERT_TRUE(send_one(a));
  uint8_t head[order::kMaxRecord];
  EXPECT_EQ(a.g.prepare(head), -EAGAIN) << "the window (4) is full";
  for (int i = 0; i < 4; ++i) receive_only(net, c, 8), receive_only(net, a, 8, c.slot);  // c credits a
  EXPECT_EQ(a.g.prepare(head), -EAGAIN) << "b has not told a anything";
  // b gets all of a's, held back for c's, then c1: it delivers c1 and a1.
  ASSERT_EQ(receive_only(net, b, 4, a.slot), 4);
  EXPECT_EQ(b.delivered[0], 0u);
  ASSERT_EQ(receive_only(net, b, 1, c.slot), 1);
  EXPECT_EQ(b.delivered[0], 1u);
  receive_only(net, a, 8);
  EXPECT_TRUE(send_one(a)) << "a waited for b, which delivered one of its and did not say";
  close_all(net);
  EXPECT_EQ(net.buffers, 0u);

  // Window 256, a source far ahead of one member: credits go once per half window.
  Net big;
  ASSERT_TRUE(causal_net(big, 5, 2, 256));
  uint32_t sent = 0;
  for (int step = 0; step < 4000 && big.m[1]->delivered[0] < 2000; ++step) {
    while (sent < 2000 && send_one(*big.m[0])) ++sent;
    receive_only(big, *big.m[1], 1 + static_cast<unsigned>(big.rng() % 32));
    receive_only(big, *big.m[0], 32);
  }
  EXPECT_EQ(big.m[1]->delivered[0], 2000u);
  EXPECT_LE(big.m[1]->g.counters().records, 2000u / 128 + 1) << "a credit per half window";
  close_all(big);
  EXPECT_EQ(big.buffers, 0u);
}

// A member that waits for messages (imago_wait()) once it delivered a source's last few
// (fewer than half a window) makes no receive call that finds nothing: it never told that
// source, whose pending messages stayed above 0, and a source that waits for them to be
// delivered before it closes waited for ever. imago_wait() calls idle(): the credit goes.
TEST(GroupOrder, AMemberThatWaitsForMessagesTellsHowFarItIs) {
  Net net;
  ASSERT_TRUE(causal_net(net, 6, 2, 8));
  Member& a = *net.m[0];
  ASSERT_TRUE(send_n(a, 3));
  Member& b = *net.m[1];
  ASSERT_EQ(receive_only(net, b, 8), 3);
  EXPECT_EQ(b.delivered[0], 3u);
  for (int i = 0; i < 4; ++i) receive_only(net, a, 8);
  EXPECT_EQ(a.g.pending(), 3u) << "three below half a window: no credit yet";
  b.g.idle();
  b.g.idle();  // again: nothing new, nothing sent
  EXPECT_EQ(b.g.counters().records, 1u);
  receive_only(net, a, 8);
  EXPECT_EQ(a.g.pending(), 0u);
  close_all(net);
  EXPECT_EQ(net.buffers, 0u);
}

// Total order's records gate every other member's delivery: an ACK left to wait up to 20 us
// for company in its frame (coalescing, flags 0) delayed each delivery by as much (on the
// wire, bench/order_cost.sh: 2.07-2.19x FIFO's delay, above issue 13's 2x). A receive call
// that found the ring emptied (light load) sends its records at once (IMAGO_FASTPATH); under
// load (a full pull) they wait to share frames, as the throughput at full rate wants.
TEST(GroupOrder, RecordsGoAtOnceUnderLightLoadAndShareFramesUnderLoad) {
  Net net;
  ASSERT_TRUE(open_net(net, 8, 3, order::Mode::kTotal, 64));
  for (int round = 0; round < 2; ++round)  // the joins, then every member's INSTALLED
    for (auto& x : net.m) receive_only(net, *x, 8);
  Member& a = *net.m[0];
  Member& b = *net.m[1];
  ASSERT_TRUE(send_one(a));
  const uint32_t fast = b.fast_sends, slow = b.slow_sends;
  ASSERT_EQ(receive_only(net, b, 8), 1);
  EXPECT_EQ(b.fast_sends, fast + 1) << "b's ACK of a lone message waited to share its frame";
  EXPECT_EQ(b.slow_sends, slow);
  ASSERT_TRUE(send_n(a, 40));
  ASSERT_EQ(receive_only(net, b, 32), 32);  // a full pull: more is coming
  EXPECT_EQ(b.fast_sends, fast + 1);
  EXPECT_EQ(b.slow_sends, slow + 1) << "under load the ACKs share frames";
  close_all(net);
  EXPECT_EQ(net.buffers, 0u);
}

/** One receive call of @p x. @return the ENDED (GONE) events of member @p c it gave, the
 *  other messages it gave added to @p other. */
uint32_t ended_of(Net& net, Member& x, NodeId c, uint32_t* other) {
  uint32_t ended = 0;
  imago_msg out[16];
  const int n = x.g.receive(out, 16, [&x](imago_msg* in, unsigned max) { return pull(x, in, max); });
  for (int i = 0; i < n; ++i) {
    imago_group_event ev;
    std::memcpy(&ev, out[i].u.inline_data, sizeof ev);
    const bool gone = (out[i].flags & IMAGO_MSG_F_EVENT) && ev.kind == IMAGO_GROUP_ENDED &&
                      ev.reason == IMAGO_GROUP_END_GONE && ev.source == c && ev.member == x.id;
    ++(gone ? ended : *other);
    give_back(net, out[i]);
  }
  return ended;
}

/** Forget every event of member @p c at @p x: it never opened there. */
void never_opened(Member& x, NodeId c) {
  std::erase_if(x.events, [&](const imago_msg& d) {
    imago_group_event ev;
    std::memcpy(&ev, d.u.inline_data, sizeof ev);
    return ev.member == c;
  });
}

/** Three members of @p mode seeded @p seed, the third of which never opened: the first two
 *  never see it join, and have taken what they gave each other. @return its id. */
NodeId open_without_third(Net& net, uint64_t seed, order::Mode mode) {
  EXPECT_TRUE(open_net(net, seed, 3, mode, 8));
  Member& a = *net.m[0];
  Member& b = *net.m[1];
  const NodeId c = net.m[2]->id;
  net.m[2]->crashed = true;
  for (Member* x : {&a, &b}) never_opened(*x, c);
  for (int round = 0; round < 3; ++round) receive_only(net, a, 8), receive_only(net, b, 8);
  return c;
}

// A member whose node died before it opened the group never joins anyone's stream: the
// others' sends were -EAGAIN for ever (an outside tester: the order waited for it to join).
// The engine side's word that a node died (kEventNodeGone) now takes such a member out of the
// order, and the application gets the ENDED (GONE) its stream would have given; the word is
// the ordering's alone otherwise (repeated, or of a node that is no member).
TEST(GroupOrder, AMemberWhoseNodeDiedBeforeItOpenedLeavesTheOrder) {
  for (const order::Mode mode : {order::Mode::kCausal, order::Mode::kTotal}) {
    Net net;
    const NodeId c = open_without_third(net, 9, mode);
    Member& a = *net.m[0];
    Member& b = *net.m[1];
    EXPECT_FALSE(send_one(a)) << "c has not joined a's stream";
    uint32_t ended = 0, other = 0;
    for (Member* x : {&a, &b}) {
      x->events.push_back(event(order::kEventNodeGone, c, 0, IMAGO_GROUP_END_GONE));
      x->events.push_back(event(order::kEventNodeGone, c, 0, IMAGO_GROUP_END_GONE));   // again
      x->events.push_back(event(order::kEventNodeGone, 99, 0, IMAGO_GROUP_END_GONE));  // no member
      ended += ended_of(net, *x, c, &other);
    }
    EXPECT_EQ(ended, 2u) << "one ENDED (GONE) for c at each of a and b";
    EXPECT_EQ(other, 0u) << "the ordering's own word reached the application";
    uint32_t sent = 0;
    for (int step = 0; step < 400 && (a.delivered[1] < 10 || b.delivered[0] < 10); ++step) {
      if (sent < 20 && send_one(sent % 2 ? b : a)) ++sent;
      receive_only(net, a, 8), receive_only(net, b, 8);
    }
    EXPECT_EQ(b.delivered[0], 10u) << "b got a's messages";
    EXPECT_EQ(a.delivered[1], 10u) << "a got b's messages";
    EXPECT_EQ(net.violations, 0u);
    close_all(net);
    EXPECT_EQ(net.buffers, 0u);
  }
}

// Total order: a member that left the order on another's word (b's node saw c's die; a never
// had a session with c) while its stream had not started here: an outside tester's members
// then waited for its stream's end until their --timeout, for none would come. It gets the
// ENDED (GONE) at once, and once; causal order still waits for the stream to end here.
TEST(GroupOrder, AMemberThatLeftOnAnothersWordBeforeItsStreamStartedHereEndsHere) {
  for (const order::Mode mode : {order::Mode::kTotal, order::Mode::kCausal}) {
    Net net;
    const NodeId c = open_without_third(net, 11, mode);
    Member &a = *net.m[0], &b = *net.m[1];
    b.events.push_back(event(order::kEventNodeGone, c, 0, IMAGO_GROUP_END_GONE));  // at b alone
    uint32_t at_a = 0, at_b = 0, other = 0;
    for (int round = 0; round < 20; ++round) at_b += ended_of(net, b, c, &other), at_a += ended_of(net, a, c, &other);
    EXPECT_EQ(at_b, 1u);
    EXPECT_EQ(at_a, mode == order::Mode::kTotal ? 1u : 0u) << "at a, which heard of c's end from b alone";
    EXPECT_EQ(other, 0u);
    EXPECT_EQ(a.g.counters().departed, 1u) << "b's word reached a";
    close_all(net);
    EXPECT_EQ(net.buffers, 0u);
  }
}

// A departure is told on: b saw c's stream end and told the others GONE of c, but c never
// received b's stream (its joins to b were lost: an outside tester dropped them), so c never
// learnt it was left out, and went on holding the others' messages for an order that had
// moved on without it. a, which c does receive, now tells it too: c is left out
// (-ECONNRESET) and a and b go on.
TEST(GroupOrder, AMemberLeftOutOnlyByAMemberWhoseStreamItLacksIsToldByAnother) {
  for (const order::Mode mode : {order::Mode::kTotal, order::Mode::kCausal}) {
    Net net;
    ASSERT_TRUE(open_net(net, 13, 3, mode, 8));
    Member &a = *net.m[0], &b = *net.m[1], &c = *net.m[2];
    for (int round = 0; round < 3; ++round)
      for (auto& x : net.m) receive_only(net, *x, 8);
    b.events.push_back(event(IMAGO_GROUP_ENDED, c.id, b.id, IMAGO_GROUP_END_GONE));
    int rc = 0;
    for (int round = 0; round < 20 && rc >= 0; ++round) {
      receive_only(net, a, 8), receive_only(net, b, 8);
      for (imago_msg& d : c.in[b.slot]) give_back(net, d);
      c.in[b.slot].clear();  // b's stream never reaches c
      imago_msg out[16];
      rc = c.g.receive(out, 16, [&c](imago_msg* in, unsigned max) { return pull(c, in, max); });
      for (int i = 0; i < rc; ++i) give_back(net, out[i]);
    }
    EXPECT_EQ(rc, -ECONNRESET) << "c was not told it was left out";
    EXPECT_EQ(a.g.counters().departed, 1u);
    EXPECT_TRUE(send_one(a)) << "a goes on with b";
    close_all(net);
    EXPECT_EQ(net.buffers, 0u);
  }
}

}  // namespace
