/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Raw ping-pong: round trips with no reliability, the latency floor of a link. The pinger
 * keeps one numbered raw frame outstanding and records each round trip in a histogram; the
 * echoer sends every raw frame straight back (same mbuf, addresses swapped). A reply that
 * has not come within the timeout counts as lost and the next ping goes out.
 */
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "dataplane/encap.h"
#include "dataplane/fault.h"
#include "apps/common/histogram.h"

namespace imago::perf {

struct PingerConfig {
  uint64_t pings = 100'000;
  uint16_t size = 64;           ///< payload bytes, >= kRawMinSize
  uint64_t timeout_us = 10'000; ///< a reply later than this is lost
  dp::EncapConfig encap;
  unsigned fin_count = 5;
};

struct PingerStats {
  uint64_t sent = 0;
  uint64_t replies = 0;
  uint64_t lost = 0;       ///< no reply within the timeout
  uint64_t late = 0;       ///< a reply to an earlier ping, after its timeout
  uint64_t corrupted = 0;
  uint64_t first_tsc = 0, last_tsc = 0;
  dp::DecodeCounters decode;
  app::Histogram rtt_ns;
};

/** Sends pings and measures round trips; poll() from one lcore. */
class RawPinger {
 public:
  /** @return 0 or -EINVAL (size does not fit the pool's mbufs). */
  int init(const PingerConfig& cfg, dp::FaultyPort& port, rte_mempool* pool);
  /** Lcore task. @return frames handled. */
  unsigned poll(uint64_t now_tsc);
  /** @return true after the last ping was answered or timed out and the FINs were tried. */
  bool done() const { return fin_attempts_ >= cfg_.fin_count; }
  const PingerStats& stats() const { return stats_; }

 private:
  unsigned send_ping(uint64_t now_tsc);
  unsigned receive(uint64_t now_tsc);
  void send_fin(uint64_t now_tsc);

  PingerConfig cfg_;
  dp::FaultyPort* port_ = nullptr;
  rte_mempool* pool_ = nullptr;
  uint64_t tsc_hz_ = 0, timeout_tsc_ = 0;
  bool outstanding_ = false;
  uint64_t ping_tsc_ = 0, next_fin_tsc_ = 0;
  unsigned fin_attempts_ = 0;
  PingerStats stats_;
};

struct EchoerStats {
  uint64_t echoed = 0;
  uint64_t tx_failed = 0;  ///< replies the port refused (freed)
  uint64_t fins = 0;
  uint64_t last_frame_tsc = 0;
  dp::DecodeCounters decode;
};

/** Answers pings; poll() from one lcore. */
class RawEchoer {
 public:
  int init(uint16_t burst, const dp::EncapConfig& encap, dp::FaultyPort& port);
  /** Lcore task. @return frames handled. */
  unsigned poll(uint64_t now_tsc);
  /** @return true once a FIN arrived. */
  bool done() const { return stats_.fins > 0; }
  const EchoerStats& stats() const { return stats_; }

 private:
  uint16_t burst_ = 32;
  dp::EncapConfig encap_;
  dp::FaultyPort* port_ = nullptr;
  EchoerStats stats_;
};

}  // namespace imago::perf
