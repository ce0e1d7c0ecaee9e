// SPDX-License-Identifier: BSD-3-Clause
// The lcore loop framework: tasks on lcores, periodic work, stop, busy/idle accounting.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_lcore.h>

#include <atomic>

#include "dataplane/lcore.h"

namespace imago::test {
namespace {

struct Counts {
  std::atomic<uint64_t> polls{0};     // written by the polling lcore, read after run()
  std::atomic<uint64_t> periodic{0};
  dp::LcoreRunner* runner = nullptr;
  uint64_t stop_after = 0;
};

unsigned busy_poll(void* p, uint64_t) {
  static_cast<Counts*>(p)->polls.fetch_add(1, std::memory_order_relaxed);
  return 1;
}
unsigned idle_poll(void* p, uint64_t) {
  static_cast<Counts*>(p)->polls.fetch_add(1, std::memory_order_relaxed);
  return 0;
}
unsigned tick(void* p, uint64_t) {
  auto* c = static_cast<Counts*>(p);
  if (c->periodic.fetch_add(1, std::memory_order_relaxed) + 1 >= c->stop_after) c->runner->stop();
  return 0;
}

unsigned worker_or_main() {
  unsigned w = rte_get_next_lcore(-1, 1, 0);
  return w < RTE_MAX_LCORE ? w : rte_get_main_lcore();
}

TEST(LcoreRunner, PeriodicTaskRunsOnItsIntervalAndStopEndsTheRun) {
  // Do: poll on a worker, a 1 ms periodic on main that stops after 20 ticks.
  dp::LcoreRunner r;
  Counts c{.runner = &r, .stop_after = 20};
  ASSERT_EQ(r.add_poll(worker_or_main(), "poll", busy_poll, &c), 0);
  ASSERT_EQ(r.add_periodic(rte_get_main_lcore(), "tick", tick, &c, 1000), 0);
  uint64_t t0 = rte_rdtsc();
  ASSERT_EQ(r.run(), 0);
  double ms = static_cast<double>(rte_rdtsc() - t0) * 1e3 / static_cast<double>(rte_get_tsc_hz());
  // Expect: 20 ticks took at least 19 ms, and the poll ran far more often than the tick.
  EXPECT_EQ(c.periodic.load(), 20u);
  EXPECT_GE(ms, 19.0);
  EXPECT_GT(c.polls.load(), 20u);
}

TEST(LcoreRunner, BusyAndIdleCyclesFollowTheWorkReturned) {
  // Do: one lcore whose poll reports work, and (alone) one whose poll reports none.
  for (bool busy : {true, false}) {
    dp::LcoreRunner r;
    Counts c{.runner = &r, .stop_after = 10};
    unsigned l = rte_get_main_lcore();
    ASSERT_EQ(r.add_poll(l, "poll", busy ? busy_poll : idle_poll, &c), 0);
    ASSERT_EQ(r.add_periodic(l, "tick", tick, &c, 1000), 0);
    ASSERT_EQ(r.run(), 0);
    dp::LcoreStats s = r.stats(l);
    // Expect: cycles land on the matching side, and iterations were counted.
    EXPECT_GT(s.iterations, 10u);
    if (busy) {
      EXPECT_GT(s.busy_cycles, 10 * s.idle_cycles) << "busy run";
      EXPECT_EQ(s.work, c.polls.load());
    } else {
      EXPECT_EQ(s.busy_cycles, 0u) << "idle run";
      EXPECT_GT(s.idle_cycles, 0u);
    }
  }
}

TEST(LcoreRunner, RejectsBadLcoresAndTooManyTasks) {
  dp::LcoreRunner r;
  Counts c;
  // Do / Expect: an lcore EAL did not enable is -EINVAL.
  EXPECT_EQ(r.add_poll(RTE_MAX_LCORE - 1, "x", idle_poll, &c), -EINVAL);
  EXPECT_EQ(r.add_poll(RTE_MAX_LCORE + 5, "x", idle_poll, &c), -EINVAL);
  // Do / Expect: the task table fills at kMaxTasks, then -ENOSPC.
  for (unsigned i = 0; i < dp::LcoreRunner::kMaxTasks; ++i) {
    ASSERT_EQ(r.add_poll(rte_get_main_lcore(), "x", idle_poll, &c), 0);
  }
  EXPECT_EQ(r.add_poll(rte_get_main_lcore(), "x", idle_poll, &c), -ENOSPC);
}

}  // namespace
}  // namespace imago::test

namespace imago::test {
namespace {

TEST(LcoreRunner, StartReturnsAtOnceAndJoinWaitsForTheWorkers) {
  unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (worker >= RTE_MAX_LCORE) GTEST_SKIP() << "EAL has no worker lcore";
  dp::LcoreRunner r;
  Counts c{.runner = &r, .stop_after = 30};
  // Do: a worker that polls and stops itself after 30 ticks of 1 ms; start() in the background.
  ASSERT_EQ(r.add_poll(worker, "poll", busy_poll, &c), 0);
  ASSERT_EQ(r.add_periodic(worker, "tick", tick, &c, 1000), 0);
  ASSERT_EQ(r.start(), 0);
  // Expect: start() returned while the worker still runs; join() returns after it stopped.
  EXPECT_TRUE(r.active());
  EXPECT_EQ(r.start(), -EBUSY);
  r.join();
  EXPECT_FALSE(r.active());
  EXPECT_EQ(c.periodic.load(), 30u);
  // Do / Expect: tasks on the main lcore make start() refuse; clear() forgets them.
  ASSERT_EQ(r.add_poll(rte_get_main_lcore(), "p", idle_poll, &c), 0);
  EXPECT_EQ(r.start(), -EINVAL);
  EXPECT_EQ(r.clear(), 0);
  EXPECT_TRUE(r.used_lcores().empty());
}

}  // namespace
}  // namespace imago::test
