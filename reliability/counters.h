/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Counters: Pupa's Table 3 per peer and in total, plus one counter per rejection reason.
 *
 * Plain integers written by the engine's lcore only; a reader on another thread sees values
 * that may be slightly stale, never torn on x86-64 (aligned 64-bit stores).
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace imago::rel {

/** Why an incoming frame (or one record of it) was dropped. */
enum class Reject : uint8_t {
  kNone = 0,
  kTooShort,     ///< shorter than its header / SACK ranges
  kBadVersion,   ///< unknown wire version
  kBadType,      ///< unknown frame type
  kBadFlags,     ///< unknown frame flag bits
  kBadCrc,       ///< CRC32C mismatch: corrupted in flight
  kMissingCrc,   ///< CRC required by config but absent
  kWrongDst,     ///< addressed to another node
  kUnknownPeer,  ///< source node was never added
  kStaleEpoch,   ///< source epoch older than the session's
  kWrongToken,   ///< token does not match the session (old incarnation or forged)
  kNoSession,    ///< data/ack before the handshake taught us the peer
  kPeerDead,     ///< session already declared dead
  kBadSack,      ///< SACK count or range out of bounds
  kBadAck,       ///< ACK for a sequence never sent
  kBadRecord,    ///< malformed record header or length
  kOutOfWindow,  ///< record sequence far outside the receive window
  kBadFragment,  ///< fragment flags inconsistent with the stream
  kTooLarge,     ///< reassembled message above max_message_size
  kUnprovenRestart,  ///< HELLO of a new incarnation that did not (yet) echo our challenge
  kBadCredit,        ///< credit beyond any receive window (> 2^30, not unlimited): ignored
  kNotJoined,        ///< group data of a stream this node does not receive (not joined, ended)
  kBadGroupCtl,      ///< group control entry malformed, of an unknown op, or for no such stream
  kReplayedCtl,      ///< group control frame whose number was seen already, or is too old: a replay
  kSettingsMismatch,  ///< HELLO / HELLO_ACK stating a frame size other than ours, or a largest
                      ///< message below one we queued before the session (HelloBody)
  kCount,
};

/** @return a short stable name for @p r (for logs and RESULT lines). */
const char* reject_name(Reject r);

/** Counters of one peer (or their sum over all peers). Names follow Pupa's Table 3. */
struct PeerCounters {
  // Pupa Table 3.
  uint64_t pkts_sent = 0;           ///< frames handed to the frame sink
  uint64_t pkts_lost = 0;           ///< loss detections: RTO expiries + NACK-driven repairs
  uint64_t ack_only_sent = 0;       ///< frames of type kAck sent
  uint64_t valid_acks = 0;          ///< received ACKs that advanced the send window
  uint64_t valid_nacks = 0;         ///< received NACKs that were in range
  uint64_t msgs_sent = 0;           ///< application messages accepted by send()
  uint64_t msgs_retransmitted = 0;  ///< unit retransmissions
  uint64_t msgs_received = 0;       ///< messages delivered to the application
  uint64_t overflow = 0;            ///< units dropped: no receive buffer space
  uint64_t out_of_order = 0;        ///< units that arrived ahead of a gap
  // Ours.
  uint64_t pkts_received = 0;  ///< frames accepted (passed every check)
  uint64_t units_sent = 0;     ///< unit first transmissions
  uint64_t dup_received = 0;   ///< units received twice (dropped)
  uint64_t nacks_sent = 0;
  uint64_t ack_reqs_sent = 0;  ///< frames sent with the ACK-request flag
  uint64_t hellos_sent = 0;
  uint64_t bytes_sent = 0;      ///< application bytes accepted by send()
  uint64_t bytes_received = 0;  ///< application bytes delivered
  uint64_t rto_expired = 0;
  uint64_t tail_probes = 0;      ///< tail-loss probes: newest unit resent after a PTO of silence
  uint64_t tx_backpressure = 0;  ///< frame sink refused a frame
  uint64_t deliver_refused = 0;  ///< application refused a message (ring full)
  uint64_t credit_stalls = 0;    ///< flushes that stopped on a zero credit
  uint64_t delay_cuts = 0;       ///< queueing delay measured cut the frames in flight (delay_cap.h)
  uint64_t resets = 0;           ///< sessions reset by a proven peer restart
  uint64_t deaths = 0;           ///< peer declared dead
  uint64_t discarded_msgs = 0;   ///< unconfirmed messages dropped on reset/death
  uint64_t challenges_sent = 0;  ///< HELLO_ACKs challenging an unproven restart (also hellos_sent)
  uint64_t msgs_by_ref = 0;      ///< of msgs_sent, sent from the caller's buffer (send_ref()), not copied
  uint64_t absences = 0;         ///< times the engine, polled late, did not count that time as this
                                 ///< peer's silence (Engine::credit_absence())
  uint64_t reject[static_cast<size_t>(Reject::kCount)] = {};

  /** Add every counter of @p o to this one. */
  void add(const PeerCounters& o);
  /** @return the sum of all rejection counters. */
  uint64_t rejects() const;
};

/** Call @p fn(name, value) for every counter of @p c but the rejections, in a stable order
 *  (the names are the fields'). */
template <typename Fn>
void for_each_counter(const PeerCounters& c, Fn&& fn) {
  fn("pkts_sent", c.pkts_sent), fn("pkts_lost", c.pkts_lost), fn("ack_only_sent", c.ack_only_sent);
  fn("valid_acks", c.valid_acks), fn("valid_nacks", c.valid_nacks), fn("msgs_sent", c.msgs_sent);
  fn("msgs_retransmitted", c.msgs_retransmitted), fn("msgs_received", c.msgs_received);
  fn("overflow", c.overflow), fn("out_of_order", c.out_of_order), fn("pkts_received", c.pkts_received);
  fn("units_sent", c.units_sent), fn("dup_received", c.dup_received), fn("nacks_sent", c.nacks_sent);
  fn("ack_reqs_sent", c.ack_reqs_sent), fn("hellos_sent", c.hellos_sent), fn("bytes_sent", c.bytes_sent);
  fn("bytes_received", c.bytes_received), fn("rto_expired", c.rto_expired), fn("tail_probes", c.tail_probes);
  fn("tx_backpressure", c.tx_backpressure), fn("deliver_refused", c.deliver_refused);
  fn("credit_stalls", c.credit_stalls), fn("delay_cuts", c.delay_cuts), fn("resets", c.resets), fn("deaths", c.deaths);
  fn("discarded_msgs", c.discarded_msgs), fn("challenges_sent", c.challenges_sent);
  fn("msgs_by_ref", c.msgs_by_ref), fn("absences", c.absences);
}

/** Call @p fn(reject_name(r), count) for every rejection reason r of @p c. */
template <typename Fn>
void for_each_reject(const PeerCounters& c, Fn&& fn) {
  for (size_t i = 1; i < static_cast<size_t>(Reject::kCount); ++i) fn(reject_name(static_cast<Reject>(i)), c.reject[i]);
}

}  // namespace imago::rel
