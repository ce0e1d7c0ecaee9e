// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/recv_window.h: the per-peer receive slots and the cumulative ACK.
#include "reliability/recv_window.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace imago::rel {
namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

TEST(RecvWindowTest, NextRunFindsHeldRunsAndNothingFromBeyondTheHighest) {
  RecvWindow r;
  r.init(8, 16);
  r.reset(0xFFFFFFFEu);  // across the wrap
  r.store(0, 0, bytes(3, 1));  // past the wrap
  r.store(2, 0, bytes(3, 1));
  Seq a, b;
  ASSERT_TRUE(r.next_run(0xFFFFFFFEu, &a, &b));
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  ASSERT_TRUE(r.next_run(1, &a, &b));
  EXPECT_EQ(a, 2u);
  EXPECT_EQ(b, 3u);
  // From the highest held on, or beyond it (a tail a source announced): nothing, at once.
  EXPECT_FALSE(r.next_run(3, &a, &b));
  EXPECT_FALSE(r.next_run(1000, &a, &b));
}

TEST(RecvWindowTest, AdvancesCumulativeAckOverFilledGaps) {
  RecvWindow r;
  r.init(8, 16);
  r.reset(0xFFFFFFFFu);
  // Do: receive seq 1 and 0 before 0xFFFFFFFF.
  r.store(1, 0, bytes(3, 1));
  r.store(0, 0, bytes(3, 1));
  EXPECT_EQ(r.nxt(), 0xFFFFFFFFu);
  EXPECT_TRUE(r.has_gap());
  r.store(0xFFFFFFFFu, 0, bytes(3, 1));
  // Expect: ack jumps over the wrap to 2.
  EXPECT_EQ(r.nxt(), 2u);
  EXPECT_FALSE(r.has_gap());
  EXPECT_EQ(r.free_from_ack(), 5u);
  EXPECT_FALSE(r.fits(0xFFFFFFFFu + 8));
}

}  // namespace
}  // namespace imago::rel
