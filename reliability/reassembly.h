/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Reassembly of fragmented messages. Fragments arrive here in order (the receive window
 * already ordered them), so one bounded buffer per peer suffices: it holds the message being
 * rebuilt, then the complete message until the application accepts it.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "reliability/counters.h"
#include "reliability/wire.h"

namespace imago::rel {

class Reassembly {
 public:
  /** Allocate a buffer of @p max_bytes (pages are touched only when used). */
  void init(uint64_t max_bytes) {
    cap_ = max_bytes;
    buf_ = std::make_unique_for_overwrite<uint8_t[]>(max_bytes);
  }
  void reset() { len_ = 0, active_ = complete_ = discarding_ = false; }

  bool active() const { return active_; }
  bool complete() const { return complete_; }
  std::span<const uint8_t> message() const { return {buf_.get(), len_}; }

  /**
   * Add the next in-order fragment.
   * @return Reject::kNone, kBadFragment (a continuation with nothing to continue is dropped;
   *         a first fragment that cuts a partial message short drops the partial one) or
   *         kTooLarge (message above the buffer: dropped up to its last fragment).
   */
  Reject add(uint8_t rec_flags, std::span<const uint8_t> p) {
    const bool cont = rec_flags & rec_flag::kCont, more = rec_flags & rec_flag::kMore;
    Reject status = Reject::kNone;
    if (cont && !in_message()) return Reject::kBadFragment;    // nothing to continue: drop it
    if (!cont && in_message()) status = Reject::kBadFragment;  // previous one cut short
    if (!cont) len_ = 0, active_ = true, discarding_ = false;
    if (discarding_) {
      discarding_ = more;
      return status;
    }
    if (len_ + p.size() > cap_) {
      len_ = 0, active_ = false, discarding_ = more;  // swallow the rest of this message
      return Reject::kTooLarge;
    }
    std::memcpy(buf_.get() + len_, p.data(), p.size());
    len_ += p.size();
    if (!more) active_ = false, complete_ = true;
    return status;
  }
  /** @return true between a first fragment and its last one. */
  bool in_message() const { return active_ || discarding_; }
  /** The application took the complete message. */
  void consumed() { reset(); }
  size_t memory_bytes() const { return cap_; }

 private:
  std::unique_ptr<uint8_t[]> buf_;
  uint64_t cap_ = 0;
  uint64_t len_ = 0;
  bool active_ = false;
  bool complete_ = false;
  bool discarding_ = false;  ///< dropping the fragments of an oversize message
};

}  // namespace imago::rel
