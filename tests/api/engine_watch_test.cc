/* SPDX-License-Identifier: BSD-3-Clause */
// imagod's engine watch (api/engine_watch.h): an engine lcore whose loop count stands still
// for the limit is stuck; one that moves, however slowly, is not.
#include "api/engine_watch.h"

#include <gtest/gtest.h>

namespace imago::api {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

TEST(EngineWatch, AnLcoreThatStopsCountingIsStuckAfterTheLimit) {
  EngineWatch w(5 * kSec);
  // Do: lcore 1 counts for 3 s, then stands still.
  for (uint64_t t = 0; t <= 3; ++t) EXPECT_EQ(w.stuck({{1, 100 * t}}, t * kSec), -1);
  // Expect: not stuck before 5 s of standing still, stuck from then on.
  EXPECT_EQ(w.stuck({{1, 300}}, 7 * kSec), -1);
  EXPECT_EQ(w.stuck({{1, 300}}, 8 * kSec), 1);
  EXPECT_EQ(w.stuck({{1, 300}}, 9 * kSec), 1);
  // A move clears it.
  EXPECT_EQ(w.stuck({{1, 301}}, 10 * kSec), -1);
}

TEST(EngineWatch, OneStuckLcoreIsFoundWhileAnotherMoves) {
  EngineWatch w(2 * kSec);
  // Do: lcore 1 moves every second; lcore 3 never does.
  for (uint64_t t = 0; t < 2; ++t) EXPECT_EQ(w.stuck({{1, t}, {3, 9}}, t * kSec), -1);
  // Expect: lcore 3 named once 2 s went by.
  EXPECT_EQ(w.stuck({{1, 2}, {3, 9}}, 2 * kSec), 3);
}

TEST(EngineWatch, NoEngineIsNeverStuck) {
  EngineWatch w(1);
  EXPECT_EQ(w.stuck({}, 0), -1);
  EXPECT_EQ(w.stuck({}, 100 * kSec), -1);
}

}  // namespace
}  // namespace imago::api
