/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The frames a group source keeps in flight after a member's queue overflowed
 * (docs/PROTOCOL.md 3.7.8).
 *
 * A sender keeps its whole window in flight and sends it as fast as its link takes. A receiver
 * off its core for a few milliseconds (a loaded machine) finds its port's queue overflowed (a
 * net_af_packet ring holds 512 frames unless told otherwise), and the repair of the hundreds of
 * frames it lost, sent at once, overflows it again. A hole of burst_frames frames or more in a
 * row says so: independent losses almost never come in such a run. The sender then caps the
 * frames in flight at half of those in flight, or at those in flight but the hole if fewer
 * (what the receiver's queue took), once a round (not again before what was sent
 * before the cut is acknowledged); the cap grows by a frame for every cap's worth of frames
 * released (a frame a round), doubles after kQuiet without a cut, and is gone once it reaches
 * the window. Repairs are never held back by it.
 */
#pragma once

#include <algorithm>
#include <cstdint>

#include "reliability/send_window.h"
#include "reliability/seq.h"

namespace imago::rel {

class FlightCap {
 public:
  static constexpr uint32_t kLeast = 16;           ///< frames: a round trip always moves some
  static constexpr uint64_t kQuiet = 50'000'000;  ///< ns without a cut after which the cap doubles

  /** @return whether a new frame may go with @p tx as it is. */
  bool allows(const SendWindow& tx) const { return cap_ == 0 || tx.sent_frames() < cap_; }
  void reset() { cap_ = grow_ = 0; }

  /** A hole of @p frames frames in a row was found at @p now. @return whether the cap was cut. */
  bool hole(uint32_t frames, uint32_t burst_frames, const SendWindow& tx, uint64_t now) {
    if (burst_frames == 0 || frames < burst_frames) return false;
    if (cap_ != 0 && seq_lt(tx.una(), cut_at_)) return false;  // the last cut's round is not over
    // Half of what is in flight, or what got through around the hole if that is less.
    const uint32_t sent = tx.sent_frames();
    cap_ = std::max(kLeast, std::min(sent / 2, sent > frames ? sent - frames : 0));
    grow_ = 0;
    cut_at_ = tx.nxt();
    cut_ns_ = now;
    return true;
  }

  /** @p released frames were released at @p now. @return whether the cap grew. */
  bool released(uint32_t released, const SendWindow& tx, uint64_t now) {
    if (cap_ == 0 || released == 0) return false;
    for (grow_ += released; grow_ >= cap_; ++cap_) grow_ -= cap_;
    if (now - cut_ns_ >= kQuiet) cap_ *= 2, cut_ns_ = now;
    if (cap_ >= tx.frames()) cap_ = 0;
    return true;
  }

 private:
  uint32_t cap_ = 0;   ///< 0: no cap but the window
  uint32_t grow_ = 0;  ///< frames released since the cap last grew
  Seq cut_at_ = 0;     ///< no second cut before the receiver acknowledged this
  uint64_t cut_ns_ = 0;
};

}  // namespace imago::rel
