/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Per-peer send buffer (Pupa's primary send buffer): a fixed ring of unit descriptors and a
 * fixed byte ring for their payloads, both allocated once.
 *
 * Sequence numbers (mod 2^32) split the ring like Pupa's low/sent/high pointers:
 *   [una, nxt)  transmitted at least once, waiting for an ACK
 *   [nxt, end)  queued by the application, not yet transmitted
 * Units are released only from the front (cumulative ACK), so the byte ring is a FIFO too.
 * Units in flight (sent, not acknowledged, not SACKed, not queued for a repair) are also
 * linked in the order they were last transmitted, for loss detection by time (RACK).
 */
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "reliability/seq.h"

namespace imago::rel {

/** One unit (a message or a fragment) held until the peer acknowledges it. */
struct TxUnit {
  uint64_t off;          ///< byte-ring offset (monotonic; mod capacity to index)
  uint64_t first_tx_ns;  ///< first transmission (RTT sample when tx_count == 1)
  uint64_t last_tx_ns;   ///< last transmission (retransmission guard)
  uint64_t enq_ns;       ///< when the application queued it (coalescing age)
  uint64_t frame;        ///< number of the frame that last carried it (per peer, increasing)
  uint32_t len;
  Seq older;  ///< in-flight list: the unit transmitted just before this one
  Seq newer;  ///< in-flight list: the unit transmitted just after this one
  uint16_t tx_count;
  uint8_t rec_flags;  ///< rec_flag::kMore/kCont/kFast
  bool sacked;        ///< peer holds it out of order (selective repeat)
  bool retx;          ///< queued for retransmission
  bool in_flight;     ///< on the in-flight list
};

class SendWindow {
 public:
  /** Allocate @p slots descriptors and @p bytes payload bytes (control path). */
  void init(uint32_t slots, uint64_t bytes) {
    slots_ = slots;
    assert(slots != 0 && (slots & (slots - 1)) == 0);  // Engine::create checks it
    mask_ = slots - 1;  // a mask, not a division, on every access
    bytes_ = bytes;
    units_ = std::make_unique<TxUnit[]>(slots);
    data_ = std::make_unique_for_overwrite<uint8_t[]>(bytes);
  }
  /** Empty the window and restart sequence numbers at @p isn. */
  void reset(Seq isn) {
    una_ = nxt_ = end_ = isn;
    head_ = tail_ = 0;
    flight_n_ = 0;
  }

  Seq una() const { return una_; }
  Seq nxt() const { return nxt_; }
  Seq end() const { return end_; }
  uint32_t used() const { return end_ - una_; }
  uint32_t free_slots() const { return slots_ - used(); }
  uint64_t free_bytes() const { return bytes_ - (head_ - tail_); }
  uint32_t slots() const { return slots_; }
  uint64_t capacity_bytes() const { return bytes_; }
  bool has_unsent() const { return nxt_ != end_; }
  bool has_outstanding() const { return una_ != nxt_; }
  /** @return true when @p s was transmitted and is not yet acknowledged. */
  bool outstanding(Seq s) const { return seq_le(una_, s) && seq_lt(s, nxt_); }

  /** @return true when @p units units of @p bytes payload in total fit now. */
  bool fits(uint32_t units, uint64_t bytes, uint32_t unit_cap) const {
    return units <= free_slots() && bytes + unit_cap <= free_bytes();
  }

  TxUnit& at(Seq s) { return units_[s & mask_]; }
  const TxUnit& at(Seq s) const { return units_[s & mask_]; }
  std::span<const uint8_t> payload(const TxUnit& u) const {
    return {data_.get() + u.off % bytes_, u.len};
  }

  /** Queue one unit (caller checked fits()). @return its sequence number. */
  Seq push(std::span<const uint8_t> p, uint8_t rec_flags, uint64_t now) {
    uint64_t at_off = head_ % bytes_;
    if (at_off + p.size() > bytes_) head_ += bytes_ - at_off;  // keep payloads contiguous
    TxUnit& u = units_[end_ & mask_];
    u = TxUnit{head_, 0, 0, now, 0, static_cast<uint32_t>(p.size()), 0, 0, 0, rec_flags,
               false, false, false};
    if (!p.empty()) std::memcpy(data_.get() + head_ % bytes_, p.data(), p.size());
    head_ += p.size();
    return end_++;
  }
  /** Mark the next unsent unit as transmitted. */
  void advance_nxt() { ++nxt_; }

  /** Release every unit before @p ack (cumulative ACK; caller checked the range). */
  void release_to(Seq ack) {
    if (ack == una_) return;
    for (Seq s = una_; s != ack; ++s) flight_remove(s);
    const TxUnit& last = at(ack - 1);
    tail_ = last.off + last.len;
    una_ = ack;
    if (una_ == end_) head_ = tail_;  // nothing queued: no wrap gap left behind
  }

  /** @p s was just (re)transmitted: it becomes the newest unit in flight. */
  void flight_push(Seq s) {
    flight_remove(s);
    TxUnit& u = at(s);
    u.in_flight = true;
    u.older = newest_;
    if (flight_n_++ == 0)
      oldest_ = s;
    else
      at(newest_).newer = s;
    newest_ = s;
  }
  /** @p s left flight: acknowledged, SACKed or queued for a repair. */
  void flight_remove(Seq s) {
    TxUnit& u = at(s);
    if (!u.in_flight) return;
    u.in_flight = false;
    if (--flight_n_ == 0) return;
    if (s == oldest_)
      oldest_ = u.newer;
    else
      at(u.older).newer = u.newer;
    if (s == newest_)
      newest_ = u.older;
    else
      at(u.newer).older = u.older;
  }
  /** @return false when nothing is in flight, else the unit transmitted longest ago. */
  bool flight_oldest(Seq* s) const {
    *s = oldest_;
    return flight_n_ != 0;
  }

  /** @return how many whole messages end in [una, end) (each counts once, by its last unit). */
  uint64_t messages_held() const {
    uint64_t n = 0;
    for (Seq s = una_; s != end_; ++s)
      if (!(at(s).rec_flags & 0x01)) ++n;  // rec_flag::kMore clear: a message's last unit
    return n;
  }
  size_t memory_bytes() const { return slots_ * sizeof(TxUnit) + bytes_; }

 private:
  std::unique_ptr<TxUnit[]> units_;
  std::unique_ptr<uint8_t[]> data_;
  uint32_t slots_ = 0;
  uint32_t mask_ = 0;  ///< slots_ - 1
  uint64_t bytes_ = 0;
  uint64_t head_ = 0;  ///< next free byte (monotonic)
  uint64_t tail_ = 0;  ///< first byte still in use (monotonic)
  Seq una_ = 0;
  Seq nxt_ = 0;
  Seq end_ = 0;
  Seq oldest_ = 0;  ///< in-flight list ends (valid while flight_n_ > 0)
  Seq newest_ = 0;
  uint32_t flight_n_ = 0;
};

}  // namespace imago::rel
