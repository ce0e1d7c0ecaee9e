/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The frames a unicast sender keeps in flight while it repairs losses, from the queueing
 * delay it measures (docs/PROTOCOL.md 3.4.9).
 *
 * A sender keeps its whole window in flight and fills whatever queue lies before the slower
 * end (a port's TX ring, the peer's RX ring). Without losses that costs nothing. With them,
 * a repair waits behind the whole queue: every frame sent meanwhile arrives behind a hole,
 * waits in the receive window and is read a second time long after it left the caches, and
 * a receiver slowed so falls further behind (on `--pair`, a run at 1 % loss moved either
 * 0.75x or 0.45x of the loss-free rate, by chance). So for kLossMemory after a loss:
 * - once a round trip a new frame asks for an ACK at once (kAckReq, answered at once); the
 *   time to the first ACK showing it or a later frame delivered is a sample with no ACK
 *   delay in it;
 * - against the least sample (the path without a queue: `base`), a sample more than
 *   `target` (the larger of `base` and kTargetFloor) above it says the queue grew: the frames
 *   in flight are cut to flight x (base + target) / sample, at least kLeast, once a round
 *   (the frames sent before a cut still wait in the queue it measured);
 * - a sample within it grows the cap by an eighth; at the window it is gone;
 * - while the cap holds frames back, a frame in four of a cap asks for an ACK, so that the
 *   ACKs that free the cap come without waiting for the peer's ACK timer.
 * Repairs are never held back by it. `base` starts from the handshake's round trip (a first
 * loss may find the queue full already) and is the least sample of the last kBaseWindow after,
 * so a path that got longer is learnt again.
 */
#pragma once

#include <algorithm>
#include <cstdint>

namespace imago::rel {

class DelayCap {
 public:
  static constexpr uint32_t kLeast = 32;                ///< frames: a receive burst
  static constexpr uint64_t kTargetFloor = 50'000;      ///< ns of queue always allowed
  static constexpr uint64_t kBaseWindow = 1'000'000'000;  ///< ns a least sample is trusted
  static constexpr uint64_t kLossMemory = 20'000'000;   ///< ns after a loss the cap works

  /** A loss was found at @p now: a repair is on its way, behind whatever queue there is. */
  void lost(uint64_t now) {
    if (!active(now)) cap_ = 0, probe_ = 0;  // what was measured before the quiet spell is stale
    loss_ns_ = now, any_loss_ = true;
  }
  /** @return whether a loss was found lately: without one, nothing waits behind the queue. */
  bool active(uint64_t now) const { return any_loss_ && now - loss_ns_ < kLossMemory; }
  /** @return whether a new frame may go at @p now with @p flight frames in flight. */
  bool allows(uint32_t flight, uint64_t now) const { return cap_ == 0 || flight < cap_ || !active(now); }
  /** @return the cap (0: none), for counters and tests. */
  uint32_t cap() const { return cap_; }
  uint64_t base() const { return base_; }
  void reset() { *this = DelayCap{}; }

  /** @return whether a measurement may start at @p now (none is pending). */
  bool want_probe(uint64_t now) const { return probe_ == 0 && active(now); }
  /** @return whether transmission @p number should ask for an ACK to keep the ACKs coming
   *  while the cap holds frames back: four a cap's worth of frames, else the sender waits
   *  for the peer's ACK timer with nothing in flight. */
  bool want_clock(uint64_t number, uint64_t now) const {
    return cap_ != 0 && number - asked_ >= std::max(1u, cap_ / 4) && active(now);
  }
  /** Transmission @p number was found lost: its repair's answer would time the repair too. */
  void forget(uint64_t number) {
    if (number == probe_) probe_ = 0;
  }
  /** Transmission @p number asked for an ACK at @p now; @p probe: it times the delay. */
  void asked(uint64_t number, uint64_t now, bool probe) {
    asked_ = number;
    if (probe) probe_ = number, probe_ns_ = now;
  }

  /**
   * Transmissions up to @p delivered of the @p sent so far are known delivered at @p now, @p flight
   * frames are in flight and the window holds @p window frames; @p path_rtt is the least round
   * trip seen (the handshake's: the queue a first loss finds may have grown since). @return
   * whether the cap was cut.
   */
  bool delivered(uint64_t delivered, uint64_t sent, uint64_t now, uint32_t flight, uint32_t window,
                 uint64_t path_rtt) {
    if (probe_ == 0 || delivered < probe_) return false;
    if (!active(now)) {
      cap_ = 0, probe_ = 0;
      return false;
    }
    const uint64_t sample = now - probe_ns_, probe = probe_;
    probe_ = 0;
    if (base_ns_ == 0) base_ = path_rtt, base_ns_ = now;
    if (now - base_ns_ >= kBaseWindow) base_ = next_base_, next_base_ = ~uint64_t{0}, base_ns_ = now;
    base_ = std::min(base_, sample);
    next_base_ = std::min(next_base_, sample);
    const uint64_t allowed = base_ + std::max(base_, kTargetFloor);
    if (sample > allowed) {
      // Once a round: the frames sent before a cut still wait in the queue it measured.
      if (probe <= cut_at_) return false;
      cut_at_ = sent;
      const uint64_t fit = uint64_t{std::max(flight, kLeast)} * allowed / sample;
      cap_ = static_cast<uint32_t>(std::max<uint64_t>(kLeast, std::min<uint64_t>(fit, cap_ ? cap_ : fit)));
      return true;
    }
    if (cap_ != 0) {
      cap_ += std::max<uint32_t>(1, cap_ / 8);
      if (cap_ >= window) cap_ = 0;
    }
    return false;
  }

 private:
  uint32_t cap_ = 0;                   ///< 0: no cap but the window
  uint64_t probe_ = 0;                 ///< transmission number timed (0: none)
  uint64_t probe_ns_ = 0;
  uint64_t cut_at_ = 0;                ///< the last transmission before the last cut
  uint64_t asked_ = 0;                 ///< the last transmission that asked for an ACK
  uint64_t base_ = ~uint64_t{0};       ///< least sample this window
  uint64_t next_base_ = ~uint64_t{0};  ///< least sample since the window began
  uint64_t base_ns_ = 0;
  uint64_t loss_ns_ = 0;               ///< the last loss found
  bool any_loss_ = false;
};

}  // namespace imago::rel
