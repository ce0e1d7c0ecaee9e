/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The epoch of a node incarnation (Config::epoch), from the wall clock read by the caller
 * (reliability/ never reads a clock).
 *
 * Why milliseconds: a restarted process takes far longer than 1 ms to come back (EAL
 * start-up alone), so consecutive incarnations of one node get different, growing epochs;
 * seconds did not (a sender killed and restarted 0.6 s later reused its epoch). 2^32 ms is
 * 49.7 days, and epochs compare with serial arithmetic (seq.h), so an incarnation started
 * 1 ms to 24.8 days after the previous one compares higher.
 *
 * Nothing depends on that order for correctness: a restart is taken only when the new
 * incarnation proves itself (session.h), whatever its epoch, so a clock stepped back, an
 * equal epoch or a wrap costs nothing but which counter a stray frame of the old incarnation
 * lands in. The epoch also seeds the engine's tokens and ISNs.
 *
 * Why the random value: a wall clock that was never set (a board without a real-time clock
 * boots in 1970) would give every boot nearly the same epoch; then the epoch is random, so
 * incarnations still differ with high probability.
 */
#pragma once

#include <cstdint>

namespace imago::rel {

/** Wall-clock time (ns since 1970) before which the clock is taken as never set: 2020-01-01. */
inline constexpr uint64_t kClockSetNs = 1'577'836'800ull * 1'000'000'000ull;

/**
 * @param wall_ns nanoseconds since the Unix epoch (CLOCK_REALTIME) when the node starts.
 * @param random  any random bits drawn at start (e.g. the TSC).
 * @return the epoch: wall-clock milliseconds modulo 2^32; when the clock is not set, @p random
 *         folded to 32 bits.
 */
constexpr uint32_t make_epoch(uint64_t wall_ns, uint64_t random) {
  if (wall_ns < kClockSetNs) return static_cast<uint32_t>(random ^ (random >> 32));
  return static_cast<uint32_t>(wall_ns / 1'000'000);
}

}  // namespace imago::rel
