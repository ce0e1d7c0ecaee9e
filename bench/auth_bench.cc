// SPDX-License-Identifier: BSD-3-Clause
// Google Benchmark for dataplane/auth.h: the per-frame cost of the authentication tag.
//
// BM_Auth_Sign / Verify / SignVerify: keyed BLAKE2b-128 over the link header and a payload of
// 64 B, 1 KiB and 8 KiB (SignVerify is what one frame costs its sender and receiver together).
// BM_Auth_FrameRoundTrip: encode + decode of an L2 frame, without (keyed = 0) and with a key
// (keyed = 1): the tag's cost in the codec's context. BM_Auth_HmacSha256 / HmacSha512256:
// libsodium's HMACs over the same bytes, the alternatives keyed BLAKE2b was chosen over.
#include <benchmark/benchmark.h>
#include <sodium.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "dataplane/auth.h"
#include "dataplane/encap.h"

namespace {

using namespace imago::dp;

AuthKey bench_key() {
  uint8_t raw[kAuthKeyBytes];
  for (size_t i = 0; i < kAuthKeyBytes; ++i) raw[i] = static_cast<uint8_t>(0x5A ^ i);
  AuthKey k;
  if (auth_key_from_bytes(raw, k) < 0) std::abort();
  return k;
}

// The bytes a tag covers: the 4-byte link header and the payload.
size_t covered(const benchmark::State& state) { return sizeof(LinkHdr) + static_cast<size_t>(state.range(0)); }

void set_rates(benchmark::State& state, size_t bytes) {
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

void BM_Auth_Sign(benchmark::State& state) {
  const AuthKey k = bench_key();
  std::vector<uint8_t> data(covered(state), 0xA5);
  uint8_t tag[kAuthTagBytes];
  for (auto _ : state) {
    auth_tag(k, data.data(), data.size(), tag);
    benchmark::DoNotOptimize(tag);
    benchmark::ClobberMemory();
  }
  set_rates(state, data.size());
}

void BM_Auth_Verify(benchmark::State& state) {
  const AuthKey k = bench_key();
  std::vector<uint8_t> data(covered(state), 0xA5);
  uint8_t tag[kAuthTagBytes];
  auth_tag(k, data.data(), data.size(), tag);
  bool ok = true;
  for (auto _ : state) {
    ok &= auth_verify(k, data.data(), data.size(), tag);
    benchmark::DoNotOptimize(ok);
  }
  if (!ok) state.SkipWithError("the tag did not verify");
  set_rates(state, data.size());
}

void BM_Auth_SignVerify(benchmark::State& state) {
  const AuthKey k = bench_key();
  std::vector<uint8_t> data(covered(state), 0xA5);
  uint8_t tag[kAuthTagBytes];
  bool ok = true;
  for (auto _ : state) {
    auth_tag(k, data.data(), data.size(), tag);
    ok &= auth_verify(k, data.data(), data.size(), tag);
    benchmark::DoNotOptimize(ok);
  }
  if (!ok) state.SkipWithError("the tag did not verify");
  set_rates(state, data.size());
}

void BM_Auth_FrameRoundTrip(benchmark::State& state) {
  EncapConfig cfg;
  cfg.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 1}};
  cfg.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 2}};
  if (state.range(1) != 0) cfg.auth = bench_key();
  auto len = static_cast<uint16_t>(state.range(0));
  std::vector<uint8_t> frame(encap_header_len(cfg.kind) + len + encap_trailer_len(cfg), 0xA5);
  DecodeCounters counters;
  size_t n = 0;
  for (auto _ : state) {
    n = encode_frame(cfg, frame.data(), LinkType::Reliability, len);
    DecodedFrame out;
    bool ok = decode_frame(cfg, frame.data(), n, out, counters);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(out);
  }
  if (counters.total_rejected() != 0) state.SkipWithError("the benchmark frame was rejected");
  set_rates(state, n);
}

void BM_Auth_HmacSha256(benchmark::State& state) {
  const AuthKey k = bench_key();
  std::vector<uint8_t> data(covered(state), 0xA5);
  uint8_t mac[crypto_auth_hmacsha256_BYTES];
  for (auto _ : state) {
    crypto_auth_hmacsha256(mac, data.data(), data.size(), k.bytes.data());
    benchmark::DoNotOptimize(mac);
    benchmark::ClobberMemory();
  }
  set_rates(state, data.size());
}

void BM_Auth_HmacSha512256(benchmark::State& state) {
  const AuthKey k = bench_key();
  std::vector<uint8_t> data(covered(state), 0xA5);
  uint8_t mac[crypto_auth_hmacsha512256_BYTES];
  for (auto _ : state) {
    crypto_auth_hmacsha512256(mac, data.data(), data.size(), k.bytes.data());
    benchmark::DoNotOptimize(mac);
    benchmark::ClobberMemory();
  }
  set_rates(state, data.size());
}

BENCHMARK(BM_Auth_Sign)->Arg(64)->Arg(1024)->Arg(8192);
BENCHMARK(BM_Auth_Verify)->Arg(64)->Arg(1024)->Arg(8192);
BENCHMARK(BM_Auth_SignVerify)->Arg(64)->Arg(1024)->Arg(8192);
BENCHMARK(BM_Auth_FrameRoundTrip)->ArgNames({"payload", "keyed"})->ArgsProduct({{64, 1024, 8192}, {0, 1}});
BENCHMARK(BM_Auth_HmacSha256)->Arg(64)->Arg(1024)->Arg(8192);
BENCHMARK(BM_Auth_HmacSha512256)->Arg(64)->Arg(1024)->Arg(8192);

}  // namespace

BENCHMARK_MAIN();
