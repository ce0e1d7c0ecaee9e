/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * One bit per slot of a power-of-two ring indexed by sequence number (mod 2^32): which units
 * a receiver holds, which units a sender knows the peer holds (SACK). find() skips 64 slots
 * a step, so building or applying a SACK block costs a word per 64 units instead of a test
 * per unit: a window of 16k units held beyond a gap is walked in 256 steps.
 */
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <memory>

#include "reliability/seq.h"

namespace imago::rel {

class SeqBitmap {
 public:
  /** Allocate @p slots bits, all clear (control path; @p slots is a power of two). */
  void init(uint32_t slots) {
    assert(slots != 0 && (slots & (slots - 1)) == 0);
    slots_ = slots;
    mask_ = slots - 1;
    words_ = std::max(1u, slots / 64);
    bits_ = std::make_unique<uint64_t[]>(words_);
  }
  void clear_all() { std::fill_n(bits_.get(), words_, uint64_t{0}); }

  bool test(Seq s) const { return (bits_[word(s)] >> bit(s)) & 1; }
  void set(Seq s) { bits_[word(s)] |= uint64_t{1} << bit(s); }
  void clear(Seq s) { bits_[word(s)] &= ~(uint64_t{1} << bit(s)); }

  /** @return the bits of the 64 units from @p s (bit j: unit s + j); one load when @p s is a
   *  multiple of 64 in a ring of at least 64 slots. */
  uint64_t bits64(Seq s) const {
    if (slots_ >= 64 && (s & 63) == 0) return bits_[word(s)];
    uint64_t w = 0;
    for (uint32_t j = 0; j < 64; ++j) w |= uint64_t{test(s + j)} << j;
    return w;
  }

  /** @return the distance from @p s to the first unit of [s, s + n) whose bit is @p want,
   *  or @p n when there is none (n <= slots). */
  uint32_t find(Seq s, uint32_t n, bool want) const {
    uint32_t done = 0;
    while (done < n) {
      const uint32_t i = (s + done) & mask_;
      const uint32_t bit = i & 63;
      // The bits from slot i up to the end of its word (or of a ring shorter than a word).
      const uint32_t avail = std::min(64 - bit, slots_ - i);
      uint64_t w = bits_[i >> 6];
      if (!want) w = ~w;
      w >>= bit;
      if (w != 0) {
        const auto z = static_cast<uint32_t>(__builtin_ctzll(w));
        if (z < avail) return std::min(n, done + z);
      }
      done += avail;
    }
    return n;
  }
  size_t memory_bytes() const { return words_ * sizeof(uint64_t); }

 private:
  uint32_t word(Seq s) const { return (s & mask_) >> 6; }
  uint32_t bit(Seq s) const { return s & mask_ & 63; }

  std::unique_ptr<uint64_t[]> bits_;
  uint32_t slots_ = 0;
  uint32_t mask_ = 0;
  uint32_t words_ = 0;
};

}  // namespace imago::rel
