// SPDX-License-Identifier: BSD-3-Clause
// Google Benchmark for dataplane/fault_model.h: cost of one per-frame verdict.
#include <benchmark/benchmark.h>

#include "dataplane/fault_model.h"

namespace {

using imago::dp::FaultConfig;
using imago::dp::FaultModel;

void run(benchmark::State& state, const FaultConfig& cfg) {
  FaultModel m(cfg);
  for (auto _ : state) {
    auto v = m.next();
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
}

// The cost every frame pays when fault injection is configured but every knob is off.
void BM_FaultModel_Next_NoFaults(benchmark::State& state) { run(state, FaultConfig{}); }
BENCHMARK(BM_FaultModel_Next_NoFaults);

// Loss, bursts, duplication, corruption, reordering and jitter all on.
void BM_FaultModel_Next_AllFaults(benchmark::State& state) {
  run(state, FaultConfig{.drop = 0.01, .burst_enter = 0.001, .dup = 0.01, .corrupt = 0.01,
                         .reorder = 0.01, .delay_us = 10, .jitter_us = 20, .seed = 7});
}
BENCHMARK(BM_FaultModel_Next_AllFaults);

}  // namespace

BENCHMARK_MAIN();
