/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Per-peer receive buffer: a fixed ring of unit slots indexed by sequence number (mod 2^32).
 *
 *   [dlv, nxt)        received in order, not yet taken by the application (refused or
 *                     waiting for the rest of a fragmented message)
 *   nxt               cumulative ACK: the first unit not received
 *   (nxt, dlv + size) may hold units received out of order (selective repeat)
 * Anything at or beyond dlv + size has no slot: it is an overflow and drives credits.
 *
 * A unit is copied into its slot, or held in place: the slot then points into the received
 * frame, which the frame sink keeps alive until pop() or drain_held() hands the hold back.
 */
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "reliability/seq.h"
#include "reliability/seq_bitmap.h"

namespace imago::rel {

struct RxSlot {
  const uint8_t* at;  ///< the payload: in the slot's own bytes, or in a held frame
  void* held;         ///< the hold (FrameSink::hold_frame()); nullptr: copied into the slot
  uint32_t len;
  uint8_t rec_flags;
};

class RecvWindow {
 public:
  /** Allocate @p slots slots of @p unit_cap payload bytes each (control path). */
  void init(uint32_t slots, uint32_t unit_cap) {
    slots_ = slots;
    assert(slots != 0 && (slots & (slots - 1)) == 0);  // Engine::create checks it
    mask_ = slots - 1;  // a mask, not a division, on every access
    cap_ = unit_cap;
    meta_ = std::make_unique<RxSlot[]>(slots);
    present_.init(slots);
    data_ = std::make_unique_for_overwrite<uint8_t[]>(uint64_t{slots} * unit_cap);
  }
  /** Empty the window (drain_held() first); the peer's first unit will be @p isn. */
  void reset(Seq isn) {
    assert(held_n_ == 0);
    present_.clear_all();
    dlv_ = nxt_ = high_ = isn;
  }

  Seq dlv() const { return dlv_; }
  Seq nxt() const { return nxt_; }
  Seq high() const { return high_; }  ///< one past the highest unit held
  uint32_t slots() const { return slots_; }
  /** @return units the peer may still send beyond the cumulative ACK. */
  uint32_t free_from_ack() const { return dlv_ + slots_ - nxt_; }
  bool has_gap() const { return nxt_ != high_; }
  /** @return true when @p s has a slot (it is in [nxt, dlv + size)). */
  bool fits(Seq s) const { return seq_le(nxt_, s) && seq_lt(s, dlv_ + slots_); }

  const RxSlot& slot(Seq s) const { return meta_[s & mask_]; }
  /** @return true when unit @p s is held (received, not yet taken by the application). */
  bool present(Seq s) const { return present_.test(s); }
  /** @return which of the 64 units from @p s are held (bit j: unit s + j). */
  uint64_t held_bits(Seq s) const { return present_.bits64(s); }
  /**
   * The first run of held units at or after @p from, below high().
   * @return false when none is held there, else [*start, *end).
   */
  bool next_run(Seq from, Seq* start, Seq* end) const {
    if (!seq_lt(from, high_)) return false;  // nothing held from there (and no 2^32-bit scan)
    const Seq a = from + present_.find(from, high_ - from, true);
    if (a == high_) return false;
    *start = a;
    *end = a + present_.find(a, high_ - a, false);
    return true;
  }
  std::span<const uint8_t> payload(Seq s) const {
    const RxSlot& m = meta_[s & mask_];
    return {m.at, m.len};
  }
  /** @return units held in place now. */
  uint32_t held() const { return held_n_; }

  /**
   * Store unit @p s (caller checked fits() and that it is not present): copied into its slot,
   * or, with @p held (a hold on the frame @p p lies in), left where it is.
   * Advances the cumulative ACK over every unit now contiguous.
   */
  void store(Seq s, uint8_t rec_flags, std::span<const uint8_t> p, void* held = nullptr) {
    RxSlot& m = meta_[s & mask_];
    uint8_t* own = data_.get() + uint64_t{s & mask_} * cap_;
    m = RxSlot{held != nullptr ? p.data() : own, held, static_cast<uint32_t>(p.size()), rec_flags};
    present_.set(s);
    if (held != nullptr)
      ++held_n_;
    else if (!p.empty())
      std::memcpy(own, p.data(), p.size());
    if (seq_ge(s, high_)) high_ = s + 1;
    advance();
  }
  /**
   * Unit @p s == dlv == nxt went straight to the application without a copy into its slot:
   * move past it as if stored and popped.
   */
  void skip(Seq s) {
    if (seq_ge(s, high_)) high_ = s + 1;
    dlv_ = s + 1;
    nxt_ = s + 1;
    advance();
  }
  /** The application took unit dlv: free its slot. @return its hold to give back (nullptr:
   *  none). */
  void* pop() {
    void* h = meta_[dlv_ & mask_].held;
    held_n_ -= h != nullptr;
    present_.clear(dlv_);
    ++dlv_;
    return h;
  }
  /** Call @p release(hold) for every unit held in place, and forget them (before reset()). */
  template <typename F>
  void drain_held(F&& release) {
    for (Seq s = dlv_; held_n_ != 0 && s != high_; ++s) {
      RxSlot& m = meta_[s & mask_];
      if (!present_.test(s) || m.held == nullptr) continue;
      release(m.held);
      m.held = nullptr;
      --held_n_;
    }
  }
  size_t memory_bytes() const { return slots_ * (sizeof(RxSlot) + cap_) + present_.memory_bytes(); }

 private:
  /** Move the cumulative ACK over the units now contiguous. */
  void advance() { nxt_ += present_.find(nxt_, high_ - nxt_, false); }

  std::unique_ptr<RxSlot[]> meta_;
  std::unique_ptr<uint8_t[]> data_;
  SeqBitmap present_;  ///< units held in [dlv, high)
  uint32_t slots_ = 0;
  uint32_t mask_ = 0;  ///< slots_ - 1
  uint32_t cap_ = 0;
  uint32_t held_n_ = 0;  ///< units held in place
  Seq dlv_ = 0;
  Seq nxt_ = 0;
  Seq high_ = 0;
};

}  // namespace imago::rel
