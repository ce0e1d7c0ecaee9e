/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Optimistic credits (Pupa 2.2.2). The receiver grants unlimited credit until a unit must be
 * dropped for lack of buffer space; from then on it advertises exactly its free space (0 at
 * first, then partial credit as the application drains) until free space rises above a high
 * water mark, when credit is unlimited again. The sender turns each advertisement into an
 * absolute limit, so a lost or repeated update cannot make it send too much.
 */
#pragma once

#include <cstdint>

#include "reliability/seq.h"
#include "reliability/wire.h"

namespace imago::rel {

/** Receiver side: what credit to advertise. */
class CreditGrant {
 public:
  CreditGrant() = default;
  CreditGrant(bool enabled, uint32_t high_water) : enabled_(enabled), high_(high_water) {}

  /** A unit was dropped for lack of space: switch to explicit credit. */
  void on_overflow() {
    if (enabled_) limited_ = true;
  }
  /**
   * @param free units the receiver can still accept beyond its cumulative ACK.
   * @param gap  the receiver holds units beyond a gap: the sender's window is bounded by our
   *             buffer right now, so say exactly how much is left (this does not switch to
   *             limited mode; credit is unlimited again as soon as the gap closes).
   * @return the credit field to send (kCreditUnlimited when not limiting).
   */
  uint32_t advertise(uint32_t free, bool gap = false) {
    if (!enabled_) return kCreditUnlimited;
    if (limited_ && free >= high_) limited_ = false;
    return limited_ || gap ? free : kCreditUnlimited;
  }
  bool limited() const { return limited_; }
  void reset() { limited_ = false; }

 private:
  bool enabled_ = true;
  bool limited_ = false;
  uint32_t high_ = 0;
};

/** Sender side: the highest sequence number the receiver currently allows. */
class CreditLimit {
 public:
  /** Apply an advertisement carried by a frame whose cumulative ACK is @p ack. */
  void update(Seq ack, uint32_t credit) {
    unlimited_ = credit == kCreditUnlimited;
    limit_ = ack + credit;  // modulo 2^32; unused when unlimited
  }
  /** @return true when the unit @p s may be (re)transmitted. */
  bool allows(Seq s) const { return unlimited_ || seq_lt(s, limit_); }
  bool unlimited() const { return unlimited_; }
  /** @return the first sequence number not allowed (meaningless when unlimited()). */
  Seq limit() const { return limit_; }
  void reset() { unlimited_ = true; }

 private:
  bool unlimited_ = true;
  Seq limit_ = 0;  ///< first sequence number not allowed (mod 2^32)
};

}  // namespace imago::rel
