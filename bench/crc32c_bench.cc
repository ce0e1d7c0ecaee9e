// SPDX-License-Identifier: BSD-3-Clause
// Google Benchmark for reliability/crc32c.h: CRC32C throughput by buffer size.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "reliability/crc32c.h"
#include "reliability/rng.h"

namespace {

void BM_Crc32c(benchmark::State& state) {
  const auto len = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf(len);
  imago::Rng rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng.next());
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = imago::crc32c(crc, buf.data(), buf.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(len));
}
BENCHMARK(BM_Crc32c)->Arg(16)->Arg(64)->Arg(256)->Arg(512)->Arg(1024)->Arg(1454)->Arg(8192)->Arg(16384);

}  // namespace

BENCHMARK_MAIN();
