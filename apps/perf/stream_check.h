/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What a receiving application checks in a reliable stream, whichever path delivered it (the
 * engine's callback, or an imago.h endpoint): each message is a raw payload (raw_traffic.h)
 * with the stream's sequence number and a CRC32C, so loss, duplication, reordering and
 * corruption are counted above the transport, not by it.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "apps/common/histogram.h"

#include "apps/common/json.h"
#include "apps/perf/raw_traffic.h"

namespace imago::perf {

/** @return the message's sequence number when it is intact, or UINT64_MAX. */
inline uint64_t checked_seq(std::span<const uint8_t> msg) {
  if (msg.size() > UINT16_MAX || !raw_verify(msg.data(), static_cast<uint16_t>(msg.size()))) return UINT64_MAX;
  RawHdr h;
  std::memcpy(&h, msg.data(), sizeof h);
  return h.seq.get();
}

/** A stream's receiving end: counts what arrived and how. */
struct StreamCheck {
  uint64_t expected = 0, delivered = 0, bytes = 0;
  uint64_t duplicated = 0, reordered = 0, corrupted = 0, gaps = 0;
  uint64_t first_tsc = 0, last_tsc = 0;
  uint64_t max_gap_tsc = 0;  ///< the longest wait between two deliveries (a fail-over's cost)

  /** Check @p msg, received at @p now. @return true when it is intact and new (the stream
   *  moved on: delivered counts it), false when corrupted or a duplicate. */
  bool accept(std::span<const uint8_t> msg, uint64_t now) {
    uint64_t seq = checked_seq(msg);
    if (seq == UINT64_MAX) {
      ++corrupted;
      return false;
    }
    if (seq < expected) {
      ++duplicated;
      return false;
    }
    if (seq > expected) {
      ++reordered;  // arrived ahead of messages not yet delivered: the transport broke order
      gaps += seq - expected;
    }
    expected = seq + 1;
    ++delivered;
    bytes += msg.size();
    if (last_tsc != 0 && now - last_tsc > max_gap_tsc) max_gap_tsc = now - last_tsc;
    last_tsc = now;
    if (!first_tsc) first_tsc = now;
    return true;
  }
};

/** The sender's end of an echo: times the messages that come back. */
struct EchoTimer {
  uint64_t echoes = 0, bad = 0, tsc_hz = 1;
  app::Histogram rtt_ns;

  /** Time @p msg, back at @p now. It carries its send time, or was sent at @p sent_tsc (0:
   *  it must carry one). @return true when intact and timed, false when counted bad. */
  bool on_echo(std::span<const uint8_t> msg, uint64_t now, uint64_t sent_tsc = 0) {
    uint64_t stamp = msg.size() <= UINT16_MAX ? raw_stamp(msg.data(), static_cast<uint16_t>(msg.size())) : 0;
    if (!stamp) stamp = sent_tsc;
    if (checked_seq(msg) == UINT64_MAX || !stamp || stamp > now) {
      ++bad;  // a reliable stream never answers with a broken or untimed message
      return false;
    }
    rtt_ns.record((now - stamp) * 1'000'000'000 / tsc_hz);
    ++echoes;
    return true;
  }
};

/** Messages waiting to go back to their sender (echo): a fixed ring allocated at set-up. */
class EchoQueue {
 public:
  void init(unsigned slots, uint16_t size) {
    buf_.assign(size_t{slots} * size, 0);
    slots_ = slots;
    size_ = size;
  }
  unsigned room() const { return slots_ - static_cast<unsigned>(tail_ - head_); }
  bool full() const { return room() == 0; }
  bool empty() const { return tail_ == head_; }
  void push(std::span<const uint8_t> m) {
    std::memcpy(&buf_[(tail_++ % slots_) * size_], m.data(), std::min<size_t>(m.size(), size_));
  }
  std::span<const uint8_t> front() const { return {&buf_[(head_ % slots_) * size_], size_}; }
  void pop() { ++head_; }

 private:
  std::vector<uint8_t> buf_;
  uint64_t head_ = 0, tail_ = 0;
  unsigned slots_ = 0;
  uint16_t size_ = 0;
};

/** Print how the receiving application found the stream of @p sent messages, and its rate
 *  over @p secs. */
void print_delivery(const StreamCheck& c, uint64_t sent, double secs);

/** Add the stream's RESULT fields to @p r: msgs_sent, msgs_delivered, bytes_delivered,
 *  duration_s, msgs_per_s, gbps, lost (only when @p receiver_here: a sender alone cannot know),
 *  duplicated, reordered, corrupted, and with the receiver here max_gap_us (the longest wait
 *  between two deliveries; TSC at @p tsc_hz). */
void stream_json(const StreamCheck& c, uint64_t sent, double secs, bool receiver_here, app::Json& r,
                 uint64_t tsc_hz = 0);

}  // namespace imago::perf
