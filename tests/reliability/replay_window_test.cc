// SPDX-License-Identifier: BSD-3-Clause
// The anti-replay window of group control frames (reliability/replay_window.h).
#include <gtest/gtest.h>

#include "reliability/replay_window.h"

namespace imago::rel {
namespace {

constexpr uint64_t kS = 0x1234;

TEST(ReplayWindow, TakesEachNumberOnceInAnyOrderWithinItsSpan) {
  ReplayWindow w;
  EXPECT_TRUE(w.fresh(kS, 100));  // the first, whatever it is
  EXPECT_FALSE(w.fresh(kS, 100));
  EXPECT_TRUE(w.fresh(kS, 103));
  EXPECT_TRUE(w.fresh(kS, 101));  // reordered
  EXPECT_FALSE(w.fresh(kS, 101));
  EXPECT_TRUE(w.fresh(kS, 102));
  EXPECT_TRUE(w.fresh(kS, 103 + ReplayWindow::kSpan - 1));
  EXPECT_FALSE(w.fresh(kS, 102));  // seen, and now at the window's far end
  EXPECT_FALSE(w.fresh(kS, 103));
  EXPECT_TRUE(w.fresh(kS, 104));   // in the window, not seen
  EXPECT_FALSE(w.fresh(kS, 50));   // older than the span
}

TEST(ReplayWindow, AJumpClearsItAndNumbersWrap) {
  ReplayWindow w;
  EXPECT_TRUE(w.fresh(kS, 0xFFFFFFF0u));
  EXPECT_TRUE(w.fresh(kS, 5));  // after 2^32 - 1
  EXPECT_FALSE(w.fresh(kS, 0xFFFFFFF0u));
  EXPECT_TRUE(w.fresh(kS, 0xFFFFFFF1u));
  EXPECT_TRUE(w.fresh(kS, 100000));
  EXPECT_FALSE(w.fresh(kS, 5));
}

TEST(ReplayWindow, ANewSessionStartsAfresh) {
  ReplayWindow w;
  EXPECT_TRUE(w.fresh(kS, 1000));
  EXPECT_FALSE(w.fresh(kS, 1000));
  EXPECT_TRUE(w.fresh(kS + 1, 1));  // the peer restarted: its numbers start over
  EXPECT_TRUE(w.fresh(kS + 1, 2));
  EXPECT_FALSE(w.fresh(kS + 1, 1));
}

}  // namespace
}  // namespace imago::rel
