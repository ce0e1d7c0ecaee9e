// SPDX-License-Identifier: BSD-3-Clause
#include "apps/common/pacer.h"

#include <gtest/gtest.h>

namespace imago::app {
namespace {

TEST(Pacer, SmallStepsGiveExactlyTheRate) {
  // Do: period 100 cycles; poll every 7 cycles for 1,000,000 cycles, taking what is due.
  Pacer p(100);
  uint64_t items = 0;
  for (uint64_t now = 1'000'000; now < 2'000'000; now += 7) items += p.due(now, 32);
  // Expect: 10,000 items, give or take the first slot.
  EXPECT_NEAR(static_cast<double>(items), 10'000.0, 1.0);
}

TEST(Pacer, CoarsePollsSendBurstsWithoutLosingSlots) {
  // Do: poll only every 1000 cycles (10 slots each) with room for 32.
  Pacer p(100);
  uint64_t items = 0;
  for (uint64_t now = 1'000'000; now < 2'000'000; now += 1000) items += p.due(now, 32);
  // Expect: still the rate, in bursts of 10.
  EXPECT_NEAR(static_cast<double>(items), 10'000.0, 10.0);
}

TEST(Pacer, AStallCatchesUpByOneBurstAtMost) {
  Pacer p(100);
  ASSERT_EQ(p.due(1'000'000, 32), 1);
  // Do: nothing for 100,000 cycles (1000 slots), then poll.
  // Expect: one burst (32 past slots), not 1000: the rate never spikes. Then the slot that is
  // due now, then nothing until the next period.
  EXPECT_EQ(p.due(1'100'000, 32), 32);
  EXPECT_EQ(p.due(1'100'001, 32), 1);
  EXPECT_EQ(p.due(1'100'050, 32), 0);
  EXPECT_EQ(p.due(1'100'100, 32), 1);
}

TEST(Pacer, PeriodZeroIsUnpaced) {
  Pacer p;
  EXPECT_FALSE(p.paced());
  EXPECT_EQ(p.due(5, 32), 32);
  EXPECT_EQ(p.due(5, 32), 32);
}

}  // namespace
}  // namespace imago::app
