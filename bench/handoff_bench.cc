// SPDX-License-Identifier: BSD-3-Clause
// The engine -> application hand-off per message, next to bare rte_ring operations on the
// same 64-byte elements (the limit). One thread plays both sides, so these are the
// instructions of a hand-off without the cross-core cache-line transfer.
#include <benchmark/benchmark.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "api/handoff.h"
#include "dataplane/eal.h"

namespace {

rte_ring* ring() {
  static rte_ring* r = imago::api::handoff_create("bench_handoff", 1024, SOCKET_ID_ANY);
  return r;
}

rte_mempool* buffers() {
  static rte_mempool* p = rte_mempool_create("bench_bufs", 4095, 2048, 256, 0, nullptr, nullptr,
                                             nullptr, nullptr, SOCKET_ID_ANY, 0);
  return p;
}

// Bare ring: enqueue then dequeue a burst of 64-byte elements.
void BM_RteRing_Elem64(benchmark::State& state) {
  auto burst = static_cast<unsigned>(state.range(0));
  std::vector<imago_msg> in(burst), out(burst);
  for (auto _ : state) {
    unsigned n = rte_ring_sp_enqueue_burst_elem(ring(), in.data(), sizeof(imago_msg), burst, nullptr);
    benchmark::DoNotOptimize(rte_ring_sc_dequeue_burst_elem(ring(), out.data(), sizeof(imago_msg), n, nullptr));
  }
  state.SetItemsProcessed(state.iterations() * burst);
}

// A full hand-off: describe each message (tier by size), put, get, read, release.
void handoff(benchmark::State& state, uint32_t len) {
  auto burst = static_cast<unsigned>(state.range(0));
  std::vector<imago_msg> in(burst), out(burst);
  std::vector<uint8_t> payload(len, 0x5a);
  uint64_t sum = 0;
  for (auto _ : state) {
    for (unsigned i = 0; i < burst; ++i) {
      imago::api::describe_message(in[i], 2, payload.data(), len, 0, buffers(), nullptr);
    }
    unsigned n = imago::api::handoff_put(ring(), in.data(), burst);
    n = imago::api::handoff_get(ring(), out.data(), n);
    for (unsigned i = 0; i < n; ++i) sum += *static_cast<uint8_t*>(imago_msg_data(&out[i]));
    imago::api::release_messages(out.data(), n);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * burst);
}

void BM_Handoff_Inline32(benchmark::State& state) { handoff(state, 32); }
void BM_Handoff_Pool512(benchmark::State& state) { handoff(state, 512); }

BENCHMARK(BM_RteRing_Elem64)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_Handoff_Inline32)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_Handoff_Pool512)->Arg(1)->Arg(8)->Arg(32);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  imago::dp::EalDefaults d;
  d.lcores = "0";
  d.memory_mb = 256;
  if (imago::dp::eal_start(argv[0], imago::dp::default_eal_args(d, getpid())) < 0) return 1;
  if (!ring() || !buffers()) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  rte_ring_free(ring());
  rte_mempool_free(buffers());
  imago::dp::eal_stop();
  return 0;
}
