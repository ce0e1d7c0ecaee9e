/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Reassembly of fragmented messages. Fragments arrive here in order (the receive window
 * already ordered them), so one bounded buffer per peer suffices: it holds the message being
 * rebuilt, then the complete message until the application accepts it.
 *
 * The application may lend a buffer of its own to rebuild a large message in (adopt()): the
 * message is then delivered in that buffer and becomes the application's without another
 * copy. The bytes rebuilt so far move once, when the buffer is adopted.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "reliability/counters.h"
#include "reliability/wire.h"

namespace imago::rel {

/** A buffer the application lends the engine to rebuild one message in. */
struct RebuildBuffer {
  uint8_t* data = nullptr;  ///< nullptr: none lent
  uint64_t cap = 0;         ///< bytes at data
  void* cookie = nullptr;   ///< the application's name for it
};

class Reassembly {
 public:
  /** Allocate a buffer of @p max_bytes (pages are touched only when used). */
  void init(uint64_t max_bytes) {
    cap_ = max_bytes;
    own_ = std::make_unique_for_overwrite<uint8_t[]>(max_bytes);
    buf_ = own_.get();
  }
  void reset() { len_ = 0, active_ = complete_ = discarding_ = false; }

  bool active() const { return active_; }
  bool complete() const { return complete_; }
  std::span<const uint8_t> message() const { return {buf_, len_}; }
  /** @return how many bytes of the message are rebuilt so far. */
  uint64_t length() const { return len_; }
  /** @return true while the message is rebuilt in a lent buffer. */
  bool lent() const { return lent_.data != nullptr; }
  /** @return the lent buffer (data nullptr: none). */
  const RebuildBuffer& loan() const { return lent_; }
  /** Go on rebuilding in @p b (lent() false; b.cap >= the size limit): the first @p keep
   *  bytes (the message so far, 0 before a first fragment) move. */
  void adopt(RebuildBuffer b, uint64_t keep) {
    std::memcpy(b.data, buf_, keep);
    lent_ = b;
    buf_ = b.data;
  }
  /** Go back to the own buffer, the message (if any) dropped. @return the lent buffer (none:
   *  data nullptr), the caller's again: delivered to the application, or to be given back. */
  RebuildBuffer give_back() {
    const RebuildBuffer b = lent_;
    lent_ = RebuildBuffer{};
    buf_ = own_.get();
    reset();
    return b;
  }

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
    std::memcpy(buf_ + len_, p.data(), p.size());
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
  std::unique_ptr<uint8_t[]> own_;
  uint8_t* buf_ = nullptr;  ///< own_, or the lent buffer
  RebuildBuffer lent_;
  uint64_t cap_ = 0;
  uint64_t len_ = 0;
  bool active_ = false;
  bool complete_ = false;
  bool discarding_ = false;  ///< dropping the fragments of an oversize message
};

}  // namespace imago::rel
