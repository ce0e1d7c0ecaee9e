// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for dataplane/log_gate.h: a line per change at most every 10 s, the changes not
// logged counted, and a state held back (the routing table) shown once the gap has passed.
#include "dataplane/log_gate.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace imago::dp {
namespace {

constexpr uint64_t kS = 1'000'000'000;

TEST(LogGate, ALinePerChangeAtMostEveryTenSecondsTheOthersCounted) {
  LogGate g;
  uint64_t total = 0;
  EXPECT_TRUE(g.open(1 * kS, total));
  EXPECT_FALSE(g.open(2 * kS, total));
  EXPECT_FALSE(g.open(10 * kS, total));
  EXPECT_EQ(g.quiet, 2u);
  EXPECT_TRUE(g.open(11 * kS, total));
  EXPECT_EQ(total, 2u);
}

// The fault an outside tester found: a link down, then back 3 s later; the second table was
// held back by the gate and never shown, so the last table printed said the link was down.
TEST(HeldLine, AChangeHeldBackIsShownOnceTheGapHasPassed) {
  HeldLine h;
  uint64_t total = 0;
  EXPECT_TRUE(h.changed(1 * kS, total));   // link down: shown
  EXPECT_FALSE(h.due(2 * kS));
  EXPECT_FALSE(h.changed(4 * kS, total));  // link back 3 s later: held
  EXPECT_EQ(total, 1u);
  EXPECT_FALSE(h.due(10 * kS));            // still within the gap
  EXPECT_TRUE(h.due(11 * kS));             // shown now, the routes in force
  EXPECT_FALSE(h.due(12 * kS));            // once
  EXPECT_FALSE(h.changed(13 * kS, total)); // the gap counts from that showing
  EXPECT_TRUE(h.due(21 * kS));
  EXPECT_TRUE(h.changed(40 * kS, total));  // a change long after: at once
  EXPECT_FALSE(h.due(60 * kS));            // nothing held
}

// A link's up and down lines (the fabric tester: a link back within the gap logged no 'up', so
// the log said down for a link that forwarded 547k frames): shown when the gap ends, with
// how many changes were not.
TEST(HeldLine, AHeldChangeIsShownWithHowManyWereNot) {
  HeldLine h;
  uint64_t total = 0, quiet = 99;
  EXPECT_TRUE(h.changed(1 * kS, total));   // down: shown
  EXPECT_FALSE(h.changed(2 * kS, total));  // up
  EXPECT_FALSE(h.changed(3 * kS, total));  // down
  EXPECT_FALSE(h.changed(4 * kS, total));  // up: held, the state now
  EXPECT_FALSE(h.due(5 * kS, &quiet));
  EXPECT_EQ(quiet, 99u);
  EXPECT_TRUE(h.due(11 * kS, &quiet));
  EXPECT_EQ(quiet, 3u);
  EXPECT_EQ(total, 3u);
}

}  // namespace
}  // namespace imago::dp
