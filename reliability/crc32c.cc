// SPDX-License-Identifier: BSD-3-Clause
#include "crc32c.h"

#include <nmmintrin.h>

#include <cstring>

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

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t len) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
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
  return ~c32;
}

}  // namespace imago
