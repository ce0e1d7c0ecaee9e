// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for reliability/seq.h: serial-number comparisons modulo 2^32 (RFC 1982).
#include "reliability/seq.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace imago {
namespace {

TEST(Seq, DiffIsSignedDistanceWithoutWrap) {
  // Do: take distances between nearby numbers far from the wrap.
  // Expect: b - a with its sign.
  EXPECT_EQ(seq_diff(100, 105), 5);
  EXPECT_EQ(seq_diff(105, 100), -5);
  EXPECT_EQ(seq_diff(42, 42), 0);
}

TEST(Seq, DiffCountsAcrossTheWrap) {
  // Do: take distances between numbers on both sides of 2^32-1 -> 0.
  // Expect: small positive forward distances and small negative backward ones.
  EXPECT_EQ(seq_diff(0xFFFFFFFFu, 0u), 1);
  EXPECT_EQ(seq_diff(0xFFFFFFF0u, 5u), 21);
  EXPECT_EQ(seq_diff(5u, 0xFFFFFFF0u), -21);
  EXPECT_EQ(seq_diff(0xFFFFFFFFu, 0xFFFFFFFFu + Seq{1}), 1);
}

TEST(Seq, OrderingHoldsAcrossTheWrap) {
  // Do: compare 2^32-1 with 0, the first number after the wrap.
  // Expect: 2^32-1 comes before 0, under every operator.
  EXPECT_TRUE(seq_lt(0xFFFFFFFFu, 0u));
  EXPECT_TRUE(seq_le(0xFFFFFFFFu, 0u));
  EXPECT_FALSE(seq_gt(0xFFFFFFFFu, 0u));
  EXPECT_FALSE(seq_ge(0xFFFFFFFFu, 0u));
  EXPECT_TRUE(seq_gt(0u, 0xFFFFFFFFu));
  EXPECT_TRUE(seq_ge(0u, 0xFFFFFFFFu));
  EXPECT_FALSE(seq_lt(0u, 0xFFFFFFFFu));
}

TEST(Seq, EqualNumbersAreLeAndGeButNotLtOrGt) {
  for (Seq s : {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu}) {
    // Do: compare a number with itself.
    // Expect: only the inclusive comparisons hold.
    EXPECT_TRUE(seq_le(s, s));
    EXPECT_TRUE(seq_ge(s, s));
    EXPECT_FALSE(seq_lt(s, s));
    EXPECT_FALSE(seq_gt(s, s));
  }
}

TEST(Seq, WindowSlidingOverTheWrapStaysOrdered) {
  // Do: walk a window of 1000 numbers straight through the wrap.
  const Seq start = 0xFFFFFE00u;
  for (uint32_t i = 0; i < 1000; ++i) {
    Seq a = start + i;
    Seq b = a + 1;
    Seq c = a + 999;
    // Expect: every successor and every later number in the window compares after a.
    ASSERT_TRUE(seq_lt(a, b)) << a;
    ASSERT_TRUE(seq_lt(a, c)) << a;
    ASSERT_TRUE(seq_gt(c, a)) << a;
    ASSERT_EQ(seq_diff(a, c), 999) << a;
  }
}

TEST(Seq, OrderFlipsAtHalfTheSpace) {
  // Do: compare 0 with numbers just under and at 2^31 ahead of it.
  // Expect: 2^31-1 ahead is still "after"; 2^31+1 ahead reads as "before" (the limit).
  EXPECT_TRUE(seq_lt(0u, 0x7FFFFFFFu));
  EXPECT_EQ(seq_diff(0u, 0x7FFFFFFFu), INT32_MAX);
  EXPECT_TRUE(seq_gt(0u, 0x80000001u));
  EXPECT_EQ(seq_diff(0u, 0x80000001u), -INT32_MAX);
}

TEST(Seq, ComparisonsAreConstexpr) {
  // Do: evaluate the comparisons at compile time.
  // Expect: they compile as constant expressions with the wrap-aware results.
  static_assert(seq_lt(0xFFFFFFFEu, 1u));
  static_assert(seq_diff(1u, 0xFFFFFFFEu) == -3);
  static_assert(!seq_lt(1u, 0xFFFFFFFEu));
  SUCCEED();
}

}  // namespace
}  // namespace imago
