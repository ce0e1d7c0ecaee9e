/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A port's pending transmit burst: frames gather here and go to the port (through its fault
 * layer) in one tx_burst. A port that took nothing of a burst is tried again only after a
 * back-off that doubles from 1 us to 1 ms until it takes something: a port whose link is down
 * refuses forever, and net_af_packet spends a system call on every refusal, which at every
 * poll of an lcore cost a fifth of its rate.
 *
 * One per port and lcore; a fixed array, no allocation.
 */
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "dataplane/fault.h"

namespace imago::dp {

class TxQueue {
 public:
  static constexpr uint16_t kMaxBurst = 64;

  /** @p burst frames at most are pending (1..kMaxBurst); @p tsc_hz: rte_get_tsc_hz(). */
  void init(FaultyPort* port, uint16_t burst, uint64_t tsc_hz);
  /** @return whether one more frame fits, flushing first when the burst is full. */
  bool room(uint64_t now_tsc) { return n_ < burst_ || (flush(now_tsc), n_ < burst_); }
  /** Queue @p m (room() said yes): the port frees it once sent. */
  void push(rte_mbuf* m) { pending_[n_++] = m; }
  /** Send the pending burst (unless backing off). @return frames the port took, the fault
   *  layer's delayed ones included. */
  unsigned flush(uint64_t now_tsc);
  /** Free what is pending (the port is closing). */
  void drop_all();

  uint16_t pending() const { return n_; }
  uint64_t frames_out() const { return frames_out_; }
  uint64_t backoffs() const { return backoffs_; }

 private:
  FaultyPort* port_ = nullptr;
  uint16_t burst_ = 32;
  uint16_t n_ = 0;
  rte_mbuf* pending_[kMaxBurst];
  uint64_t retry_tsc_ = 0, backoff_ = 0, backoff_min_ = 1, backoff_max_ = 1;
  uint64_t frames_out_ = 0, backoffs_ = 0;
};

}  // namespace imago::dp
