/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Rate limits for the dataplane's rare log lines (links going up and down, miswiring, the
 * routing table): a line per change, but at most one per kGapNs, so that a flapping link
 * (forged HELLOs, a loaded machine) cannot flood the log.
 */
#pragma once

#include <cstdint>

namespace imago::dp {

/** A line per change, at most one per kGapNs. The changes not logged are counted, and the
 *  next line that is logged is preceded by how many. */
struct LogGate {
  static constexpr uint64_t kGapNs = 10'000'000'000;
  uint64_t at = 0;     ///< its last line (0: none yet)
  uint64_t quiet = 0;  ///< changes since, not logged
  /** @return whether a line may go out at @p now; else counts it quiet (and in @p total). */
  bool open(uint64_t now, uint64_t& total) {
    if (at != 0 && now - at < kGapNs) return ++quiet, ++total, false;
    at = now;
    return true;
  }
};

/** A state shown whole when it changes (the routing table), at most once per kGapNs: a
 *  change held back is shown once the gap has passed, so the last one shown is the one in
 *  force, not one a flap left behind. */
struct HeldLine {
  LogGate gate;
  bool held = false;  ///< a change not shown yet
  /** A change at @p now: @return whether to show it now (else it is held, and counted). */
  bool changed(uint64_t now, uint64_t& total) {
    held = !gate.open(now, total);
    return !held;
  }
  /** @return whether a held change is to be shown now (it then counts as shown; @p quiet,
   *  if given: how many changes were not shown). */
  bool due(uint64_t now, uint64_t* quiet = nullptr) {
    if (!held || now - gate.at < LogGate::kGapNs) return false;
    if (quiet != nullptr) *quiet = gate.quiet;
    held = false, gate.at = now, gate.quiet = 0;
    return true;
  }
};

}  // namespace imago::dp
