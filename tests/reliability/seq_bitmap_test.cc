// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/seq_bitmap.h: bits by sequence number across the 2^32 wrap, and
// find() / bits64() agreeing with a bit-by-bit model in rings of every size.
#include "reliability/seq_bitmap.h"

#include <gtest/gtest.h>

#include <vector>

#include "reliability/rng.h"

namespace imago::rel {
namespace {

TEST(SeqBitmap, SetTestClearAcrossTheWrap) {
  SeqBitmap b;
  b.init(128);
  const Seq s = 0xFFFFFFF0u;
  for (Seq i = 0; i < 32; i += 3) b.set(s + i);
  for (Seq i = 0; i < 32; ++i) EXPECT_EQ(b.test(s + i), i % 3 == 0) << i;
  b.clear(s + 3);
  EXPECT_FALSE(b.test(s + 3));
  b.clear_all();
  for (Seq i = 0; i < 128; ++i) EXPECT_FALSE(b.test(s + i));
}

// find() and bits64() against a model, for rings smaller than a word, one word, and many.
TEST(SeqBitmap, FindAndBits64MatchABitByBitModel) {
  Rng rng(7);
  for (uint32_t slots : {1u, 8u, 32u, 64u, 128u, 1024u}) {
    SeqBitmap b;
    b.init(slots);
    std::vector<bool> model(slots);
    const Seq base = 0xFFFFFF00u + static_cast<Seq>(rng.next() % 512);  // crosses 2^32
    for (uint32_t i = 0; i < slots; ++i) {
      model[i] = rng.next() % 3 == 0;
      if (model[i]) b.set(base + i);
    }
    for (int t = 0; t < 200; ++t) {
      const uint32_t from = static_cast<uint32_t>(rng.next() % slots);
      const uint32_t n = static_cast<uint32_t>(rng.next() % (slots - from + 1));
      for (bool want : {true, false}) {
        uint32_t expect = n;
        for (uint32_t j = 0; j < n; ++j)
          if (model[from + j] == want) {
            expect = j;
            break;
          }
        EXPECT_EQ(b.find(base + from, n, want), expect) << slots << " " << from << " " << n;
      }
    }
    if (slots < 64) continue;
    for (uint32_t w = 0; w < slots; w += 64) {
      const Seq lo = (base + w) & ~Seq{63};
      uint64_t expect = 0;
      for (uint32_t j = 0; j < 64; ++j)
        if (b.test(lo + j)) expect |= uint64_t{1} << j;
      EXPECT_EQ(b.bits64(lo), expect);
      EXPECT_EQ(b.bits64(lo + 1), expect >> 1 | uint64_t{b.test(lo + 64)} << 63);
    }
  }
}

}  // namespace
}  // namespace imago::rel
