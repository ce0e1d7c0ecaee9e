// SPDX-License-Identifier: BSD-3-Clause
// End-to-end stream in pipeline mode: application lcore -> tx ring -> engine lcore -> link ->
// engine -> rx ring -> application. Embedded attachment: nodes 1 and 2 over the crossed
// net_ring pair, both engines polled by lcore 1; this thread (lcore 0) is the application of
// both ends, interleaving send bursts on node 1's endpoint with receive bursts on node 2's
// (a send burst of 32, then what is ready to receive).
//
// Each message carries its sequence number in its first and last 8 bytes; the receiver checks
// its length and both copies, so a lost, duplicated, reordered, truncated or mixed-up message
// fails the run. Reported (manual time: the stream only, not the set-up): msgs_per_s, gbps
// (message bytes only, no headers), the share of messages received zero-copy in the frame, and
// how often the engine found the rx ring full.
//
// 32 B messages travel inline in the descriptors; 64 B ones in pool buffers; 1 KiB ones in a
// pool buffer on the way out and zero-copy in the received frame on the way in.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "api/imago.h"
#include "bench/embedded.h"

namespace {

using Clock = std::chrono::steady_clock;

imago_t* g_im = nullptr;
imago_ep_t* g_tx = nullptr;  // node 1 -> node 2
imago_ep_t* g_rx = nullptr;  // node 2, from node 1
uint64_t g_sent = 0;         // the stream's next sequence number to send...
uint64_t g_received = 0;     // ...and to receive: equal between iterations

constexpr unsigned kBurst = 32;
// The receiver drains up to this many bursts per send burst. With one receive burst per send
// burst the rx ring fills now and then, the engine withholds credit, and the stream often
// drops into a mode several times slower (see rx_ring_full in imago_ep_stats).
constexpr unsigned kDrainBursts = 8;
constexpr uint64_t kPerIteration = 8192;
constexpr auto kIterationLimit = std::chrono::seconds(20);

uint64_t seq_at(const uint8_t* p) {
  uint64_t s;
  std::memcpy(&s, p, sizeof s);
  return s;
}

// After a failed run: drop whatever is still coming, so the next run starts a clean stream.
void resync() {
  imago_msg msgs[kBurst];
  const auto quiet_for = std::chrono::milliseconds(200);
  for (auto last = Clock::now(); Clock::now() - last < quiet_for;) {
    int n = imago_recv_burst(g_rx, msgs, kBurst);
    if (n > 0) imago_release(g_rx, msgs, static_cast<unsigned>(n)), last = Clock::now();
    if (n < 0) break;
  }
  g_received = g_sent;
}

void fail(benchmark::State& state, const char* why) {
  state.SkipWithError(why);
  resync();
}

void BM_Stream(benchmark::State& state) {
  const auto len = static_cast<uint32_t>(state.range(0));
  std::vector<std::vector<uint8_t>> bufs(kBurst, std::vector<uint8_t>(len, 0x5a));
  imago_iov iov[kBurst];
  for (unsigned i = 0; i < kBurst; ++i) iov[i] = {bufs[i].data(), len};
  imago_msg msgs[kBurst];
  imago_ep_stats rx0{}, rx1{};
  imago_stats(g_rx, &rx0);
  uint64_t msgs_total = 0, bad = 0;
  double seconds = 0;

  for (auto _ : state) {
    const uint64_t target = g_sent + kPerIteration;
    const auto t0 = Clock::now();
    const auto limit = t0 + kIterationLimit;
    for (unsigned spin = 0; g_received < target; ++spin) {
      if (g_sent < target) {
        const auto k = static_cast<unsigned>(std::min<uint64_t>(kBurst, target - g_sent));
        for (unsigned i = 0; i < k; ++i) {
          const uint64_t s = g_sent + i;
          std::memcpy(bufs[i].data(), &s, sizeof s);
          std::memcpy(bufs[i].data() + len - sizeof s, &s, sizeof s);
        }
        int rc = imago_send_burst(g_tx, iov, k, 0);
        if (rc < 0) {
          fail(state, "imago_send_burst failed");
          return;
        }
        g_sent += static_cast<unsigned>(rc);
      }
      // Receive what is ready (up to kDrainBursts bursts) before the next send burst.
      for (unsigned r = 0; r < kDrainBursts; ++r) {
        int n = imago_recv_burst(g_rx, msgs, kBurst);
        if (n < 0) {
          fail(state, "imago_recv_burst failed");
          return;
        }
        for (int i = 0; i < n; ++i, ++g_received) {
          const auto* p = static_cast<const uint8_t*>(imago_msg_data(&msgs[i]));
          if (msgs[i].len != len || seq_at(p) != g_received || seq_at(p + len - 8) != g_received) ++bad;
        }
        imago_release(g_rx, msgs, static_cast<unsigned>(n));
        if (n < static_cast<int>(kBurst)) break;
      }
      if (bad > 0) {
        fail(state, "a message arrived wrong (length, sequence or bytes)");
        return;
      }
      if ((spin & 1023) == 0 && Clock::now() > limit) {
        fail(state, "the stream stalled");
        return;
      }
    }
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
    msgs_total += kPerIteration;
  }
  imago_stats(g_rx, &rx1);
  if (seconds <= 0) return;
  state.counters["msgs_per_s"] = static_cast<double>(msgs_total) / seconds;
  state.counters["gbps"] = static_cast<double>(msgs_total) * len * 8 / seconds / 1e9;
  state.counters["rx_ring_full"] = static_cast<double>(rx1.rx_ring_full - rx0.rx_ring_full);
  state.counters["rx_mbuf_pct"] = 100.0 * static_cast<double>(rx1.rx_mbuf - rx0.rx_mbuf) / static_cast<double>(msgs_total);
}

BENCHMARK(BM_Stream)->Arg(32)->Arg(64)->Arg(1024)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if ((g_im = bench_init_attach(&argc, argv)) == nullptr) return 1;
  imago_ep_opts node2{.local_node = 2, .ring_size = 0, .reserved = 0};
  int rc = imago_open(g_im, "stream", 2, nullptr, &g_tx);
  if (rc == 0) rc = imago_open(g_im, "stream", 1, &node2, &g_rx);
  const auto ready_by = Clock::now() + std::chrono::seconds(5);
  while (rc == 0 && !(imago_peer_ready(g_tx) == 1 && imago_peer_ready(g_rx) == 1)) {
    if (Clock::now() > ready_by) rc = -ETIMEDOUT;
  }
  if (rc != 0) {
    std::fprintf(stderr, "cannot open the stream's endpoints: %d\n", rc);
    imago_detach(g_im);
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  imago_detach(g_im);  // closes both endpoints
  return 0;
}
