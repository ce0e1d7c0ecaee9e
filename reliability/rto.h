/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Adaptive retransmission timeout after RFC 6298: smoothed RTT and RTT variance from
 * samples of units sent once (Karn), plus the peer's ACK delay (as QUIC's PTO), clamped to
 * [min, max], doubled on every expiry.
 */
#pragma once

#include <algorithm>
#include <cstdint>

namespace imago::rel {

class RtoEstimator {
 public:
  RtoEstimator() = default;
  /** @p ack_delay_ns: how long the peer may hold an ACK back. Samples carry it only when
   *  the ACK was delayed; a unit at the end of a run is answered that late at worst. */
  RtoEstimator(uint64_t initial_ns, uint64_t min_ns, uint64_t max_ns, uint64_t ack_delay_ns = 0)
      : rto_(initial_ns), initial_(initial_ns), min_(min_ns), max_(max_ns), ack_delay_(ack_delay_ns) {}

  /** Feed one RTT sample (ns) taken from a unit that was transmitted exactly once. */
  void sample(uint64_t rtt) {
    if (!has_sample_) {
      srtt_ = rtt;
      rttvar_ = rtt / 2;
      has_sample_ = true;
    } else {
      uint64_t err = srtt_ > rtt ? srtt_ - rtt : rtt - srtt_;
      rttvar_ = (3 * rttvar_ + err) / 4;  // beta = 1/4
      srtt_ = (7 * srtt_ + rtt) / 8;      // alpha = 1/8
    }
    min_rtt_ = std::min(min_rtt_, rtt);
    rto_ = computed();
  }
  /** A round trip that is no RTT sample: only a floor for min_rtt (the handshake's, which
   *  may also hold the peer's start: srtt and the RTO wait for the data's samples). */
  void floor_sample(uint64_t rtt) { min_rtt_ = std::min(min_rtt_, rtt); }
  /**
   * New data was acknowledged: undo the exponential backoff. RFC 6298 keeps it until the
   * next valid sample, but after a burst of retransmissions (Karn: no samples) that would
   * leave every later loss waiting the maximum RTO. With no sample at all yet, back to the
   * initial RTO, for the same reason: on a path where every unit needs a repair Karn never
   * allows one, and each RTO probe would otherwise wait longer than the last.
   */
  void reset_backoff() { rto_ = has_sample_ ? computed() : initial_; }
  /** Timer expired: back off exponentially (RFC 6298 5.5), up to max. */
  void backoff() { rto_ = std::min(rto_ * 2, max_); }

  uint64_t rto() const { return rto_; }
  uint64_t srtt() const { return srtt_; }
  uint64_t rttvar() const { return rttvar_; }
  /** @return the smallest RTT seen (a floor_sample() included): the path's delay without
   *  ACK-timer inflation; ~0 before any. */
  uint64_t min_rtt() const { return min_rtt_; }
  bool has_sample() const { return has_sample_; }

 private:
  uint64_t computed() const {
    return std::clamp(srtt_ + std::max<uint64_t>(1, 4 * rttvar_) + ack_delay_, min_, max_);
  }

  uint64_t srtt_ = 0;
  uint64_t min_rtt_ = ~uint64_t{0};
  uint64_t rttvar_ = 0;
  uint64_t rto_ = 100'000'000;
  uint64_t initial_ = 100'000'000;
  uint64_t min_ = 1;
  uint64_t max_ = ~uint64_t{0};
  uint64_t ack_delay_ = 0;
  bool has_sample_ = false;
};

}  // namespace imago::rel
