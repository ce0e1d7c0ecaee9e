// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for reliability/crc32c.h: the SSE4.2 CRC32C against a bytewise reference.
#include "reliability/crc32c.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "reliability/rng.h"

namespace imago {
namespace {

// Bytewise reflected CRC-32C (polynomial 0x1EDC6F41, reflected 0x82F63B78), written from the
// definition so it shares nothing with the hardware path under test.
uint32_t crc32c_reference(uint32_t crc, const uint8_t* p, size_t len) {
  crc = ~crc;
  for (size_t i = 0; i < len; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng.next());
  return v;
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  // Do: checksum the ASCII digits "123456789".
  const char* digits = "123456789";
  // Expect: the published CRC-32C check value, from both implementations.
  EXPECT_EQ(crc32c(0, digits, 9), 0xE3069283u);
  EXPECT_EQ(crc32c_reference(0, reinterpret_cast<const uint8_t*>(digits), 9), 0xE3069283u);
}

TEST(Crc32c, EmptyInputLeavesTheRunningValueUnchanged) {
  // Do: extend a start value and a running value by zero bytes (null pointer allowed).
  // Expect: 0 stays 0 and a running CRC is returned as is.
  EXPECT_EQ(crc32c(0, nullptr, 0), 0u);
  EXPECT_EQ(crc32c(0xE3069283u, nullptr, 0), 0xE3069283u);
}

TEST(Crc32c, MatchesReferenceForEveryLengthUpTo64) {
  // Do: checksum every prefix length 0..64 of a random buffer.
  auto buf = random_bytes(64, 7);
  for (size_t len = 0; len <= 64; ++len) {
    // Expect: hardware and bytewise reference agree at every length (8-byte steps and tails).
    EXPECT_EQ(crc32c(0, buf.data(), len), crc32c_reference(0, buf.data(), len)) << "len " << len;
  }
}

TEST(Crc32c, MatchesReferenceAcrossTheFoldingAndThreeLanePathsAtEveryLength) {
  // Do: checksum every length 0..1800 (from 256 bytes the carry-less folding where the CPU
  // has VPCLMULQDQ, 256-byte strides then 64-byte steps; blocks of 3 x 256 and 3 x 32 bytes;
  // the serial tail), a jumbo frame and a 64 KiB message, from aligned and unaligned starts,
  // starting from 0 and from a running value.
  auto buf = random_bytes(65536 + 3, 11);
  for (size_t start : {size_t{0}, size_t{3}}) {
    const uint8_t* p = buf.data() + start;
    for (size_t len = 0; len <= 1800; ++len) {
      // Expect: the reference's value at every length.
      ASSERT_EQ(crc32c(0, p, len), crc32c_reference(0, p, len)) << "start " << start << " len " << len;
      ASSERT_EQ(crc32c(0xA5A5A5A5u, p, len), crc32c_reference(0xA5A5A5A5u, p, len)) << "running, len " << len;
    }
    for (size_t len : {size_t{9014}, size_t{65536}}) {
      EXPECT_EQ(crc32c(0, p, len), crc32c_reference(0, p, len)) << "len " << len;
      EXPECT_EQ(crc32c(0x12345678u, p, len), crc32c_reference(0x12345678u, p, len)) << "len " << len;
    }
  }
}

TEST(Crc32c, MatchesReferenceAtEveryUnalignedStart) {
  // Do: checksum 0..64 bytes starting at each offset 0..15 of a buffer.
  auto buf = random_bytes(96, 11);
  for (size_t off = 0; off < 16; ++off) {
    for (size_t len = 0; len <= 64; ++len) {
      // Expect: the result does not depend on the alignment of the start.
      ASSERT_EQ(crc32c(0, buf.data() + off, len), crc32c_reference(0, buf.data() + off, len))
          << "offset " << off << " len " << len;
    }
  }
}

TEST(Crc32c, IncrementalEqualsOneShotAtEverySplit) {
  // Do: checksum a 200-byte buffer in two pieces, split at every position.
  auto buf = random_bytes(200, 13);
  uint32_t whole = crc32c(0, buf.data(), buf.size());
  ASSERT_EQ(whole, crc32c_reference(0, buf.data(), buf.size()));
  for (size_t cut = 0; cut <= buf.size(); ++cut) {
    uint32_t part = crc32c(0, buf.data(), cut);
    // Expect: continuing from the first piece's CRC gives the one-shot CRC.
    ASSERT_EQ(crc32c(part, buf.data() + cut, buf.size() - cut), whole) << "cut " << cut;
  }
}

TEST(Crc32c, IncrementalInOddSizedChunksEqualsOneShot) {
  // Do: feed 1000 bytes in chunks of 1, 3, 7, 13 ... bytes.
  auto buf = random_bytes(1000, 17);
  uint32_t crc = 0;
  size_t pos = 0;
  for (size_t step = 1; pos < buf.size(); step = (step * 2 + 1) % 29) {
    size_t n = std::min(step, buf.size() - pos);
    crc = crc32c(crc, buf.data() + pos, n);
    pos += n;
  }
  // Expect: the same as one call over the whole buffer.
  EXPECT_EQ(crc, crc32c(0, buf.data(), buf.size()));
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  // Do: flip each bit of a 64-byte buffer in turn.
  auto buf = random_bytes(64, 19);
  uint32_t good = crc32c(0, buf.data(), buf.size());
  for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    // Expect: the CRC changes every time.
    ASSERT_NE(crc32c(0, buf.data(), buf.size()), good) << "bit " << bit;
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace imago
