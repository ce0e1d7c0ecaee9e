/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The forwarding look-up's table: 64-bit keys (never 0) to 32-bit values, open addressing
 * with linear probing in one array sized at construction (at least twice the most entries,
 * so a probe is short), deletion by shifting the run back (no tombstones, so a table that
 * churns for ever stays as fast as a fresh one). A look-up is a multiply, a shift and a few
 * adjacent loads, where std::unordered_map chases a node per bucket; no allocation after
 * construction. Pure (the simulator and the fuzzers use it as the dataplane does).
 */
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace imago::rel::circ {

class FlatMap {
 public:
  /** Room for @p max_entries (a table of the next power of two at or above twice that). */
  explicit FlatMap(size_t max_entries)
      : slots_(std::bit_ceil(2 * max_entries + 2)), mask_(slots_.size() - 1),
        shift_(64 - std::countr_zero(slots_.size())), max_(max_entries) {}

  /** @return the value of @p key, or nullptr. */
  const uint32_t* find(uint64_t key) const {
    if (key == 0) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }
  bool contains(uint64_t key) const { return find(key) != nullptr; }
  /** Set @p key to @p value. @return false when it is new and the table is full, or 0. */
  bool put(uint64_t key, uint32_t value) {
    if (key == 0) return false;
    size_t i = home(key);
    for (; slots_[i].key != 0; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value = value, true;
    }
    if (size_ == max_) return false;
    slots_[i] = {key, value};
    ++size_;
    return true;
  }
  /** Remove @p key. @return whether it was there. */
  bool erase(uint64_t key) {
    if (key == 0) return false;
    size_t i = home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return false;
      i = (i + 1) & mask_;
    }
    // Shift the rest of the run back over the hole: an entry moves when the hole lies between
    // its home and where it sits now (cyclically), so every entry stays reachable from home.
    for (size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const size_t h = home(slots_[j].key);
      if (((j - h) & mask_) >= ((j - i) & mask_)) slots_[i] = slots_[j], i = j;
    }
    slots_[i] = {};
    --size_;
    return true;
  }
  size_t size() const { return size_; }
  /** @return the bytes of its table. */
  size_t memory_bytes() const { return slots_.size() * sizeof(Slot); }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
  };
  size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }

  std::vector<Slot> slots_;
  size_t mask_;
  int shift_;
  size_t max_;
  size_t size_ = 0;
};

}  // namespace imago::rel::circ
