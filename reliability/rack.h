/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * RACK (RFC 8985) over paths: when a frame counts as lost.
 *
 * A frame is lost once a frame transmitted after it got through, and a reordering window has
 * passed since it went out. The engine numbers transmissions (TxFrame::number) and keeps the
 * newest number known delivered, overall and per path (Peer::rack_frame, Peer::rack_path).
 * Frames on one path arrive in the order sent, so a later frame on the same path is proof
 * within the reordering window. Frames on two paths (ping-pong over two networks) overtake
 * each other by as much as the paths' queues differ, milliseconds under load: a later frame
 * on the other path proves the loss only after an RTO, which still finds the frames of a
 * path that died before the retransmission timer would (it repairs one frame per expiry).
 */
#pragma once

#include <algorithm>
#include <cstdint>

#include "reliability/peer.h"

namespace imago::rel {

/** A frame may be called lost once it went out at `same` or before, when a later frame got
 *  through on its own path; at `cross` or before, on any path. */
struct RackTimes {
  uint64_t same, cross;
};

/** @return RackTimes at @p now: @p reorder_ns back on one path (0: no window), an RTO (at
 *  least the window) across paths. */
inline RackTimes rack_times(const Peer& p, uint64_t reorder_ns, uint64_t now) {
  const uint64_t x = std::max(reorder_ns, p.rto.rto());
  return {reorder_ns == 0 ? kNever : now > reorder_ns ? now - reorder_ns : 0, now > x ? now - x : 0};
}

/** @return true when RACK calls in-flight frame @p f lost. */
inline bool rack_lost(const Peer& p, const TxFrame& f, RackTimes t) {
  return (f.number < p.rack_path[f.path] && f.last_tx_ns <= t.same) ||
         (f.number < p.rack_frame && f.last_tx_ns <= t.cross);
}

/** RACK evidence: a transmission of @p f got through; the last one, or, after a repair that
 *  was not a probe, perhaps only the one before it (TxFrame::proof_back): that one is credited,
 *  and no path (it may have taken another). */
inline void rack_delivered(Peer& p, const TxFrame& f) {
  p.rack_frame = std::max(p.rack_frame, f.number - f.proof_back);
  if (f.proof_back == 0) p.rack_path[f.path] = std::max(p.rack_path[f.path], f.number);
}

}  // namespace imago::rel
