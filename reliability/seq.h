/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sequence numbers: unsigned 32-bit, compared modulo 2^32 (serial number arithmetic, RFC 1982).
 *
 * Two sequence numbers are comparable while they are less than 2^31 apart; every window in
 * the protocol is far smaller than that, so ordering survives the wrap from 2^32-1 to 0.
 */
#pragma once

#include <cstdint>

namespace imago {

/** A message or frame sequence number; arithmetic on it is modulo 2^32. */
using Seq = uint32_t;

/** @return the signed distance b - a, modulo 2^32 (positive when b is after a). */
constexpr int32_t seq_diff(Seq a, Seq b) { return static_cast<int32_t>(b - a); }
/** @return true when a comes strictly before b. */
constexpr bool seq_lt(Seq a, Seq b) { return seq_diff(a, b) > 0; }
/** @return true when a comes before b or equals it. */
constexpr bool seq_le(Seq a, Seq b) { return seq_diff(a, b) >= 0; }
/** @return true when a comes strictly after b. */
constexpr bool seq_gt(Seq a, Seq b) { return seq_lt(b, a); }
/** @return true when a comes after b or equals it. */
constexpr bool seq_ge(Seq a, Seq b) { return seq_le(b, a); }

static_assert(seq_lt(0xFFFFFFFFu, 0u), "wrap: 2^32-1 comes before 0");
static_assert(seq_gt(5u, 0xFFFFFFF0u), "wrap: 5 comes after 2^32-16");

}  // namespace imago
