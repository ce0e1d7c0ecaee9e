/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Big-endian integer field types for wire structs.
 *
 * A wire struct stores its multi-byte fields as Be16/Be32/Be64, so the byte order is in the
 * type and a field cannot be read without converting it. They are trivially copyable,
 * alignment 1 (safe inside packed structs), and convert only in get()/set().
 */
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace imago {

template <typename T>
constexpr T byteswap_if_little(T v) {
  if constexpr (std::endian::native == std::endian::big || sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(v));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(v));
  } else {
    static_assert(sizeof(T) == 8);
    return static_cast<T>(__builtin_bswap64(v));
  }
}

/** An unsigned integer stored big-endian; byte-addressed so it may sit at any offset. */
template <typename T>
struct BigEndian {
  unsigned char bytes[sizeof(T)];

  /** @return the host-order value. */
  T get() const {
    T raw;
    std::memcpy(&raw, bytes, sizeof(T));
    return byteswap_if_little(raw);
  }
  /** Store @p v (host order) in network order. */
  void set(T v) {
    T raw = byteswap_if_little(v);
    std::memcpy(bytes, &raw, sizeof(T));
  }
};

using Be16 = BigEndian<uint16_t>;
using Be32 = BigEndian<uint32_t>;
using Be64 = BigEndian<uint64_t>;

static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be32) == 4 && alignof(Be32) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);

}  // namespace imago
