/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Messages whose every byte says which message it is, for the EAL suite's streams: message n
 * has size_of(n) bytes (1 B .. 4 KiB, fragments too), byte i is byte_of(n, i), and a Checker
 * counts those delivered out of order or with a wrong byte.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace imago::test {

inline uint8_t byte_of(uint64_t n, size_t i) { return static_cast<uint8_t>(n * 131 + i * 7 + (i >> 8)); }
inline size_t size_of(uint64_t n) { return 1 + (n * 977) % 4000; }

struct Checker {
  uint64_t next = 0;  ///< the message expected next
  uint64_t bad = 0;   ///< messages delivered out of order or with wrong bytes
  void check(std::span<const uint8_t> m) {
    bool ok = m.size() == size_of(next);
    for (size_t i = 0; ok && i < m.size(); ++i) ok = m[i] == byte_of(next, i);
    bad += !ok;
    ++next;
  }
};

}  // namespace imago::test
