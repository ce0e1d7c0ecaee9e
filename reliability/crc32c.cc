// SPDX-License-Identifier: BSD-3-Clause
#include "crc32c.h"

#include <immintrin.h>
#include <nmmintrin.h>

#include <cstring>
#include <initializer_list>

namespace imago {

namespace {

uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // unaligned-safe load
  return v;
}

// The crc32 instruction issues once a cycle but takes three, so one serial chain uses a third
// of it. Long buffers go in blocks of three lanes of Lane bytes, each lane its own chain. The
// lanes are joined by carrying a CRC state over Lane zero bytes: c -> c * x^(8 Lane) mod P, a
// linear map on 32 bits, applied a byte at a time through four 256-entry tables, made at
// first use by running the instruction itself over zeros (nothing to get wrong by hand).
template <size_t Lane>
struct Shift {
  static_assert(Lane % 8 == 0);
  uint32_t t[4][256];
  Shift() {
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) {
        uint64_t c = uint64_t{b} << (8 * k);
        for (size_t i = 0; i < Lane; i += 8) c = _mm_crc32_u64(c, 0);
        t[k][b] = static_cast<uint32_t>(c);
      }
  }
  uint32_t operator()(uint64_t c) const {
    return t[0][c & 255] ^ t[1][(c >> 8) & 255] ^ t[2][(c >> 16) & 255] ^ t[3][(c >> 24) & 255];
  }
};

// State after the whole blocks of 3 x Lane bytes in the first @p blocks * 3 * Lane bytes at @p q.
template <size_t Lane>
uint64_t three_lanes(uint64_t c, const unsigned char* q, size_t blocks) {
  static const Shift<Lane> shift;
  for (; blocks > 0; --blocks, q += 3 * Lane) {
    uint64_t c0 = c, c1 = 0, c2 = 0;
    for (size_t i = 0; i < Lane; i += 8) {
      c0 = _mm_crc32_u64(c0, load64(q + i));
      c1 = _mm_crc32_u64(c1, load64(q + Lane + i));
      c2 = _mm_crc32_u64(c2, load64(q + 2 * Lane + i));
    }
    // CRC state is linear: crc(s, A B) = shift_|B|(crc(s, A)) ^ crc(0, B).
    c = shift(shift(c0) ^ c1) ^ c2;
  }
  return c;
}

struct Progress {
  uint64_t c;
  const unsigned char* p;
  size_t len;
};

// Out of line, so the short buffers' path saves no registers for it.
[[gnu::noinline]] Progress long_part(Progress s) {
  const size_t big = s.len / (3 * 256);
  s.c = three_lanes<256>(s.c, s.p, big);
  s.p += big * 3 * 256, s.len -= big * 3 * 256;
  const size_t small = s.len / (3 * 32);
  s.c = three_lanes<32>(s.c, s.p, small);
  s.p += small * 3 * 32, s.len -= small * 3 * 32;
  return s;
}

// Long buffers on CPUs with VPCLMULQDQ and AVX-512: sixteen 16-byte lanes (four 64-byte
// registers) each carry a CRC-equivalent block forward by 256 bytes a step with two
// carry-less multiplications (then the registers fold into one, which takes the rest 64
// bytes a step), the folding of Intel's "Fast CRC Computation Using PCLMULQDQ",
// four times the bytes per cycle of the three crc32 lanes. A block V at position q and a
// block W at q + S are equivalent when crc(0, V 0^S) = crc(0, W) (the state is linear in the
// bytes); W = clmul(V.lo, K_lo) ^ clmul(V.hi, K_hi) for two constants, which are found at
// first use by trying powers of x against the crc32 instruction itself (nothing written by
// hand to get wrong). At the end the four blocks, in order, and the tail go through the
// crc32 path.
constexpr size_t kFoldStride = 256;  // bytes each lane moves forward per step
constexpr size_t kFoldMin = 256;    // below this the setup and the final blocks cost more

uint32_t crc_of(uint64_t lo, uint64_t hi, size_t zeros) {
  uint64_t c = _mm_crc32_u64(_mm_crc32_u64(0, lo), hi);
  for (size_t i = 0; i < zeros; i += 8) c = _mm_crc32_u64(c, 0);
  return static_cast<uint32_t>(c);
}

[[gnu::target("pclmul")]] uint32_t crc_of_product(uint64_t u, uint64_t k) {
  const __m128i m = _mm_clmulepi64_si128(_mm_set_epi64x(0, static_cast<long long>(u)),
                                         _mm_set_epi64x(0, static_cast<long long>(k)), 0);
  return crc_of(static_cast<uint64_t>(_mm_cvtsi128_si64(m)),
                static_cast<uint64_t>(_mm_extract_epi64(m, 1)), 0);
}

/** @return K with crc(0, clmul(u, K)) = crc(0, u 0^(8 + zeros)) for every 8-byte u, or 0. */
[[gnu::target("pclmul")]] uint64_t find_fold_constant(size_t zeros) {
  const uint64_t probe[] = {1, 0x8000000000000000ull, 0x0123456789ABCDEFull, 0xF00DFACEB00C1234ull};
  uint32_t r = 0x80000000u;  // x^0, reflected; times x each round below
  for (size_t d = 0; d < 8 * zeros + 128; ++d, r = (r >> 1) ^ (0x82F63B78u & (0u - (r & 1u)))) {
    for (const uint64_t k : {uint64_t{r}, uint64_t{r} << 1}) {
      bool ok = true;
      for (uint64_t u : probe) ok = ok && crc_of_product(u, k) == crc_of(u, 0, zeros);
      if (ok) return k;
    }
  }
  return 0;
}

struct FoldConstants {
  uint64_t lo, hi;      // a lane's low and high 8 bytes, one stride on
  uint64_t lo64, hi64;  // ...64 bytes on (a register folded into the next)
  bool ok;
  FoldConstants() {
    ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
         __builtin_cpu_supports("pclmul");
    if (!ok) return;
    // lo is followed by the high half, then the distance; hi by the distance alone.
    lo = find_fold_constant(kFoldStride), hi = find_fold_constant(kFoldStride - 8);
    lo64 = find_fold_constant(64), hi64 = find_fold_constant(56);
    ok = lo != 0 && hi != 0 && lo64 != 0 && hi64 != 0;
  }
};

const FoldConstants& fold_constants() {
  static const FoldConstants k;
  return k;
}

/** Four lanes carried forward (by the distance of @p k), the next 64 bytes added:
 *  clmul(lo, K_lo) ^ clmul(hi, K_hi) ^ next. */
[[gnu::target("avx512f,vpclmulqdq"), gnu::always_inline]] inline __m512i fold_step(__m512i a, __m512i k,
                                                                                 __m512i next) {
  const __m512i x = _mm512_clmulepi64_epi128(a, k, 0x00), y = _mm512_clmulepi64_epi128(a, k, 0x11);
  return _mm512_ternarylogic_epi64(x, y, next, 0x96);
}

[[gnu::target("avx512f,vpclmulqdq"), gnu::always_inline]] inline __m512i pair(uint64_t lo, uint64_t hi) {
  return _mm512_set4_epi64(static_cast<long long>(hi), static_cast<long long>(lo), static_cast<long long>(hi),
                           static_cast<long long>(lo));
}

// Fold the first @p len bytes (>= kFoldStride) at @p q, from state @p c: whole strides in four
// registers, folded into one, then 64 bytes at a time. @return the bytes consumed; the 64
// bytes the lanes then stand for are in @p out (for the crc32 path, from state 0).
[[gnu::target("avx512f,vpclmulqdq")]] size_t fold_lanes(uint64_t c, const unsigned char* q, size_t len,
                                                        const FoldConstants& k, unsigned char* out) {
  const __m512i kk = pair(k.lo, k.hi), k64 = pair(k.lo64, k.hi64);
  __m512i a0 = _mm512_loadu_si512(q), a1 = _mm512_loadu_si512(q + 64);
  __m512i a2 = _mm512_loadu_si512(q + 128), a3 = _mm512_loadu_si512(q + 192);
  a0 = _mm512_xor_si512(a0, _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, static_cast<long long>(c)));
  size_t done = kFoldStride;
  for (; done + kFoldStride <= len; done += kFoldStride) {
    const unsigned char* n = q + done;
    a0 = fold_step(a0, kk, _mm512_loadu_si512(n)), a1 = fold_step(a1, kk, _mm512_loadu_si512(n + 64));
    a2 = fold_step(a2, kk, _mm512_loadu_si512(n + 128)), a3 = fold_step(a3, kk, _mm512_loadu_si512(n + 192));
  }
  a1 = fold_step(a0, k64, a1), a2 = fold_step(a1, k64, a2), a3 = fold_step(a2, k64, a3);
  for (; done + 64 <= len; done += 64) a3 = fold_step(a3, k64, _mm512_loadu_si512(q + done));
  _mm512_storeu_si512(out, a3);
  return done;
}

}  // namespace

namespace {

/** @return the crc32 instruction's state after @p len bytes at @p p from state @p c. */
uint32_t crc_lanes(uint64_t c, const unsigned char* p, size_t len) {
  if (len >= 3 * 32) {
    const Progress s = long_part({c, p, len});
    c = s.c, p = s.p, len = s.len;
  }
  for (; len >= 8; len -= 8, p += 8) c = _mm_crc32_u64(c, load64(p));
  auto c32 = static_cast<uint32_t>(c);
  if (len & 4) {  // the tail in at most three steps, not one a byte
    uint32_t v;
    std::memcpy(&v, p, 4);
    c32 = _mm_crc32_u32(c32, v), p += 4;
  }
  if (len & 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    c32 = _mm_crc32_u16(c32, v), p += 2;
  }
  if (len & 1) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t len) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  if (len >= kFoldMin && fold_constants().ok) {
    alignas(64) unsigned char lanes[64];
    const size_t done = fold_lanes(c, p, len, fold_constants(), lanes);
    c = crc_lanes(0, lanes, sizeof lanes);  // the lanes carry the start state now
    p += done, len -= done;
  }
  return ~crc_lanes(c, p, len);
}

}  // namespace imago
