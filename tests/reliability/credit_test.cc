// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/credit.h: optimistic credits on both sides.
#include "reliability/credit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace imago::rel {
namespace {

TEST(CreditTest, UnlimitedUntilOverflowThenPartialThenUnlimitedAboveHighWater) {
  CreditGrant g(true, 50);
  EXPECT_EQ(g.advertise(10), kCreditUnlimited);
  g.on_overflow();
  EXPECT_EQ(g.advertise(0), 0u);
  EXPECT_EQ(g.advertise(20), 20u);
  EXPECT_EQ(g.advertise(50), kCreditUnlimited);
  CreditGrant off(false, 50);
  off.on_overflow();
  EXPECT_EQ(off.advertise(0), kCreditUnlimited);
}

TEST(CreditTest, GapMeansExactCreditWithoutEnteringLimitedMode) {
  CreditGrant g(true, 50);
  // Do: advertise while units wait beyond a gap. Expect: the exact free space.
  EXPECT_EQ(g.advertise(7, true), 7u);
  // Expect: unlimited again once the gap closed, and no limited mode was entered.
  EXPECT_EQ(g.advertise(7, false), kCreditUnlimited);
  EXPECT_FALSE(g.limited());
}

TEST(CreditTest, SenderLimitIsAbsoluteAcrossTheWrap) {
  CreditLimit l;
  EXPECT_TRUE(l.allows(123));
  l.update(0xFFFFFFFEu, 4);
  EXPECT_TRUE(l.allows(1));
  EXPECT_FALSE(l.allows(2));
}

}  // namespace
}  // namespace imago::rel
