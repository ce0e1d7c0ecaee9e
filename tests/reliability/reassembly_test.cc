// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/reassembly.h: in-order reassembly of fragments, bounded by its buffer.
#include "reliability/reassembly.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace imago::rel {
namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

TEST(ReassemblyTest, RebuildsInOrderFragmentsAndBoundsSize) {
  Reassembly ra;
  ra.init(10);
  EXPECT_EQ(ra.add(rec_flag::kMore, bytes(4, 1)), Reject::kNone);
  EXPECT_EQ(ra.add(rec_flag::kMore | rec_flag::kCont, bytes(4, 2)), Reject::kNone);
  EXPECT_EQ(ra.add(rec_flag::kCont, bytes(2, 3)), Reject::kNone);
  ASSERT_TRUE(ra.complete());
  EXPECT_EQ(ra.message().size(), 10u);
  ra.consumed();
  // Expect: an 11-byte message is dropped whole, the next one is fine.
  EXPECT_EQ(ra.add(rec_flag::kMore, bytes(6, 1)), Reject::kNone);
  EXPECT_EQ(ra.add(rec_flag::kMore | rec_flag::kCont, bytes(5, 1)), Reject::kTooLarge);
  EXPECT_EQ(ra.add(rec_flag::kCont, bytes(5, 1)), Reject::kNone);
  EXPECT_FALSE(ra.complete());
  EXPECT_EQ(ra.add(rec_flag::kCont, bytes(1, 1)), Reject::kBadFragment);
}

}  // namespace
}  // namespace imago::rel
