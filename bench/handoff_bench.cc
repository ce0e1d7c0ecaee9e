// SPDX-License-Identifier: BSD-3-Clause
// The application <-> engine hand-off per message, at bursts of 1, 8 and 32, next to bare
// rte_ring SP/SC enqueue + dequeue of the same 64-byte elements (the limit).
//
// What is measured (one thread, lcore 0, so these are the instructions of a hand-off without
// the cross-core cache-line transfer, which bare ring and hand-off pay alike):
//   BareRing  rte_ring_sp_enqueue_burst_elem + rte_ring_sc_dequeue_burst_elem, 64-byte elements.
//   HandoffRing  handoff_put + handoff_get on the same ring: what the hand-off uses instead
//             (rte_ring's zero-copy reservation and one memcpy a burst; rte_ring's own element
//             copy goes 4 bytes at a time), the floor under both sides below.
//   Send      the public imago_send_burst() of 32-byte (inline) messages, which checks them,
//             copies each into a descriptor and enqueues on the endpoint's tx ring, plus the
//             engine's dequeue of that ring (handoff_get(), what Node::drain_tx() calls).
//   Recv      the engine's enqueue of already described inline messages on the endpoint's rx
//             ring (handoff_put(), what Node::flush_staged() calls), plus the public
//             imago_recv_burst() and imago_release().
//   SendPool / RecvPool  the same with 200-byte messages (the pool tier): a buffer from the
//             pool, its loan, the copy, and giving it back (the engine's release_tx(), or
//             imago_release()).
// The endpoint is a real one of an embedded attachment (node 1 towards node 2); node 2 has no
// such endpoint, so the engine lcore never drains its tx ring nor fills its rx ring, and the
// benchmark plays the engine on the rings found in the shared endpoint table.
//
// At the end a table gives per burst: bare ring and zc ring ns/msg, each side's ns/msg and its
// ratio to the bare ring (each side does one 64-byte enqueue and one dequeue per message); with
// --benchmark_repetitions=N, the best of the N runs.
#include <benchmark/benchmark.h>
#include <rte_memzone.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "api/buffers.h"
#include "api/handoff.h"
#include "api/imago.h"
#include "api/shm.h"
#include "bench/embedded.h"

namespace {

using imago::api::EndpointSlot;

imago_t* g_im = nullptr;
imago::api::ShmRoot* g_shm = nullptr;
imago_ep_t* g_ep = nullptr;
EndpointSlot* g_slot = nullptr;  // g_ep's slot: its rings and loans
rte_ring* g_bare = nullptr;
// The benchmark plays the engine: its own caches, as the engine lcore has (that lcore's
// are in use by node 1's engine meanwhile).
imago::api::PoolCaches g_engine_caches;

constexpr uint32_t kInlineLen = 32;
constexpr uint32_t kPoolLen = 200;
constexpr unsigned kMaxBurst = 32;

// Descriptor arrays on cache-line boundaries, as the ring's own slots are, for every case alike.
struct alignas(64) Descs {
  imago_msg m[kMaxBurst];
};

// Bare ring: enqueue then dequeue a burst of 64-byte elements.
void BM_BareRing(benchmark::State& state) {
  const auto burst = static_cast<unsigned>(state.range(0));
  Descs in{}, out;
  for (auto _ : state) {
    unsigned n = rte_ring_sp_enqueue_burst_elem(g_bare, in.m, sizeof(imago_msg), burst, nullptr);
    benchmark::DoNotOptimize(rte_ring_sc_dequeue_burst_elem(g_bare, out.m, sizeof(imago_msg), n, nullptr));
    benchmark::DoNotOptimize(out.m);  // what was dequeued counts as read: no dead copies
  }
  state.SetItemsProcessed(state.iterations() * burst);
}

// The hand-off's own ring calls alone (handoff_put + handoff_get: zero-copy reservation and
// memcpy), on the same ring: the floor under both sides.
void BM_HandoffRing(benchmark::State& state) {
  const auto burst = static_cast<unsigned>(state.range(0));
  Descs in{}, out;
  for (auto _ : state) {
    unsigned n = imago::api::handoff_put(g_bare, in.m, burst);
    benchmark::DoNotOptimize(imago::api::handoff_get(g_bare, out.m, n));
    benchmark::DoNotOptimize(out.m);
  }
  state.SetItemsProcessed(state.iterations() * burst);
}

// Application send (imago_send_burst) + engine dequeue of the tx ring.
void send_side(benchmark::State& state, uint32_t len) {
  const auto burst = static_cast<unsigned>(state.range(0));
  std::vector<uint8_t> payload(len, 0x5a);
  std::vector<imago_iov> iov(burst, imago_iov{payload.data(), len});
  Descs out;
  uint64_t sum = 0;
  for (auto _ : state) {
    int sent = imago_send_burst(g_ep, iov.data(), burst, 0);
    unsigned n = imago::api::handoff_get(g_slot->tx, out.m, burst);
    benchmark::DoNotOptimize(out.m);
    if (sent != static_cast<int>(burst) || n != burst) {
      state.SkipWithError("the tx ring did not take a whole burst");
      break;
    }
    if (len > IMAGO_MSG_INLINE_MAX) {
      for (unsigned i = 0; i < n; ++i)  // the engine, once it took the message
        if (void* o = g_slot->tx_loans.take(out.m[i].u.ext.loan)) imago::api::put_loaned(o, &g_engine_caches);
    }
    sum += out.m[n - 1].len;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * burst);
}

// Engine enqueue of described messages + application imago_recv_burst + imago_release.
void recv_side(benchmark::State& state, uint32_t len) {
  const auto burst = static_cast<unsigned>(state.range(0));
  std::vector<uint8_t> payload(len, 0xa5);
  Descs described, out;
  for (imago_msg& d : std::span(described.m, burst)) {
    d = imago_msg{};
    d.src = 2;
    d.len = len;
    std::memcpy(d.u.inline_data, payload.data(), std::min<uint32_t>(len, IMAGO_MSG_INLINE_MAX));
  }
  uint64_t sum = 0;
  for (auto _ : state) {
    if (len > IMAGO_MSG_INLINE_MAX) {
      for (imago_msg& d : std::span(described.m, burst)) {  // the engine's describe() of the pool tier
        void* obj = imago::api::buffer_get(g_shm->msg_pool, &g_engine_caches);
        uint32_t loan = obj ? g_slot->rx_loans.lend(obj) : imago::api::LoanTable::kNone;
        if (loan == imago::api::LoanTable::kNone) {
          state.SkipWithError("no buffer or loan");
          return;
        }
        auto* data = static_cast<uint8_t*>(obj) + imago::api::kHeadroom;
        std::memcpy(data, payload.data(), len);
        d.tier = IMAGO_TIER_POOL;
        d.u.ext = {data, obj, loan};
      }
    }
    unsigned put = imago::api::handoff_put(g_slot->rx, described.m, burst);
    int n = imago_recv_burst(g_ep, out.m, burst);
    if (put != burst || n != static_cast<int>(burst)) {
      state.SkipWithError("the rx ring did not take a whole burst");
      break;
    }
    sum += *static_cast<const uint8_t*>(imago_msg_data(&out.m[0]));
    imago_release(g_ep, out.m, burst);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * burst);
}

void BM_Send(benchmark::State& state) { send_side(state, kInlineLen); }
void BM_Recv(benchmark::State& state) { recv_side(state, kInlineLen); }
void BM_SendPool(benchmark::State& state) { send_side(state, kPoolLen); }
void BM_RecvPool(benchmark::State& state) { recv_side(state, kPoolLen); }

BENCHMARK(BM_BareRing)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_HandoffRing)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_Send)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_Recv)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_SendPool)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_RecvPool)->Arg(1)->Arg(8)->Arg(32);

// The console output, plus each run's real ns per message kept for the closing table.
class TableReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration || r.iterations == 0) continue;
      auto it = r.counters.find("items_per_second");
      if (it == r.counters.end() || it->second.value <= 0) continue;
      // With --benchmark_repetitions the best run counts: noise only ever adds time.
      double ns = 1e9 / it->second.value;
      auto [at, fresh] = ns_.emplace(r.benchmark_name(), ns);
      if (!fresh && ns < at->second) at->second = ns;
    }
  }
  void table() const {
    std::printf("\nhand-off per message (ns, one thread; ratio = side / bare rte_ring):\n");
    std::printf("%6s %10s %10s %10s %7s %10s %7s %10s %10s\n", "burst", "bare_ring", "zc_ring", "send", "ratio",
                "recv", "ratio", "send_pool", "recv_pool");
    for (int b : {1, 8, 32}) {
      double bare = get("BM_BareRing", b), tx = get("BM_Send", b), rx = get("BM_Recv", b);
      if (bare <= 0) continue;
      std::printf("%6d %10.2f %10.2f %10.2f %7.2f %10.2f %7.2f %10.2f %10.2f\n", b, bare, get("BM_HandoffRing", b), tx,
                  tx / bare, rx, rx / bare, get("BM_SendPool", b), get("BM_RecvPool", b));
    }
  }

 private:
  double get(const char* name, int burst) const {
    auto it = ns_.find(std::string(name) + "/" + std::to_string(burst));
    return it == ns_.end() ? 0 : it->second;
  }
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  if ((g_im = bench_init_attach(&argc, argv)) == nullptr) return 1;
  const rte_memzone* mz = rte_memzone_lookup(imago::api::kShmName);
  g_shm = mz ? static_cast<imago::api::ShmRoot*>(mz->addr) : nullptr;
  int rc = g_shm ? imago_open(g_im, "bench", 2, nullptr, &g_ep) : -ENOENT;
  if (rc == 0) {
    for (EndpointSlot& s : g_shm->slots)
      if (std::strcmp(s.name, "bench") == 0 && s.state.load() == imago::api::SlotState::kOpen) g_slot = &s;
    g_bare = imago::api::handoff_create("bench_bare", 1024, SOCKET_ID_ANY);
    rc = imago::api::pool_caches_create(g_engine_caches, g_shm->msg_pool, g_shm->frame_pool);
  }
  if (rc != 0 || g_slot == nullptr || g_bare == nullptr) {
    std::fprintf(stderr, "cannot set up the endpoint: %d\n", rc);
    imago_detach(g_im);
    return 1;
  }
  TableReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  rep.table();
  benchmark::Shutdown();
  rte_ring_free(g_bare);
  imago::api::pool_caches_free(g_engine_caches);
  imago_close(g_ep);
  imago_detach(g_im);
  return 0;
}
