// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/lcore.h"

#include <rte_cycles.h>
#include <rte_launch.h>

#include <algorithm>
#include <cerrno>

#include "dataplane/eal.h"
#include "dataplane/log.h"

namespace imago::dp {

int LcoreRunner::add(unsigned lcore, const Task& t) {
  if (lcore >= RTE_MAX_LCORE || !rte_lcore_is_enabled(lcore)) return -EINVAL;
  if (running_) return -EBUSY;
  PerLcore& pl = lcores_[lcore];
  if (pl.nb_tasks == kMaxTasks) return -ENOSPC;
  pl.tasks[pl.nb_tasks++] = t;
  pl.control_only = true;
  for (unsigned i = 0; i < pl.nb_tasks; ++i) pl.control_only &= pl.tasks[i].period_tsc != 0;
  return 0;
}

int LcoreRunner::add_poll(unsigned lcore, const char* name, TaskFn fn, void* ctx) {
  return add(lcore, Task{name, fn, ctx, 0, 0});
}

int LcoreRunner::add_periodic(unsigned lcore, const char* name, TaskFn fn, void* ctx,
                              uint64_t period_us) {
  // In 128 bits: hz x microseconds passes 2^64 for periods of about an hour at 5 GHz.
  const unsigned __int128 cycles = static_cast<unsigned __int128>(rte_get_tsc_hz()) * period_us / 1'000'000;
  uint64_t period = cycles > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(cycles);
  return add(lcore, Task{name, fn, ctx, period ? period : 1, 0});
}

bool LcoreRunner::stopping() const {
  return stop_.load(std::memory_order_relaxed) || stop_requested();
}

std::vector<unsigned> LcoreRunner::used_lcores() const {
  std::vector<unsigned> v;
  for (unsigned l = 0; l < RTE_MAX_LCORE; ++l) {
    if (lcores_[l].nb_tasks) v.push_back(l);
  }
  return v;
}

void LcoreRunner::loop(unsigned lcore) {
  PerLcore& pl = lcores_[lcore];
  uint64_t prev = rte_rdtsc();
  bool prev_busy = false;
  while (!stopping()) {
    uint64_t now = rte_rdtsc();  // the one TSC read of this iteration
    (prev_busy ? pl.stats.busy_cycles : pl.stats.idle_cycles) += now - prev;
    prev = now;
    unsigned work = 0;
    for (unsigned i = 0; i < pl.nb_tasks; ++i) {
      Task& t = pl.tasks[i];
      if (t.period_tsc) {
        if (now < t.next_tsc) continue;
        t.next_tsc = now + t.period_tsc;
      }
      work += t.fn(t.ctx, now);
    }
    prev_busy = work != 0;
    pl.stats.work += work;
    ++pl.stats.iterations;
    if (pl.control_only) nap_until_due(pl, now);
  }
}

// A control lcore (only periodic tasks: stats, completion checks) has nothing to poll, so it
// sleeps until its next task is due instead of taking a core from the pollers. Bounded to
// 1 ms so a stop request is seen quickly.
void LcoreRunner::nap_until_due(const PerLcore& pl, uint64_t now) {
  uint64_t next = UINT64_MAX;
  for (unsigned i = 0; i < pl.nb_tasks; ++i) next = std::min(next, pl.tasks[i].next_tsc);
  if (next <= now) return;
  uint64_t us = (next - now) * 1'000'000 / rte_get_tsc_hz();
  rte_delay_us_sleep(static_cast<unsigned>(std::min<uint64_t>(us, 1000)));
}

int LcoreRunner::launch(void* arg) {
  auto* self = static_cast<LcoreRunner*>(arg);
  self->loop(rte_lcore_id());
  self->active_loops_.fetch_sub(1, std::memory_order_release);
  return 0;
}

int LcoreRunner::launch_workers() {
  stop_.store(false, std::memory_order_relaxed);
  running_ = true;
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) {
    if (lcores_[lcore].nb_tasks == 0) continue;
    active_loops_.fetch_add(1, std::memory_order_relaxed);
    if (rte_eal_remote_launch(launch, this, lcore) < 0) {
      active_loops_.fetch_sub(1, std::memory_order_relaxed);
      IMAGO_LOG(ERR, lcore, "lcore %u is busy; cannot launch\n", lcore);
      stop();
      return -EBUSY;
    }
  }
  return 0;
}

int LcoreRunner::run() {
  unsigned main = rte_get_main_lcore();
  int rc = launch_workers();
  if (rc == 0 && lcores_[main].nb_tasks) loop(main);
  while (rc == 0 && !stopping()) rte_delay_us_sleep(1000);  // a main lcore without tasks waits
  join();
  return rc;
}

int LcoreRunner::start() {
  if (running_) return -EBUSY;
  if (lcores_[rte_get_main_lcore()].nb_tasks) return -EINVAL;
  int rc = launch_workers();
  if (rc < 0) join();
  return rc;
}

void LcoreRunner::join() {
  rte_eal_mp_wait_lcore();
  running_ = false;
}

int LcoreRunner::clear() {
  if (running_) return -EBUSY;
  for (auto& pl : lcores_) pl = PerLcore{};
  return 0;
}

}  // namespace imago::dp
