/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Engine configuration: identity, buffer sizes, protocol modes, timers. Defaults are the
 * ones documented in docs/PROTOCOL.md (section 3).
 */
#pragma once

#include <cstdint>
#include <optional>

#include "reliability/seq.h"
#include "reliability/wire.h"

namespace imago::rel {

inline constexpr uint64_t kUs = 1000;
inline constexpr uint64_t kMs = 1000 * kUs;
inline constexpr uint64_t kSec = 1000 * kMs;

/** Everything an Engine needs at creation. Buffers are sized from it once, up front. */
struct Config {
  // Identity.
  NodeId node_id = 0;
  uint32_t epoch = 1;              ///< names this incarnation; make_epoch() (epoch.h) in apps
  uint64_t seed = 1;               ///< seeds tokens and initial sequence numbers
  /// Fixed ISNs (tests; random if unset): the first session's is this, each later one
  /// 0x9E3779B9 more (mod 2^32), so that a new session is told from the old by its ISN, and an
  /// old frame's numbers fall far outside it, as with random ones.
  std::optional<Seq> initial_seq;

  // Frames.
  uint32_t mtu = 1500 - 46;  ///< frame bytes after the link/UDP header
  uint32_t max_sack = 4;     ///< SACK ranges per frame (<= kMaxSackRanges)
  bool crc = true;           ///< CRC32C on every frame; required on receive when on

  // Buffers (per peer).
  uint32_t send_window = 16384;                           ///< units in flight or queued
  uint64_t send_buffer_bytes = (16u << 20) + (1u << 20);  ///< record bytes of the held frames
  uint32_t recv_window = 1024;                            ///< receive slots (one unit each)
  uint64_t max_message_size = 16u << 20;                  ///< also the reassembly buffer
  uint32_t max_peers = 64;

  // Modes.
  bool selective_repeat = true;  ///< false: Pupa's go-back-N (receiver drops out of order)
  bool flow_control = true;      ///< optimistic credits; false: always unlimited
  /// Cap a stream's frames in flight by the queueing delay measured (delay_cap.h,
  /// docs/PROTOCOL.md 3.4.9); false: the whole window in flight.
  bool delay_cap = true;

  // Water marks, in percent of the send window / receive window.
  uint32_t ack_req_low_pct = 25;   ///< free send space below this: request ACKs
  uint32_t ack_req_high_pct = 50;  ///< ...until an ACK lifts it above this
  uint32_t credit_high_pct = 50;   ///< free receive space above this: credit unlimited again

  // Timers.
  uint64_t ack_delay_ns = 10 * kMs;       ///< ACK timer (Pupa: 10 ms)
  uint64_t ack_refresh_ns = 500 * kMs;    ///< periodic ACK / keep-alive (Pupa: 50 ticks)
  uint64_t coalesce_ns = 20 * kUs;        ///< oldest unsent message waits at most this long
  uint64_t nack_interval_ns = 200 * kUs;  ///< repeat NACK for the same gap at most this often
  /// RACK's reordering window (RFC 8985): a hole below a later frame that got through is lost
  /// only once it was sent this long ago; until then it may be on a slower path (two
  /// networks in ping-pong). 0: lost at once (one path).
  uint64_t reorder_window_ns = 0;
  uint64_t rto_initial_ns = 100 * kMs;
  uint64_t rto_min_ns = 20 * kMs;
  uint64_t rto_max_ns = 2 * kSec;
  uint64_t dead_after_ns = 3 * kSec;      ///< silence after which the peer is declared dead
  uint64_t tx_retry_ns = 10 * kUs;        ///< retry after the frame sink pushed back
  uint64_t deliver_retry_ns = 100 * kUs;  ///< retry after the application refused
  /// At most one restart challenge per peer per interval: a HELLO flood claiming a peer
  /// makes us send that peer no more than this (RFC 5961 section 7 limits challenge ACKs).
  /// Keep it below rto_initial_ns, the first HELLO retry of a restarted peer.
  uint64_t challenge_interval_ns = 1 * kMs;

  // Groups (reliable multicast, docs/PROTOCOL.md 3.7). Their buffers are set aside by
  // create(), and only when these are above 0.
  uint32_t group_sources = 0;   ///< groups this node may send to at once
  uint32_t group_streams = 0;   ///< (source, group) streams this node may receive at once
  uint32_t group_window = 1024;  ///< units per group stream on either side (power of two)
  uint64_t group_ack_delay_ns = 1 * kMs;  ///< a member batches its ACKs this long
  uint64_t group_status_ns = 5 * kMs;     ///< a source tells a lagging member its tail this often
  uint64_t group_expire_ns = 2 * kSec;    ///< a member that holds data back this long is expired
  /** A source gathers NACKs this long before it repairs: a frame several members ask for
   *  goes once to the group, the others by unicast to their askers (0: at once, unicast). */
  uint64_t group_repair_delay_ns = 200 * kUs;
  /** A member waits a random time up to this long before it asks for a new hole: a repair
   *  another member asked for may fill it first (NACK suppression, for losses members
   *  share). A source with it set sends every repair to the group. 0: ask at once. */
  uint64_t group_nack_backoff_ns = 0;
  /** Send group frames once to the group where the sink can; false: one unicast copy to each
   *  member (as N unicast streams would: for networks without multicast, and comparisons). */
  bool group_multicast = true;
  /** A NACK-based group stream (group_open(g, now, true)) frees a sent frame this long after it
   *  went out, ACKed or not, and its oldest frames at once when the window is full. */
  uint64_t group_nack_hold_ns = 100 * kMs;
  /** Parity repair (docs/PROTOCOL.md 3.7.7): a source whose members lose, between them, 1.5
   *  frames or more in a block sends one XOR parity frame per block to the group, from which
   *  a member that lost one frame of the block rebuilds it. Blocks of this many frames (with
   *  group_parity_fit, of up to this many). 0: never; else 2 to 64 (needs max_sack >= 2: a
   *  parity frame is 12 bytes above its longest frame's records). */
  uint32_t group_parity_frames = 64;
  /** Size each new block to the members' losses as judged (cheapest_block()), up to
   *  group_parity_frames; false: blocks of group_parity_frames. */
  bool group_parity_fit = true;
  /** A member's NACK of a hole of this many frames in a row or more says it overflowed (its
   *  port's queue, while it was off its core), not a random loss: its source caps the frames
   *  it keeps in flight (flight_cap.h, docs/PROTOCOL.md 3.7.8).
   *  0 (the default): never (a group keeps its whole window in flight); 8 is the value measured. */
  uint32_t group_burst_frames = 0;
};

/**
 * The fast-link preset (docs/PROTOCOL.md 3.5). Config's defaults are Pupa's, for round trips of
 * milliseconds; on DPDK ports they take microseconds, and a 20 ms minimum RTO makes every tail
 * loss (a lost ping, say) cost 20 ms. The RTO stays above the ACK delay, so a delayed ACK never
 * looks like a loss. As many receive slots as the sender may have in flight: with fewer, every
 * gap makes the receiver drop what arrives beyond its slots, and each dropped unit is sent
 * again. Every node imagod, the library and imago-perf run on a port starts from it.
 * @return @p c with the preset applied.
 */
constexpr Config fast_link_preset(Config c = {}) {
  c.recv_window = c.send_window;
  c.ack_delay_ns = 500 * kUs;
  c.rto_min_ns = 2 * kMs;
  c.rto_initial_ns = 10 * kMs;
  c.group_ack_delay_ns = 100 * kUs;
  c.group_status_ns = 1 * kMs;
  c.group_repair_delay_ns = 50 * kUs;
  return c;
}

/**
 * Check @p c for consistency.
 * @return 0, or -EINVAL (zero sizes, mtu too small for a header, water marks out of order,
 *         send buffer smaller than max_message_size, windows of 2^30 units or more).
 */
int validate(const Config& c);

/** @return what validate() refuses in @p c, in words (for the operator), or nullptr if nothing. */
const char* config_problem(const Config& c);

/** @return the record bytes a frame of @p mtu bytes always holds beside its header and
 *  room for @p max_sack SACK ranges. */
constexpr uint32_t record_budget(uint32_t mtu, uint32_t max_sack) {
  return mtu - static_cast<uint32_t>(sizeof(FrameHeader)) - 8 * max_sack;
}

/** @return the largest unit payload a frame of @p c.mtu can always carry. */
constexpr uint32_t unit_capacity(const Config& c) {
  return record_budget(c.mtu, c.max_sack) - static_cast<uint32_t>(kMaxRecordHeader);
}

}  // namespace imago::rel
