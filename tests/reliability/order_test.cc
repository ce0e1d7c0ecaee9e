// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/order/: causal order's hold-back, its refusals and the lies it
// drops (the simulator property covers random groups: SimProperty.CausalOrder...).
#include <gtest/gtest.h>

#include <vector>

#include "reliability/order/causal.h"

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

}  // namespace
}  // namespace imago::rel::order
