/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The fault model: for each frame, a seeded decision to drop, burst-drop (Gilbert-Elliott),
 * duplicate, corrupt, delay or reorder it. The kernel here has no tc netem, so every loss
 * test goes through this (wrapped around a port by fault.h) or through the simulator.
 *
 * Pure: no DPDK, no clock. The same seed and the same frame sequence give the same verdicts.
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reliability/rng.h"

namespace imago::dp {

/** Fault knobs for one direction of one port. Probabilities are per frame, in [0, 1]. */
struct FaultConfig {
  double drop = 0;          ///< independent loss
  double burst_enter = 0;   ///< Gilbert-Elliott: P(good -> bad) per frame; 0 disables bursts
  double burst_exit = 0.25; ///< Gilbert-Elliott: P(bad -> good) per frame (mean burst 1/exit)
  double burst_drop = 1.0;  ///< loss probability while in the bad state
  double dup = 0;           ///< the frame is sent twice
  double corrupt = 0;       ///< one payload bit is flipped
  double reorder = 0;       ///< the frame is held back reorder_us so later ones overtake it
  uint32_t reorder_us = 50;
  uint32_t delay_us = 0;    ///< fixed one-way delay
  uint32_t jitter_us = 0;   ///< extra uniform delay in [0, jitter_us]
  uint64_t seed = 1;

  /** @return true when any knob would change traffic. */
  bool active() const;
};

/**
 * Parse "key=value,..." into @p out (keys: loss, burst, burst-exit, burst-drop, dup, corrupt,
 * reorder, reorder-us, delay-us, jitter-us, seed). Unnamed knobs keep their value in @p out.
 *
 * @p seed_given (if not null) tells whether the spec had a seed=N.
 *
 * @return 0, or -EINVAL with a message in @p err naming the bad key or value.
 */
int parse_fault_spec(std::string_view spec, FaultConfig& out, std::string& err, bool* seed_given = nullptr);

/** Format @p c as a spec parse_fault_spec() reads back ("none" when inactive). */
std::string format_fault_spec(const FaultConfig& c);

/** What happens to one frame. */
struct FaultVerdict {
  bool drop = false;
  bool dup = false;
  bool corrupt = false;
  bool reordered = false;
  uint32_t corrupt_pick = 0;  ///< random bits choosing which bit to flip
  uint64_t delay_ns = 0;      ///< hold the frame this long (delay + jitter + reorder hold)
};

/** Counters of one fault model; frames_out = frames_in - dropped - burst_dropped + duplicated. */
struct FaultCounters {
  uint64_t frames_in = 0;
  uint64_t dropped = 0;        ///< independent drops
  uint64_t burst_dropped = 0;  ///< drops in the Gilbert-Elliott bad state
  uint64_t duplicated = 0;
  uint64_t corrupted = 0;
  uint64_t reordered = 0;
  uint64_t delayed = 0;        ///< frames held for delay or jitter

  uint64_t lost() const { return dropped + burst_dropped; }
};

/** The seeded per-frame decision maker. */
class FaultModel {
 public:
  explicit FaultModel(const FaultConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {}

  /** Decide the fate of the next frame and count it. */
  FaultVerdict next();

  const FaultConfig& config() const { return cfg_; }
  const FaultCounters& counters() const { return counters_; }

 private:
  bool lost_in_burst();

  FaultConfig cfg_;
  Rng rng_;
  bool bad_state_ = false;
  FaultCounters counters_;
};

}  // namespace imago::dp
