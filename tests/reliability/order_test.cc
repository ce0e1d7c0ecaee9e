// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/order/: causal order's hold-back, its refusals and the lies it
// drops (the simulator property covers random groups: SimProperty.CausalOrder...).
#include <gtest/gtest.h>

#include <algorithm>

#include <vector>

#include "reliability/order/causal.h"
#include "reliability/order/total.h"

namespace imago::rel::order {
namespace {

using Offer = CausalOrder::Offer;

std::vector<uint64_t> drained(CausalOrder& c) {
  std::vector<uint64_t> out;
  c.drain([&](NodeId, uint64_t h) { out.push_back(h); });
  return out;
}

TEST(CausalOrder, AMessageWaitsForItsCausalPast) {
  const std::vector<NodeId> m{1, 2, 3};
  CausalOrder c;
  ASSERT_EQ(c.init(m, 3, 4), 0);
  // Do: 2's message, sent after 2 delivered 1's first, arrives before 1's first.
  const std::vector<uint32_t> a{1, 0, 0}, b{1, 1, 0};
  EXPECT_EQ(c.offer(2, b, 20), Offer::kTaken);
  // Expect: held back; delivered right after 1's, in that order.
  EXPECT_TRUE(drained(c).empty());
  EXPECT_EQ(c.counters().held_back, 1u);
  EXPECT_EQ(c.offer(1, a, 10), Offer::kTaken);
  EXPECT_EQ(drained(c), (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(c.held(), 0u);
}

TEST(CausalOrder, ConcurrentMessagesAndOurOwnPastGoAtOnce) {
  const std::vector<NodeId> m{1, 2, 3};
  CausalOrder c;
  ASSERT_EQ(c.init(m, 3, 4), 0);
  std::vector<uint32_t> mine(3);
  c.stamp(mine);
  EXPECT_EQ(mine, (std::vector<uint32_t>{0, 0, 1}));
  // Do: 1 and 2 send without having seen each other; 2 had seen our first message.
  EXPECT_EQ(c.offer(2, std::vector<uint32_t>{0, 1, 1}, 2), Offer::kTaken);
  EXPECT_EQ(c.offer(1, std::vector<uint32_t>{1, 0, 0}, 1), Offer::kTaken);
  // Expect: both delivered now; our next stamp counts them.
  EXPECT_EQ(drained(c).size(), 2u);
  c.stamp(mine);
  EXPECT_EQ(mine, (std::vector<uint32_t>{1, 1, 2}));
}

TEST(CausalOrder, StampsASourceCannotHaveSentAreDroppedAndCounted) {
  const std::vector<NodeId> m{1, 2, 3};
  CausalOrder c;
  ASSERT_EQ(c.init(m, 3, 4), 0);
  // Do: a stamp of the wrong width, from no member, in our own name, skipping a number,
  // and a replay of one taken.
  EXPECT_EQ(c.offer(1, std::vector<uint32_t>{1, 0}, 0), Offer::kBad);
  EXPECT_EQ(c.offer(9, std::vector<uint32_t>{1, 0, 0}, 0), Offer::kBad);
  EXPECT_EQ(c.offer(3, std::vector<uint32_t>{0, 0, 1}, 0), Offer::kBad);
  EXPECT_EQ(c.offer(1, std::vector<uint32_t>{2, 0, 0}, 0), Offer::kBad);
  EXPECT_EQ(c.offer(1, std::vector<uint32_t>{1, 0, 0}, 5), Offer::kTaken);
  EXPECT_EQ(c.offer(1, std::vector<uint32_t>{1, 0, 0}, 6), Offer::kBad);
  // Expect: five counted; the true one delivered, once.
  EXPECT_EQ(c.counters().bad, 5u);
  EXPECT_EQ(drained(c), (std::vector<uint64_t>{5}));
}

TEST(CausalOrder, AFullShareRefusesThatSourceOnlyAndNeverDeadlocks) {
  const std::vector<NodeId> m{1, 2, 3};
  CausalOrder c;
  ASSERT_EQ(c.init(m, 3, 1), 0);
  // Do: 2's first and second depend on 1's first, which comes last.
  EXPECT_EQ(c.offer(2, std::vector<uint32_t>{1, 1, 0}, 21), Offer::kTaken);
  EXPECT_EQ(c.offer(2, std::vector<uint32_t>{1, 2, 0}, 22), Offer::kFull);
  // Expect: 2's share full, refused and counted; 1's message still taken, and all goes.
  EXPECT_EQ(c.counters().refused, 1u);
  EXPECT_EQ(c.offer(1, std::vector<uint32_t>{1, 0, 0}, 11), Offer::kTaken);
  EXPECT_EQ(drained(c), (std::vector<uint64_t>{11, 21}));
  EXPECT_EQ(c.offer(2, std::vector<uint32_t>{1, 2, 0}, 22), Offer::kTaken);
  EXPECT_EQ(drained(c), (std::vector<uint64_t>{22}));
}

TEST(CausalOrder, AViewMustBeWhole) {
  CausalOrder c;
  EXPECT_EQ(c.init(std::vector<NodeId>{}, 1, 4), -EINVAL);
  EXPECT_EQ(c.init(std::vector<NodeId>{1, 2}, 3, 4), -EINVAL);
  EXPECT_EQ(c.init(std::vector<NodeId>{1, 2, 2}, 1, 4), -EINVAL);
  EXPECT_EQ(c.init(std::vector<NodeId>{1, 2}, 1, 0), -EINVAL);
  EXPECT_EQ(c.init(std::vector<NodeId>(kMaxMembers + 1, 0), 0, 4), -EINVAL);
}


/** Records a member sent, to route by hand. */
struct Sent final : TotalOrder::Out {
  std::vector<TotalCtl> all;
  std::vector<std::pair<NodeId, TotalCtl>> one;
  void to_all(const TotalCtl& c) override { all.push_back(c); }
  void to_one(NodeId dst, const TotalCtl& c) override { one.emplace_back(dst, c); }
};

/** Three members by hand: records are routed when a test says so, in each stream's order. */
struct Three {
  std::vector<NodeId> ids{1, 2, 3};
  Sent out[3];
  TotalOrder to[3];
  size_t routed[3][3] = {};  ///< [from][to]: records of from's that to has had
  std::vector<uint64_t> got[3];
  explicit Three(uint32_t window = 4) {
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(to[i].init(ids, ids[i], window, &out[i]), 0);
    for (uint32_t i = 0; i < 3; ++i) to[i].tell();  // each stream starts with its epoch
    for (uint32_t i = 0; i < 3; ++i) route(i);
  }
  /** Member i sends message h. @return its stamp. */
  uint64_t send(uint32_t i, uint64_t h) {
    const uint64_t ts = to[i].stamp();
    EXPECT_TRUE(to[i].sent(h, ts));
    return ts;
  }
  /** Member j gets member i's message h stamped ts. */
  void take(uint32_t j, uint32_t i, uint64_t ts, uint64_t h) { EXPECT_TRUE(to[j].on_data(ids[i], ts, h)); }
  uint64_t send(uint32_t i, uint64_t h, std::initializer_list<uint32_t> dst) {
    const uint64_t ts = send(i, h);
    for (uint32_t j : dst) take(j, i, ts, h);
    return ts;
  }
  /** Member i's records not yet routed go to every other member (to_all ones). */
  void route(uint32_t i, std::initializer_list<uint32_t> dst = {0, 1, 2}) {
    for (uint32_t j : dst)
      for (; j != i && routed[i][j] < out[i].all.size(); ++routed[i][j]) to[j].on_ctl(ids[i], out[i].all[routed[i][j]]);
  }
  void drain() {
    for (uint32_t i = 0; i < 3; ++i)
      to[i].drain([&](NodeId, uint64_t h) { got[i].push_back(h); });
  }
};

TEST(TotalOrder, AMessageIsDeliveredOnceEveryMemberHoldsItAndPassedItsStamp) {
  Three g;
  // Do: 1 sends; 2 and 3 get it. Expect: not delivered before the others said so.
  g.send(0, 10, {1, 2});
  g.drain();
  EXPECT_TRUE(g.got[1].empty() && g.got[2].empty());
  // Do: 3's ACK reaches 2 (2's does not reach 3 yet). Expect: 2 delivers; 3 waits for 2's.
  g.route(2, {1});
  g.drain();
  EXPECT_EQ(g.got[1], (std::vector<uint64_t>{10}));
  EXPECT_TRUE(g.got[2].empty());
  g.route(1);
  g.route(2);
  g.drain();
  EXPECT_EQ(g.got[2], (std::vector<uint64_t>{10}));
  EXPECT_EQ(g.got[0], (std::vector<uint64_t>{10}));  // its own, in its place
  EXPECT_EQ(g.to[0].own_pending(), 1u);  // what they delivered is told every half window
  g.to[1].tell(true), g.to[2].tell(true);  // or when they are idle
  g.route(1), g.route(2);
  EXPECT_EQ(g.to[0].own_pending(), 0u);  // delivered everywhere
}

TEST(TotalOrder, EveryMemberDeliversByStampWhateverTheArrivalOrder) {
  Three g;
  // Do: 1 and 3 send at once (both stamped 1); 2 gets 3's first, 1 and 3 each get the other's.
  const uint64_t t3 = g.send(2, 30), t1 = g.send(0, 10);
  EXPECT_EQ(t1, t3);
  g.take(1, 2, t3, 30), g.take(0, 2, t3, 30), g.take(1, 0, t1, 10), g.take(2, 0, t1, 10);
  for (int k = 0; k < 3; ++k) {
    g.drain();
    for (uint32_t i = 0; i < 3; ++i) g.route(i);
  }
  // Expect: one order everywhere: the same stamp, the lower id first.
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(g.got[i], (std::vector<uint64_t>{10, 30})) << i;
}

TEST(TotalOrder, LiesAreCountedAndChangeNothing) {
  Three g;
  const uint64_t ts = g.send(1, 20, {0, 2});
  // Do: the same stamp again from 2; an ACK holding more of 1's than 1 sent; one delivering
  // more than it holds; an ACK about its sender; a NEW_EPOCH from a member whose epoch it is
  // not; an unknown kind.
  EXPECT_TRUE(g.to[0].on_data(2, ts, 21));
  g.to[0].on_ctl(3, TotalCtl{TotalCtl::kAck, 0, 9, 1, 5, 0});
  g.to[0].on_ctl(3, TotalCtl{TotalCtl::kAck, 0, 9, 2, 1, 2});
  g.to[0].on_ctl(3, TotalCtl{TotalCtl::kAck, 0, 9, 3, 1, 1});
  g.to[0].on_ctl(3, TotalCtl{TotalCtl::kNewEpoch, 64 + 0, 0, 1, 0, TotalOrder::kLive});
  g.to[0].on_ctl(3, TotalCtl{static_cast<TotalCtl::Kind>(99), 0, 0, 1, 0});
  std::vector<uint64_t> bad;
  g.to[0].take_dropped([&](uint64_t h) { bad.push_back(h); });
  // Expect: each counted; the replayed message handed back; still in the first epoch.
  EXPECT_EQ(g.to[0].counters().bad, 6u);
  EXPECT_EQ(bad, (std::vector<uint64_t>{21}));
  EXPECT_EQ(g.to[0].epoch(), 0u);
}

TEST(TotalOrder, AFlushCutsAMemberGoneAtTheLowestHeldAndEveryoneDeliversTheSame) {
  Three g;
  // Do: 3 sends two; 1 gets both, 2 only the first; 3 dies before any ACK went.
  g.send(2, 30, {0, 1});
  g.send(2, 31, {0});
  g.drain();
  g.out[2].all.clear();
  g.route(0, {0, 1}), g.route(1, {0, 1});
  g.drain();
  // Its first is delivered (each holds it and passed its stamp: 3's own clock is not needed).
  EXPECT_EQ(g.got[0], (std::vector<uint64_t>{30}));
  EXPECT_EQ(g.got[1], (std::vector<uint64_t>{30}));
  // Do: both see 3 gone; 1 (the lowest) runs the flush.
  const std::vector<NodeId> left{1, 2};
  g.to[1].view(left);
  g.to[0].view(left);
  g.route(0, {1});  // FLUSH_REQ
  for (const auto& [dst, c] : g.out[1].one) g.to[0].on_ctl(2, c);  // 2's FLUSH_REP
  g.route(0, {1});  // NEW_EPOCH, INSTALLED
  g.route(1, {0});  // INSTALLED
  g.drain();
  // Expect: a new epoch; 3 cut at 1 (what 2 held): its second dropped at 1, delivered nowhere.
  EXPECT_GT(g.to[0].epoch(), 0u);
  EXPECT_EQ(g.to[0].epoch(), g.to[1].epoch());
  EXPECT_EQ(g.got[0], (std::vector<uint64_t>{30}));
  EXPECT_EQ(g.got[1], (std::vector<uint64_t>{30}));
  std::vector<uint64_t> dropped;
  g.to[0].take_dropped([&](uint64_t h) { dropped.push_back(h); });
  EXPECT_EQ(dropped, (std::vector<uint64_t>{31}));
  EXPECT_EQ(g.to[0].counters().bad + g.to[1].counters().bad, 0u);
}

// A member that answered a flush holds, for the flush, what it reported: an ACK of more would
// let another member deliver beyond the cut taken from the report (the simulator's seed
// 150582382: a member delivered a dead source's 45th message, on an ACK sent after a report
// of 44, and the flush cut the source at 44).
TEST(TotalOrder, AMemberThatAnsweredAFlushAcksNothingMoreUntilTheEpoch) {
  Three g;
  g.to[1].on_ctl(1, TotalCtl{TotalCtl::kFlushReq, 64, 0, 1, 0});
  ASSERT_EQ(g.out[1].one.size(), 3u);  // its report, one record per source
  const size_t before = g.out[1].all.size();
  g.send(2, 30, {1});
  g.drain();
  EXPECT_EQ(g.out[1].all.size(), before);
}

TEST(TotalOrder, ASourceSendsAtMostAWindowAhead) {
  const std::vector<NodeId> m{1, 2};
  Sent o;
  TotalOrder mem;
  ASSERT_EQ(mem.init(m, 2, 3, &o), 0);
  // Do: send 4 with nothing delivered. Expect: the fourth refused (flow control).
  for (uint64_t i = 0; i < 3; ++i) EXPECT_TRUE(mem.sent(i, mem.stamp()));
  EXPECT_FALSE(mem.sent(3, mem.stamp()));
  EXPECT_EQ(mem.counters().refused, 1u);
  TotalOrder bad;
  EXPECT_EQ(bad.init(m, 2, 0, &o), -EINVAL);
  EXPECT_EQ(bad.init(m, 2, 3, nullptr), -EINVAL);
}

}  // namespace
}  // namespace imago::rel::order
