// SPDX-License-Identifier: BSD-3-Clause
// Google Benchmark for dataplane/encap.h: encode and decode of one frame per encapsulation,
// by payload size (16 .. 8192 bytes, capped to what fits a 9000-byte jumbo MTU).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "dataplane/encap.h"

namespace {

using namespace imago::dp;

constexpr size_t kJumboMtu = 9000;

EncapConfig config(Encap kind) {
  EncapConfig c;
  c.kind = kind;
  c.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 1}};
  c.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 2}};
  c.src_ip = 0x0A000001;
  c.dst_ip = 0x0A000002;
  return c;  // UDP checksum on: the costly, default case
}

uint16_t payload_len(Encap kind, const benchmark::State& state) {
  return static_cast<uint16_t>(
      std::min(static_cast<size_t>(state.range(0)), max_payload(kind, kJumboMtu)));
}

void set_rates(benchmark::State& state, size_t frame_len) {
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(frame_len));
}

void encode_bench(benchmark::State& state, Encap kind) {
  EncapConfig cfg = config(kind);
  uint16_t len = payload_len(kind, state);
  std::vector<uint8_t> frame(encap_header_len(kind) + len, 0xA5);
  size_t n = 0;
  for (auto _ : state) {
    n = encode_frame(cfg, frame.data(), LinkType::Reliability, len);
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
  }
  set_rates(state, n);
}

void decode_bench(benchmark::State& state, Encap kind) {
  EncapConfig cfg = config(kind);
  uint16_t len = payload_len(kind, state);
  std::vector<uint8_t> frame(encap_header_len(kind) + len, 0xA5);
  size_t n = encode_frame(cfg, frame.data(), LinkType::Reliability, len);
  DecodeCounters counters;
  for (auto _ : state) {
    DecodedFrame out;
    bool ok = decode_frame(cfg, frame.data(), n, out, counters);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(out);
  }
  if (counters.total_rejected() != 0) state.SkipWithError("the benchmark frame was rejected");
  set_rates(state, n);
}

void BM_Codec_EncodeL2(benchmark::State& state) { encode_bench(state, Encap::L2); }
void BM_Codec_DecodeL2(benchmark::State& state) { decode_bench(state, Encap::L2); }
void BM_Codec_EncodeUdp(benchmark::State& state) { encode_bench(state, Encap::Udp); }
void BM_Codec_DecodeUdp(benchmark::State& state) { decode_bench(state, Encap::Udp); }

BENCHMARK(BM_Codec_EncodeL2)->RangeMultiplier(4)->Range(16, 1024)->Arg(8192);
BENCHMARK(BM_Codec_DecodeL2)->RangeMultiplier(4)->Range(16, 1024)->Arg(8192);
BENCHMARK(BM_Codec_EncodeUdp)->RangeMultiplier(4)->Range(16, 1024)->Arg(8192);
BENCHMARK(BM_Codec_DecodeUdp)->RangeMultiplier(4)->Range(16, 1024)->Arg(8192);

}  // namespace

BENCHMARK_MAIN();
