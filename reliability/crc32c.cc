// SPDX-License-Identifier: BSD-3-Clause
#include "crc32c.h"

#include <nmmintrin.h>

#include <cstring>

namespace imago {

uint32_t crc32c(uint32_t crc, const void* data, size_t len) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; len >= 8; len -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);  // unaligned-safe load
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; len > 0; --len, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

}  // namespace imago
