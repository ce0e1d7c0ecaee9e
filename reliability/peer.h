/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Engine-private state of one peer: session, both windows, timers, counters.
 * Written only by the lcore that runs the engine.
 */
#pragma once

#include <cstdint>

#include "reliability/counters.h"
#include "reliability/credit.h"
#include "reliability/delay_cap.h"
#include "reliability/frame_sink.h"
#include "reliability/reassembly.h"
#include "reliability/recv_window.h"
#include "reliability/replay_window.h"
#include "reliability/rto.h"
#include "reliability/send_window.h"
#include "reliability/session.h"
#include "reliability/wire.h"

namespace imago::rel {

inline constexpr uint64_t kNever = ~uint64_t{0};

struct Peer {
  NodeId id = 0;
  Session s;

  // Send side.
  SendWindow tx;
  RtoEstimator rto;
  CreditLimit credit_out;  ///< what the peer allows us
  DelayCap delay;          ///< frames in flight by the queueing delay (cfg.delay_cap)
  uint64_t rto_deadline = kNever;
  uint64_t ack_req_deadline = kNever;  ///< ACK-timer tick re-sending a pending ACK request
  uint64_t unsent_bytes = 0;           ///< record bytes queued in [nxt, end)
  uint64_t frames_out = 0;             ///< frames with records sent (numbers TxFrame::number)
  uint64_t rack_frame = 0;             ///< newest frame a unit known delivered was sent in
  uint64_t rack_path[kMaxPaths] = {};  ///< the same, per path (TxFrame::path)
  uint64_t tlp_deadline = kNever;      ///< tail-loss probe (one per flight; RTO stays armed)
  uint64_t goback_ns = 0;  ///< last go-back (NACK without SACK) and the ACK it went back to
  Seq goback_seq = 0;
  Seq retx_cursor = 0;                 ///< no frame before this unit has retx set
  Seq unreported_from = 0;  ///< [from, to): units the last ACK could not list (SACK full)
  Seq unreported_to = 0;
  uint32_t fast_pending = 0;           ///< unsent units queued with FASTPATH
  Seq ack_req_seq = 0;                 ///< nxt when the last DATA frame asked for an ACK
  bool ack_required = false;           ///< Pupa's "acknowledgment required" state
  bool probe_now = false;              ///< send an ACK request even with no data

  // Receive side.
  RecvWindow rx;
  Reassembly reasm;
  CreditGrant credit_in;                    ///< what we allow the peer
  uint32_t credit_sent = kCreditUnlimited;  ///< last credit advertised
  uint64_t ack_deadline = kNever;           ///< ACK timer for units received and not yet acked
  uint64_t last_nack_ns = 0;
  Seq last_nack_seq = 0;
  bool ack_now = false;          ///< send an ACK (piggy-backed or alone) before returning
  bool nack_now = false;         ///< ...with the NACK flag
  bool deliver_blocked = false;  ///< application refused; retry on poll

  // Session and liveness.
  uint64_t last_heard = 0;  ///< last valid frame from the peer
  uint64_t last_sent = 0;   ///< last frame with our ACK and credit to the peer (keep-alive)
  uint32_t ctl_sent = 0;    ///< GROUP_CTL frames sent to it: each carries its number in `seq`
  ReplayWindow ctl_rx;      ///< the numbers of its GROUP_CTL frames heard (replays dropped)
  uint64_t hello_deadline = 0;
  uint64_t hello_interval = 0;
  uint64_t challenge_ns = kNever;  ///< last restart challenge sent (rate limit; kNever: none)
  // The handshake's RTT sample: a HELLO carries its attempt number in `credit`, a HELLO_ACK
  // the number of the HELLO it answers (TCP timestamps' echo: unambiguous after a resend).
  uint64_t hello_tx_ns = 0;     ///< our latest HELLO went out then
  uint32_t hello_attempts = 0;  ///< HELLOs sent this session (the latest one's number)
  uint32_t hello_echo = 0;      ///< the peer's latest HELLO, for our next HELLO_ACK (0: none)
  bool hello_ack_now = false;  ///< answer a HELLO
  bool settings_told = false;  ///< the application heard of a HELLO stating settings refused
  /// The largest message the peer takes (its HELLOs' HelloBody::max_message; our own until
  /// one states it): send() refuses a larger one.
  uint64_t peer_max_message = 0;
  /// The largest message queued while the session was not ESTABLISHED (0 once the window
  /// emptied): a peer whose HELLO states less is refused, those messages cannot reach it.
  uint64_t early_max = 0;
  bool tx_blocked = false;     ///< the frame sink pushed back; retry soon

  PeerCounters c;
};

}  // namespace imago::rel
