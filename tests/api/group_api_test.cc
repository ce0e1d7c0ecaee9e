// SPDX-License-Identifier: BSD-3-Clause
// Group endpoints (imago_group_open) end to end in embedded mode: nodes 1 and 2 over a
// crossed net_ring pair in this process, engines on lcore 1. Node 1 sends to a group, node 2
// receives it: messages of every tier in order with their source, the events in their
// place, the documented errors, and closing either side.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <rte_mempool.h>

#include "api/imago.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

imago_t* g_im = nullptr;

imago_ep_t* open_group(uint32_t g, uint64_t node, uint32_t flags, int* rc = nullptr) {
  imago_group_opts o{node, 0, flags};
  imago_ep_t* ep = nullptr;
  const int r = imago_group_open(g_im, g, &o, &ep);
  if (rc != nullptr) *rc = r;
  return r == 0 ? ep : nullptr;
}

/** What one receiving endpoint got: messages (source, bytes) and events, in order. */
struct Got {
  struct Item {
    bool event;
    uint64_t src;
    std::vector<uint8_t> bytes;
    imago_group_event ev;
  };
  std::vector<Item> items;
  unsigned tiers[4] = {0, 0, 0, 0};  // messages by the tier they came in
  size_t messages() const {
    size_t n = 0;
    for (const Item& i : items) n += !i.event;
    return n;
  }
  const imago_group_event* find(uint32_t kind) const {
    for (const Item& i : items)
      if (i.event && i.ev.kind == kind) return &i.ev;
    return nullptr;
  }
};

/** One burst from @p ep into @p got. @return descriptors received (negative: an error). */
int drain_once(imago_ep_t* ep, Got& got) {
  imago_msg m[32];
  const int n = imago_recv_burst(ep, m, 32);
  for (int i = 0; i < n; ++i) {
    Got::Item it{(m[i].flags & IMAGO_MSG_F_EVENT) != 0, m[i].src, {}, {}};
    const auto* p = static_cast<const uint8_t*>(imago_msg_data(&m[i]));
    if (it.event) {
      EXPECT_EQ(m[i].len, sizeof(imago_group_event));
      std::memcpy(&it.ev, p, sizeof it.ev);
    } else {
      it.bytes.assign(p, p + m[i].len);
      if (m[i].tier < 4) ++got.tiers[m[i].tier];
    }
    got.items.push_back(std::move(it));
  }
  if (n > 0) {
    EXPECT_EQ(imago_release(ep, m, static_cast<unsigned>(n)), 0);
  }
  return n;
}

/** Receive on @p ep until @p done(got) or 5 s pass. */
template <typename Done>
bool receive(imago_ep_t* ep, Got& got, Done done) {
  const auto end = Clock::now() + 5s;
  while (!done(got) && Clock::now() < end) {
    const int n = drain_once(ep, got);
    if (n < 0) return false;
    if (n == 0) std::this_thread::sleep_for(50us);
  }
  return done(got);
}

std::vector<uint8_t> message(uint32_t seq, uint32_t len) {
  std::vector<uint8_t> b(len);
  for (uint32_t i = 0; i < len; ++i) b[i] = static_cast<uint8_t>(seq * 31u + i * 7u + (i >> 8));
  if (len >= 4) std::memcpy(b.data(), &seq, 4);
  return b;
}

// Sizes of every tier: inline, the small pool, the frame pool, several frames.
uint32_t size_of(uint32_t seq) {
  static constexpr uint32_t kSizes[] = {0, 8, 48, 49, 300, 1400, 2000, 5000, 20000};
  return kSizes[seq % std::size(kSizes)];
}

/** Send messages first .. first + count - 1 on @p ep; while the sender is held back, the
 *  member's endpoint @p rx (if any) is read into @p got: a member that does not read holds
 *  the source back, and is expired (--group-expire-ms) if it does so too long. */
void send_all(imago_ep_t* ep, uint32_t first, uint32_t count, imago_ep_t* rx = nullptr, Got* got = nullptr) {
  const auto end = Clock::now() + 10s;
  for (uint32_t s = first; s < first + count && Clock::now() < end;) {
    const std::vector<uint8_t> b = message(s, size_of(s));
    const int rc = imago_send(ep, b.data(), static_cast<uint32_t>(b.size()), 0);
    if (rc == 0) {
      ++s;
      continue;
    }
    ASSERT_EQ(rc, -EAGAIN);
    if (rx == nullptr || drain_once(rx, *got) <= 0) std::this_thread::sleep_for(20us);
  }
}

void expect_messages(const Got& got, uint32_t first, uint32_t count) {
  uint32_t s = first;
  for (const Got::Item& i : got.items) {
    if (i.event) continue;
    ASSERT_EQ(i.src, 1u);
    ASSERT_EQ(i.bytes, message(s, size_of(s))) << "message " << s;
    ++s;
  }
  EXPECT_EQ(s, first + count);
}

TEST(Group, OpenErrorsAreDocumented) {
  int rc;
  imago_ep_t* ep = nullptr;
  EXPECT_EQ(imago_group_open(g_im, 0, nullptr, &ep), -EINVAL);
  EXPECT_EQ(imago_group_open(g_im, 5, nullptr, nullptr), -EINVAL);
  EXPECT_EQ(imago_group_open(nullptr, 5, nullptr, &ep), -EINVAL);
  EXPECT_EQ(open_group(5, 1, 0x80, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // unknown flag
  EXPECT_EQ(open_group(5, 1, IMAGO_GROUP_SEND | IMAGO_GROUP_FROM_OLDEST, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // FROM_OLDEST without RECV
  EXPECT_EQ(open_group(5, 7, IMAGO_GROUP_SEND, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // no node 7 here
  imago_group_opts bad_ring{1, 100, IMAGO_GROUP_SEND};
  EXPECT_EQ(imago_group_open(g_im, 5, &bad_ring, &ep), -EINVAL);

  imago_ep_t* a = open_group(5, 1, IMAGO_GROUP_RECV, &rc);
  ASSERT_NE(a, nullptr) << rc;
  EXPECT_EQ(open_group(5, 1, IMAGO_GROUP_SEND, &rc), nullptr);
  EXPECT_EQ(rc, -EEXIST);  // one group endpoint per node and group
  EXPECT_EQ(imago_ep_group(a), 5u);
  EXPECT_EQ(imago_ep_peer(a), 0u);
  EXPECT_EQ(imago_peer_ready(a), 0);
  // A receive-only endpoint refuses sends.
  const uint8_t b[8] = {};
  void* buf = nullptr;
  EXPECT_EQ(imago_send(a, b, sizeof b, 0), -EINVAL);
  EXPECT_EQ(imago_buf_alloc(a, 8, &buf), -EINVAL);
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_ep_group(a), 0u);  // closed: not live

  // A send endpoint is ready at once, and its largest message is the group's.
  imago_ep_t* s = open_group(6, 1, IMAGO_GROUP_SEND, &rc);
  ASSERT_NE(s, nullptr) << rc;
  EXPECT_EQ(imago_peer_ready(s), 1);
  EXPECT_GT(imago_max_message(s), 60000u);
  EXPECT_EQ(imago_close(s), 0);
}

TEST(Group, EveryTierArrivesInOrderWithItsSourceAndTheEventsInTheirPlace) {
  constexpr uint32_t kG = 0x1234, kN = 2000;
  int rc;
  imago_ep_t* rx = open_group(kG, 2, IMAGO_GROUP_RECV, &rc);
  ASSERT_NE(rx, nullptr) << rc;
  imago_ep_t* tx = open_group(kG, 1, IMAGO_GROUP_SEND, &rc);
  ASSERT_NE(tx, nullptr) << rc;
  // Node 2 is admitted: it sees its stream start, node 1 sees it join.
  Got got, src_events;
  ASSERT_TRUE(receive(rx, got, [](const Got& g) { return g.find(IMAGO_GROUP_STARTED) != nullptr; }));
  ASSERT_TRUE(receive(tx, src_events, [](const Got& g) { return g.find(IMAGO_GROUP_JOINED) != nullptr; }));
  const imago_group_event* joined = src_events.find(IMAGO_GROUP_JOINED);
  EXPECT_EQ(joined->member, 2u);
  EXPECT_EQ(joined->source, 1u);
  EXPECT_EQ(joined->view, 1u);
  const imago_group_event* started = got.find(IMAGO_GROUP_STARTED);
  EXPECT_EQ(started->source, 1u);
  EXPECT_EQ(started->member, 2u);

  send_all(tx, 0, kN, rx, &got);
  if (!receive(rx, got, [&](const Got& g) { return g.messages() == kN; })) {
    imago_ep_stats a{}, b{};
    imago_stats(tx, &a), imago_stats(rx, &b);
    imago_node_stats n1{}, n2{};
    imago_node_stats_get(g_im, 0, &n1), imago_node_stats_get(g_im, 1, &n2);
    FAIL() << got.messages() << " tx sent " << a.msgs_sent << " ring " << a.tx_ring_used << " inv " << a.tx_invalid
           << " rx recv " << b.msgs_received << " ringfull " << b.rx_ring_full << " nobuf " << b.rx_no_buffer
           << " n1 frames " << n1.frames_sent << " rej " << n1.frames_rejected << " n2 frames_in " << n2.frames_received
           << " rej " << n2.frames_rejected << " big avail " << rte_mempool_avail_count(rte_mempool_lookup("imago_big"))
           << " rx ring " << b.rx_ring_used << " loans? ";
  }
  expect_messages(got, 0, kN);
  imago_ep_stats st{};
  ASSERT_EQ(imago_stats(rx, &st), 0);
  EXPECT_EQ(st.msgs_received, kN);
  EXPECT_GE(st.events, 2u);  // STARTED, and our own JOINED in the stream
  EXPECT_EQ(st.events_lost, 0u);
  // Up to 48 bytes in the descriptor; 49 to 240 inline in the ring, copied out; the rest in
  // buffers.
  uint32_t inline_n = 0, ring_n = 0;
  for (uint32_t q = 0; q < kN; ++q) inline_n += size_of(q) <= IMAGO_MSG_INLINE_MAX, ring_n += size_of(q) > IMAGO_MSG_INLINE_MAX && size_of(q) <= IMAGO_SEND_INLINE_MAX;
  EXPECT_EQ(st.rx_inline, inline_n + ring_n);
  EXPECT_EQ(got.tiers[IMAGO_TIER_INLINE], inline_n);
  EXPECT_EQ(got.tiers[IMAGO_TIER_COPY], ring_n);

  // The source closes: the member gets everything, then ENDED (CLOSED), and leaves.
  send_all(tx, kN, 100, rx, &got);
  // What the engine took is delivered after the close (what is still in the tx ring is not).
  const auto until = Clock::now() + 5s;
  while (imago_stats(tx, &st) == 0 && st.msgs_sent < kN + 100 && Clock::now() < until) drain_once(rx, got);
  ASSERT_EQ(st.msgs_sent, kN + 100);
  // Once the member acknowledged everything, nothing is pending; the view has one member.
  while (imago_stats(tx, &st) == 0 && st.group_pending != 0 && Clock::now() < until + 5s) drain_once(rx, got);
  EXPECT_EQ(st.group_pending, 0u);
  EXPECT_EQ(st.group_members, 1u);
  EXPECT_EQ(st.group_view, 1u);
  ASSERT_EQ(imago_close(tx), 0);
  ASSERT_TRUE(receive(rx, got, [](const Got& g) { return g.find(IMAGO_GROUP_ENDED) != nullptr; }));
  expect_messages(got, 0, kN + 100);
  const imago_group_event* ended = got.find(IMAGO_GROUP_ENDED);
  EXPECT_EQ(ended->reason, static_cast<uint32_t>(IMAGO_GROUP_END_CLOSED));
  EXPECT_EQ(ended->source, 1u);
  EXPECT_TRUE(got.items.back().event);  // nothing after the end

  // Opened again (once its members left), the stream starts anew for the member still joined.
  imago_ep_t* tx2 = nullptr;
  const auto end = Clock::now() + 5s;
  while ((tx2 = open_group(kG, 1, IMAGO_GROUP_SEND, &rc)) == nullptr && rc == -EBUSY && Clock::now() < end)
    std::this_thread::sleep_for(1ms);
  ASSERT_NE(tx2, nullptr) << rc;
  Got again;
  ASSERT_TRUE(receive(rx, again, [](const Got& g) { return g.find(IMAGO_GROUP_STARTED) != nullptr; }));
  send_all(tx2, 0, 50, rx, &again);
  ASSERT_TRUE(receive(rx, again, [](const Got& g) { return g.messages() == 50; }));
  expect_messages(again, 0, 50);

  // The member leaves: the source sees it go.
  Got left;
  ASSERT_EQ(imago_close(rx), 0);
  ASSERT_TRUE(receive(tx2, left, [](const Got& g) { return g.find(IMAGO_GROUP_LEFT) != nullptr; }));
  EXPECT_EQ(left.find(IMAGO_GROUP_LEFT)->member, 2u);
  EXPECT_EQ(imago_close(tx2), 0);
}

TEST(Group, BothSidesOnOneEndpointAndAMemberJoiningLateFromTheOldest) {
  constexpr uint32_t kG = 77;
  int rc;
  imago_ep_t* a = open_group(kG, 1, 0, &rc);  // 0: SEND | RECV
  ASSERT_NE(a, nullptr) << rc;
  send_all(a, 0, 20);  // no member yet: sent to nobody, released at once
  imago_ep_t* b = open_group(kG, 2, IMAGO_GROUP_RECV | IMAGO_GROUP_FROM_OLDEST, &rc);
  ASSERT_NE(b, nullptr) << rc;
  Got got;
  ASSERT_TRUE(receive(b, got, [](const Got& g) { return g.find(IMAGO_GROUP_STARTED) != nullptr; }));
  send_all(a, 20, 30, b, &got);
  // From the oldest the source still holds: the 30 sent after the join, and before them
  // any of the first 20 not yet released (sent to nobody, they go once flushed).
  ASSERT_TRUE(receive(b, got, [](const Got& g) {
    return g.messages() >= 30 && !g.items.back().event && g.items.back().bytes == message(49, size_of(49));
  })) << got.messages();
  ASSERT_LE(got.messages(), 50u);
  expect_messages(got, static_cast<uint32_t>(50 - got.messages()), static_cast<uint32_t>(got.messages()));
  EXPECT_EQ(imago_close(b), 0);
  EXPECT_EQ(imago_close(a), 0);
}

/** A NACK stream's member: messages of 100 bytes numbered from 0 in order, once, intact; a
 *  number skipped only after a LOST event. @return the messages received. */
uint32_t expect_no_silent_skip(const Got& got, uint32_t count) {
  uint32_t next = 0, n = 0;
  bool lost = false;
  for (const Got::Item& i : got.items) {
    if (i.event) {
      if (i.ev.kind == IMAGO_GROUP_LOST) {
        EXPECT_GT(i.ev.count, 0u);
        EXPECT_EQ(i.ev.source, 1u);
        lost = true;
      }
      continue;
    }
    uint32_t seq = ~0u;
    if (i.bytes.size() == 100) std::memcpy(&seq, i.bytes.data(), 4);
    EXPECT_TRUE(seq < count && i.bytes == message(seq, 100)) << "a corrupt message";
    EXPECT_TRUE(seq == next || (seq > next && lost)) << "message " << seq << " where " << next << " was due";
    if (seq >= next) next = seq + 1;
    lost = false;
    ++n;
  }
  EXPECT_TRUE(next == count || lost) << "the tail " << next << ".." << count << " neither delivered nor reported lost";
  return n;
}

TEST(Group, ANackStreamNeverWaitsForAMemberAndReportsWhatItCouldNotRepair) {
  constexpr uint32_t kG = 0x4E41, kN = 20000;
  int rc;
  EXPECT_EQ(open_group(kG, 1, IMAGO_GROUP_RECV | IMAGO_GROUP_NACK, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // NACK without SEND
  imago_ep_t* rx = open_group(kG, 2, IMAGO_GROUP_RECV, &rc);
  ASSERT_NE(rx, nullptr) << rc;
  imago_ep_t* tx = open_group(kG, 1, IMAGO_GROUP_SEND | IMAGO_GROUP_NACK, &rc);
  ASSERT_NE(tx, nullptr) << rc;
  Got got;
  ASSERT_TRUE(receive(rx, got, [](const Got& g) { return g.find(IMAGO_GROUP_STARTED) != nullptr; }));
  // Do: the member reads nothing while kN messages go out (its ring holds 1024, its window
  // --group-window 4096 units).
  const auto until = Clock::now() + 10s;
  for (uint32_t s = 0; s < kN && Clock::now() < until;) {
    const std::vector<uint8_t> b = message(s, 100);
    rc = imago_send(tx, b.data(), 100, 0);
    ASSERT_TRUE(rc == 0 || rc == -EAGAIN) << rc;
    if (rc == 0)
      ++s;
    else
      std::this_thread::sleep_for(20us);
  }
  // Expect: the sender was never held back by it (an ACK stream would wait for it forever).
  imago_ep_stats st{};
  while (imago_stats(tx, &st) == 0 && st.msgs_sent < kN && Clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(st.msgs_sent, kN) << "the sender was held back";
  // Then it reads: what it got is in order; what its ring and window could not hold came
  // to it as LOST, in place; nothing is skipped silently.
  // (The last message, unless it too was freed before it was asked for: then 5 s pass.)
  receive(rx, got, [](const Got& g) { return !g.items.empty() && g.items.back().bytes == message(kN - 1, 100); });
  std::this_thread::sleep_for(100ms);  // anything after the tail would show here
  while (drain_once(rx, got) > 0) {
  }
  const uint32_t n = expect_no_silent_skip(got, kN);
  EXPECT_GE(n, 1024u);
  EXPECT_LT(n, kN);
  EXPECT_NE(got.find(IMAGO_GROUP_LOST), nullptr);
  imago_node_stats n1{}, n2{};
  ASSERT_EQ(imago_node_stats_get(g_im, 0, &n1), 0);
  ASSERT_EQ(imago_node_stats_get(g_im, 1, &n2), 0);
  EXPECT_GT(n1.group_nack_freed, 0u);
  EXPECT_GE(n2.group_units_lost, kN - n);  // what the reports named (units: view records too)
  EXPECT_EQ(imago_close(tx), 0);
  EXPECT_EQ(imago_close(rx), 0);
}

imago_ep_t* open_ordered(uint32_t g, uint64_t node, uint32_t order, const uint64_t* members, uint32_t n,
                         uint32_t window, int* rc) {
  imago_group_opts o{node, 0, IMAGO_GROUP_SEND | IMAGO_GROUP_RECV | order, members, n, window};
  imago_ep_t* ep = nullptr;
  *rc = imago_group_open(g_im, g, &o, &ep);
  return *rc == 0 ? ep : nullptr;
}

TEST(Group, OrderedGroupOptionsAreChecked) {
  const uint64_t both[] = {1, 2}, twice[] = {1, 1}, without[] = {2, 3}, huge[] = {1, 1ull << 33};
  int rc;
  const uint32_t c = IMAGO_GROUP_CAUSAL;
  EXPECT_EQ(open_ordered(30, 1, c, nullptr, 2, 0, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);
  EXPECT_EQ(open_ordered(30, 1, c, both, 1, 0, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // fewer than two
  EXPECT_EQ(open_ordered(30, 1, c, twice, 2, 0, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // repeated
  EXPECT_EQ(open_ordered(30, 1, c, huge, 2, 0, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // not a node id
  EXPECT_EQ(open_ordered(30, 1, c, without, 2, 0, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // this node not among them
  EXPECT_EQ(open_ordered(30, 1, c | IMAGO_GROUP_TOTAL, both, 2, 0, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // both orders
  EXPECT_EQ(open_ordered(30, 1, c, both, 2, 5000, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);  // window
  EXPECT_EQ(open_ordered(30, 1, c | IMAGO_GROUP_NACK, both, 2, 0, &rc), nullptr);
  EXPECT_EQ(rc, -EINVAL);
  imago_group_opts o{1, 0, IMAGO_GROUP_SEND | IMAGO_GROUP_CAUSAL, both, 2, 0};
  imago_ep_t* ep = nullptr;
  EXPECT_EQ(imago_group_open(g_im, 30, &o, &ep), -EINVAL);  // SEND without RECV
  o = imago_group_opts{1, 0, IMAGO_GROUP_SEND | IMAGO_GROUP_RECV, both, 2, 0};
  EXPECT_EQ(imago_group_open(g_im, 30, &o, &ep), -EINVAL);  // members without an order
  ep = open_ordered(30, 1, c, both, 2, 0, &rc);  // and the failures above left nothing open
  ASSERT_NE(ep, nullptr) << rc;
  EXPECT_EQ(imago_close(ep), 0);
}

/** Both nodes of the pair open ordered group @p g and send each other kN messages of every
 *  tier while they receive: each gets the other's, whole, in order, once, headers removed. */
void ordered_exchange(uint32_t g, uint32_t order, uint32_t window = 16, uint32_t (*size)(uint32_t) = size_of) {
  constexpr uint32_t kN = 3000;
  const uint64_t members[] = {2, 1};
  int rc;
  imago_ep_t* a = open_ordered(g, 1, order, members, 2, window, &rc);
  ASSERT_NE(a, nullptr) << rc;
  const std::vector<uint8_t> first = message(0, size_of(0));
  EXPECT_EQ(imago_send(a, first.data(), 0, 0), -EAGAIN);  // node 2 has not joined
  void* buf = nullptr;
  EXPECT_EQ(imago_buf_alloc(a, 64, &buf), -ENOTSUP);
  imago_ep_t* b = open_ordered(g, 2, order, members, 2, window, &rc);
  ASSERT_NE(b, nullptr) << rc;
  // The ordering header comes off what a message may hold: 8 bytes, and a count per member
  // (causal order: 2 x 4 bytes here) or an 8-byte stamp (total order).
  imago_ep_t* plain = open_group(g + 100, 1, IMAGO_GROUP_SEND | IMAGO_GROUP_RECV);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(imago_max_message(plain) - imago_max_message(a), 16u);
  EXPECT_EQ(imago_close(plain), 0);
  imago_ep_t* ep[2] = {a, b};
  Got got[2];
  uint32_t sent[2] = {0, 0};
  auto messages_from = [size](const Got& g, uint64_t src) {
    uint32_t s = 0;
    for (const Got::Item& i : g.items) {
      if (i.event) continue;
      EXPECT_EQ(i.src, src);
      EXPECT_EQ(i.bytes, message(s, size(s))) << "message " << s << " from " << src;
      ++s;
    }
    return s;
  };
  const auto end = Clock::now() + 20s;
  while (Clock::now() < end && !(sent[0] == kN && sent[1] == kN && messages_from(got[0], 2) == kN &&
                                 messages_from(got[1], 1) == kN)) {
    for (int i = 0; i < 2; ++i) {
      for (int k = 0; k < 8 && sent[i] < kN; ++k) {
        const std::vector<uint8_t> m = message(sent[i], size(sent[i]));
        rc = imago_send(ep[i], m.data(), static_cast<uint32_t>(m.size()), 0);
        ASSERT_TRUE(rc == 0 || rc == -EAGAIN) << rc;
        if (rc != 0) break;
        ++sent[i];
      }
      ASSERT_GE(drain_once(ep[i], got[i]), 0);
    }
  }
  EXPECT_EQ(messages_from(got[0], 2), kN);
  EXPECT_EQ(messages_from(got[1], 1), kN);
  // The ordering holds what arrives until its order lets it out: in buffers, never in the
  // receive area a held message could fill.
  EXPECT_EQ(got[0].tiers[IMAGO_TIER_COPY] + got[1].tiers[IMAGO_TIER_COPY], 0u);
  EXPECT_GT(got[0].tiers[IMAGO_TIER_POOL], 0u);
  imago_ep_stats st{};
  ASSERT_EQ(imago_stats(a, &st), 0);
  EXPECT_EQ(st.order_bad, 0u);
  EXPECT_EQ(st.order_held, 0u);
  if (order == IMAGO_GROUP_TOTAL) {
    EXPECT_GT(st.order_records, 0u);  // numbers and holds
  }
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

TEST(Group, CausalGroupBetweenTwoNodes) { ordered_exchange(31, IMAGO_GROUP_CAUSAL); }
TEST(Group, TotalGroupBetweenTwoNodes) { ordered_exchange(32, IMAGO_GROUP_TOTAL); }

// Messages above the frame tier are held in the big pool, of which a node's deliveries have a
// share (24 buffers here: 64, less two reserves of 8, for two nodes). A window that holds back
// more than that no longer stalls the group: the big messages a member sends and its members
// have not all delivered stay within the share.
// An ordered session is one opening by every member: one that closes and opens the group
// again while the others stay open cannot take it up (what came before never reaches it).
// It is told so, -ECONNRESET, where it waited for ever before; the one that stayed goes on.
void rejoin(uint32_t g, uint32_t order) {
  const uint64_t members[] = {1, 2};
  int rc;
  imago_ep_t* a = open_ordered(g, 1, order, members, 2, 8, &rc);
  ASSERT_NE(a, nullptr) << rc;
  imago_ep_t* b = open_ordered(g, 2, order, members, 2, 8, &rc);
  ASSERT_NE(b, nullptr) << rc;
  Got ga, gb;
  ASSERT_TRUE(receive(a, ga, [](const Got& x) { return x.find(IMAGO_GROUP_JOINED) != nullptr; }));
  const auto first = Clock::now() + 5s;
  for (uint32_t s = 0; gb.messages() < 20 && Clock::now() < first;) {
    const std::vector<uint8_t> m = message(s, 64);
    if (s < 20 && imago_send(a, m.data(), 64, 0) == 0) ++s;
    ASSERT_GE(drain_once(a, ga), 0);
    ASSERT_GE(drain_once(b, gb), 0);
  }
  ASSERT_EQ(gb.messages(), 20u);
  EXPECT_EQ(imago_close(b), 0);
  ASSERT_TRUE(receive(a, ga, [](const Got& x) { return x.find(IMAGO_GROUP_LEFT) != nullptr; }));
  const auto end = Clock::now() + 5s;
  do {
    b = open_ordered(g, 2, order, members, 2, 8, &rc);  // -EBUSY while its last stream ends
    if (b == nullptr) std::this_thread::sleep_for(1ms);
  } while (b == nullptr && rc == -EBUSY && Clock::now() < end);
  ASSERT_NE(b, nullptr) << rc;
  Got again;
  int last = 0;
  for (uint32_t s = 20; last >= 0 && Clock::now() < end;) {
    const std::vector<uint8_t> m = message(s, 64);
    if (imago_send(a, m.data(), 64, 0) == 0) ++s;  // a goes on, alone in the order
    ASSERT_GE(drain_once(a, ga), 0);
    last = drain_once(b, again);
  }
  EXPECT_EQ(last, -ECONNRESET) << "the reopened member was not told it was left out";
  EXPECT_EQ(again.messages(), 0u);
  EXPECT_EQ(imago_close(b), 0);
  EXPECT_EQ(imago_close(a), 0);
}
TEST(Group, AMemberReopeningACausalGroupIsToldItWasLeftOut) { rejoin(37, IMAGO_GROUP_CAUSAL); }
TEST(Group, AMemberReopeningATotalGroupIsToldItWasLeftOut) { rejoin(38, IMAGO_GROUP_TOTAL); }

uint32_t big_size(uint32_t seq) { return seq % 3 == 0 ? 100 : 3000 + seq % 5000; }
TEST(Group, BigMessagesBeyondTheBigPoolsShareDoNotStallACausalGroup) {
  ordered_exchange(35, IMAGO_GROUP_CAUSAL, 256, big_size);
}
TEST(Group, BigMessagesBeyondTheBigPoolsShareDoNotStallATotalGroup) {
  ordered_exchange(36, IMAGO_GROUP_TOTAL, 256, big_size);
}

/** Nodes 1 and 2 open ordered group @p g (@p order, @p window): @p a and @p b. */
void open_both(uint32_t g, uint32_t order, uint32_t window, imago_ep_t** a, imago_ep_t** b) {
  const uint64_t members[] = {1, 2};
  int rc;
  *a = open_ordered(g, 1, order, members, 2, window, &rc);
  ASSERT_NE(*a, nullptr) << rc;
  *b = open_ordered(g, 2, order, members, 2, window, &rc);
  ASSERT_NE(*b, nullptr) << rc;
}

// Total order with every other member gone: the one left delivers its own alone,
// so it sends on (it stopped after order_window more, -EAGAIN for good).
TEST(Group, TheLastMemberOfATotalGroupSendsOn) {
  imago_ep_t *a, *b;
  ASSERT_NO_FATAL_FAILURE(open_both(34, IMAGO_GROUP_TOTAL, 4, &a, &b));
  int rc;
  Got got;
  ASSERT_TRUE(receive(a, got, [](const Got& g) { return g.find(IMAGO_GROUP_JOINED) != nullptr; }));
  EXPECT_EQ(imago_close(b), 0);
  ASSERT_TRUE(receive(a, got, [](const Got& g) { return g.find(IMAGO_GROUP_LEFT) != nullptr; }));
  uint32_t sent = 0;
  const auto end = Clock::now() + 5s;
  while (sent < 100 && Clock::now() < end) {
    const std::vector<uint8_t> m = message(sent, 64);
    rc = imago_send(a, m.data(), 64, 0);
    ASSERT_TRUE(rc == 0 || rc == -EAGAIN) << rc;
    sent += rc == 0;
    ASSERT_GE(drain_once(a, got), 0);
  }
  EXPECT_EQ(sent, 100u);
  imago_ep_stats st{};
  ASSERT_EQ(imago_stats(a, &st), 0);
  EXPECT_EQ(st.order_pending, 0u);
  EXPECT_EQ(st.order_departed, 1u);
  EXPECT_EQ(imago_close(a), 0);
}

// A member that takes messages only when imago_wait() says one is there makes no receive
// call that finds nothing: once it delivered a source's last few (under half a window), the
// source was never told, and its order_pending stayed above 0 for good (a source that waits
// for 0 before it closes waited for ever). imago_wait() tells the sources when it goes quiet.
TEST(Group, AMemberThatWaitsInImagoWaitTellsItsSourcesHowFarItIs) {
  imago_ep_t *a, *b;
  ASSERT_NO_FATAL_FAILURE(open_both(39, IMAGO_GROUP_CAUSAL, 8, &a, &b));
  Got got_a, got_b;
  uint32_t sent = 0;
  const auto end = Clock::now() + 5s;
  while (sent < 3 && Clock::now() < end) {
    const std::vector<uint8_t> m = message(sent, 64);
    sent += imago_send(a, m.data(), 64, 0) == 0;
    ASSERT_GE(drain_once(a, got_a), 0);
  }
  ASSERT_EQ(sent, 3u);
  imago_ep_stats st{};
  const auto until = Clock::now() + 3s;
  while (Clock::now() < until) {
    if (imago_wait(b, 2000) == 1) {
      ASSERT_GE(drain_once(b, got_b), 0);  // only when told
    }
    ASSERT_GE(drain_once(a, got_a), 0);
    ASSERT_EQ(imago_stats(a, &st), 0);
    if (st.order_pending == 0) break;
  }
  uint32_t msgs = 0;
  for (const Got::Item& i : got_b.items) msgs += !i.event;
  EXPECT_EQ(msgs, 3u);
  EXPECT_EQ(st.order_pending, 0u) << "b delivered a's 3 and never said";
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

}  // namespace

// Arguments after the test's own go to the library: the same suite runs on two networks
// (meson's api_group_redundant: --redundancy ping-pong, with loss).
int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  char prog[] = "group_api_test", pair[] = "--pair";
  std::vector<char*> args = {prog, pair};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  if (int rc = imago_attach_embedded(static_cast<int>(args.size()), args.data(), &g_im); rc != 0) {
    std::fprintf(stderr, "imago_attach_embedded: %d: the group API suite cannot run\n", rc);
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  imago_detach(g_im);
  return rc;
}
