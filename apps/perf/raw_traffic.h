/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Raw traffic: a sender that puts N numbered, checksummed frames of S payload bytes on a port
 * with no reliability, and a receiver that checks and counts them (delivered, lost,
 * duplicated, reordered, corrupted). imago-perf's raw mode and the EAL tests use it; it
 * measures the link's own rate, the limit the reliable modes are compared with.
 *
 * Payload layout (all big-endian): seq (8), check (4), flags (2), length (2), then filler.
 * check is the CRC32C of the payload with check zeroed. A FIN frame carries the count of
 * frames the sender sent in seq, so a receiver in another process knows what to expect.
 */
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <vector>

#include "dataplane/encap.h"
#include "dataplane/fault.h"
#include "apps/common/pacer.h"
#include "reliability/be.h"

namespace imago::perf {

struct __attribute__((packed)) RawHdr {
  Be64 seq;
  Be32 check;
  Be16 flags;   ///< kRawFin
  Be16 length;  ///< payload bytes including this header
};
static_assert(sizeof(RawHdr) == 16);
static_assert(offsetof(RawHdr, check) == 8);
static_assert(offsetof(RawHdr, length) == 14);

inline constexpr uint16_t kRawFin = 1;
inline constexpr uint16_t kRawMinSize = sizeof(RawHdr);

/** Payloads of at least this size can carry a send timestamp right after the header. */
inline constexpr uint16_t kRawStampedSize = kRawMinSize + 8;

/**
 * Fill @p payload (@p len >= kRawMinSize bytes) as raw frame @p seq. A non-zero @p stamp (a
 * TSC value, host order: it is only read on the same host) goes in the first 8 filler bytes
 * when the payload has room, inside what the check covers.
 */
void raw_fill(uint8_t* payload, uint16_t len, uint64_t seq, uint16_t flags, uint64_t stamp = 0);
/** @return the stamp raw_fill() wrote, or 0 (none, or no room). */
uint64_t raw_stamp(const uint8_t* payload, uint16_t len);
/** @return true when @p payload is an intact raw payload of @p len bytes. */
bool raw_verify(const uint8_t* payload, uint16_t len);

struct RawSenderConfig {
  uint64_t msgs = 1'000'000;
  uint16_t size = 64;        ///< payload bytes per frame, >= kRawMinSize
  uint16_t burst = 32;
  uint64_t rate_pps = 0;     ///< 0: as fast as the port takes them
  dp::EncapConfig encap;
  unsigned fin_count = 5;    ///< FIN frames attempted at the end, 1 ms apart
};

struct RawSenderStats {
  uint64_t sent = 0;          ///< frames handed to the (faulty) port
  uint64_t tx_full = 0;       ///< bursts the port took only partly (back-pressure)
  uint64_t alloc_failed = 0;  ///< bursts with no mbufs
  uint64_t fins_sent = 0;
  uint64_t fin_attempts = 0;  ///< FINs tried, sent or not (the port may be down by then)
  uint64_t first_tsc = 0, last_tsc = 0;
};

/** Sends raw frames; poll() from one lcore. */
class RawSender {
 public:
  /** @return 0 or -EINVAL (size below kRawMinSize or above what fits, burst 0 or > 512). */
  int init(const RawSenderConfig& cfg, dp::FaultyPort& port, rte_mempool* pool);
  /** Lcore task. @return frames sent in this call. */
  unsigned poll(uint64_t now_tsc);
  /** @return true once every frame was sent and every FIN attempted. */
  bool done() const { return stats_.fin_attempts >= cfg_.fin_count; }
  const RawSenderStats& stats() const { return stats_; }
  const RawSenderConfig& config() const { return cfg_; }

 private:
  uint16_t build(uint16_t n, uint64_t now_tsc);
  unsigned send_fin(uint64_t now_tsc);

  RawSenderConfig cfg_;
  dp::FaultyPort* port_ = nullptr;
  rte_mempool* pool_ = nullptr;
  std::vector<rte_mbuf*> pending_;  // built but not yet taken by the port
  uint16_t pending_n_ = 0, pending_at_ = 0;
  uint64_t next_seq_ = 0;
  app::Pacer pacer_;
  uint64_t next_fin_tsc_ = 0;
  RawSenderStats stats_;
};

struct RawReceiverStats {
  uint64_t received = 0;      ///< frames taken from the port
  uint64_t delivered = 0;     ///< intact, first copy
  uint64_t bytes = 0;         ///< payload bytes delivered
  uint64_t duplicated = 0;
  uint64_t reordered = 0;     ///< arrived after a higher sequence number
  uint64_t corrupted = 0;     ///< failed the payload check
  uint64_t out_of_range = 0;  ///< sequence number beyond what was expected
  uint64_t fins = 0;
  uint64_t sender_reported = 0;  ///< frames the sender says it sent (from FIN), 0 if none
  uint64_t first_tsc = 0, last_tsc = 0;  ///< first and last delivery
  uint64_t last_frame_tsc = 0;           ///< last frame of any kind
  dp::DecodeCounters decode;
};

/** Receives and checks raw frames; poll() from one lcore. */
class RawReceiver {
 public:
  /** @p expected: frames the sender is asked to send (sizes the duplicate bitmap). */
  int init(uint64_t expected, uint16_t burst, const dp::EncapConfig& encap, dp::FaultyPort& port);
  /** Lcore task. @return frames received in this call. */
  unsigned poll(uint64_t now_tsc);
  /** @return true once the sender's FIN said how many and that many arrived. */
  bool complete() const;
  /**
   * @return true when there is nothing more to wait for: complete(), or a FIN arrived and
   *         the link was silent for @p fin_grace_tsc, or traffic began and the link was
   *         silent for @p idle_tsc.
   */
  bool finished(uint64_t now_tsc, uint64_t fin_grace_tsc, uint64_t idle_tsc) const;
  /** @return frames the sender sent: its FIN report, or the expected count without one. */
  uint64_t sent_total() const;
  const RawReceiverStats& stats() const { return stats_; }

 private:
  void account(const dp::DecodedFrame& f, uint64_t now_tsc);

  uint64_t expected_ = 0;
  uint16_t burst_ = 32;
  dp::EncapConfig encap_;
  dp::FaultyPort* port_ = nullptr;
  std::vector<uint64_t> seen_;  // bitmap of delivered sequence numbers
  uint64_t max_seq_ = 0;
  bool any_ = false;
  RawReceiverStats stats_;
};

}  // namespace imago::perf
