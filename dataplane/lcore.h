/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The lcore loop framework: poll functions registered on lcores, one TSC read per loop
 * iteration, periodic work on TSC intervals, start/stop, and per-lcore busy/idle cycles.
 *
 * Like DPDK's l2fwd main loop, generalised: each lcore runs its list of tasks until stop.
 * A task does bounded work per call and returns how much it did (Aeron's duty cycle); an
 * iteration in which no task did work counts as idle.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <rte_lcore.h>

namespace imago::dp {

/** A task: do bounded work at @p now_tsc; @return units of work done (0 = idle). */
using TaskFn = unsigned (*)(void* ctx, uint64_t now_tsc);

/** Cycle accounting of one lcore (read after stop, or approximately while running). */
struct LcoreStats {
  uint64_t iterations = 0;
  uint64_t busy_cycles = 0;  ///< cycles of iterations in which some task did work
  uint64_t idle_cycles = 0;
  uint64_t work = 0;         ///< sum of the tasks' returned work units
};

class LcoreRunner {
 public:
  static constexpr unsigned kMaxTasks = 16;

  /**
   * Run @p fn every iteration on @p lcore.
   * @return 0; -EINVAL (lcore not enabled in EAL), -ENOSPC (kMaxTasks reached), -EBUSY (running).
   */
  int add_poll(unsigned lcore, const char* name, TaskFn fn, void* ctx);
  /** Run @p fn on @p lcore every @p period_us microseconds. Same errors as add_poll(). */
  int add_periodic(unsigned lcore, const char* name, TaskFn fn, void* ctx, uint64_t period_us);

  /**
   * Launch every worker lcore that has tasks, then run the main lcore's tasks on the calling
   * thread until stop() or the process stop request, then wait for the workers.
   * @return 0, or -EBUSY when a worker lcore is already busy.
   */
  int run();
  /**
   * Launch the worker lcores and return at once (interactive use: the main lcore stays with
   * the caller). The main lcore must have no tasks.
   * @return 0; -EINVAL (tasks on the main lcore), -EBUSY (a worker is busy or already running).
   */
  int start();
  /** After start(): wait until every worker left its loop. */
  void join();
  /** @return true between start() and the moment every worker loop has returned. */
  bool active() const { return active_loops_.load(std::memory_order_acquire) > 0; }
  /** Forget every task and statistic (not while running). @return 0 or -EBUSY. */
  int clear();
  /** Ask every lcore of this runner to leave its loop after the current iteration. */
  void stop() { stop_.store(true, std::memory_order_relaxed); }
  /** @return true once stop() was called or a stop signal arrived. */
  bool stopping() const;

  /** @return the stats of @p lcore. */
  LcoreStats stats(unsigned lcore) const { return lcores_[lcore].stats; }
  /** @return the lcores that have at least one task. */
  std::vector<unsigned> used_lcores() const;

 private:
  struct Task {
    const char* name;
    TaskFn fn;
    void* ctx;
    uint64_t period_tsc;  // 0: every iteration
    uint64_t next_tsc;
  };
  // Each lcore writes only its own slot; the slots are cache-line aligned so no two lcores
  // share a line. The control thread reads stats after run() returns (after the join).
  struct alignas(64) PerLcore {
    Task tasks[kMaxTasks];
    unsigned nb_tasks = 0;
    bool control_only = false;  // only periodic tasks: the loop may sleep between them
    LcoreStats stats;
  };

  int add(unsigned lcore, const Task& t);
  static int launch(void* arg);
  void loop(unsigned lcore);
  static void nap_until_due(const PerLcore& pl, uint64_t now);

  PerLcore lcores_[RTE_MAX_LCORE];
  int launch_workers();

  std::atomic<bool> stop_{false};  // relaxed: a flag with no data behind it
  // Loops still running; the release on exit pairs with active()'s acquire so a caller that
  // sees 0 also sees the stats the loops wrote.
  std::atomic<unsigned> active_loops_{0};
  bool running_ = false;
};

}  // namespace imago::dp
