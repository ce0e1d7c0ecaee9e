/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Session identity and the handshake decision (docs/PROTOCOL.md (section 3), "Sessions").
 *
 * A session with a peer is the pair (peer epoch, peer token) plus each side's initial
 * sequence number (ISN). A node learns the peer's identity from a HELLO or HELLO_ACK; it may
 * send data once the peer has proved, in a HELLO or HELLO_ACK addressed to our token, that
 * it knows our current ISN ("confirmed").
 *
 * Once an identity is known, another one is only a claim: anyone on the segment can write
 * any epoch and token into a HELLO. A claim is answered with a challenge (a HELLO_ACK
 * carrying a fresh random ISN, sent to the peer's address) and taken, resetting the session,
 * only when a handshake frame of the claimed incarnation echoes that ISN: the sender then
 * received a frame sent to the peer node, which a blind sender cannot (RFC 5961 section 7,
 * TCP's challenge ACK; QUIC's address validation, RFC 9000 section 8). Until then the
 * established session runs on untouched.
 */
#pragma once

#include <cstdint>

#include "reliability/seq.h"

namespace imago::rel {

/** Life cycle of a peer as the application sees it. */
enum class PeerState : uint8_t {
  kConnecting,   ///< handshake in progress; send() queues
  kEstablished,  ///< data flows
  kDead,         ///< silent for dead_after_ns: send() fails with -ENOTCONN until a restart
};

/**
 * A claimed new incarnation of the peer waiting for its proof. One per peer, overwritten by
 * the next claim, so a flood of forged HELLOs holds no more state than one.
 */
struct Candidate {
  bool pending = false;
  uint32_t epoch = 0;  ///< claimed epoch
  uint64_t token = 0;  ///< claimed token (never the current one)
  Seq isn = 0;         ///< challenge: the ISN we use if the claim is proven
};

struct Session {
  PeerState state = PeerState::kConnecting;
  bool known = false;      ///< epoch/token/peer_isn below are the peer's
  bool confirmed = false;  ///< the peer knows our token and my_isn
  uint32_t epoch = 0;      ///< peer's epoch
  uint64_t token = 0;      ///< peer's token
  Seq peer_isn = 0;        ///< first sequence number the peer sends us
  Seq my_isn = 0;          ///< first sequence number we send the peer
  Candidate cand;          ///< a restart claimed and not yet proven
};

/** The identity fields of a received HELLO / HELLO_ACK. */
struct HelloClaim {
  uint32_t epoch;      ///< src_epoch
  uint64_t token;      ///< src_token
  uint64_t dst_token;  ///< our token as the sender knows it (0: unknown)
  Seq ack;             ///< our ISN as the sender recorded it
};

/** What a HELLO / HELLO_ACK means for the session. */
enum class HelloVerdict : uint8_t {
  kFirst,     ///< first identity we learn for this peer
  kSame,      ///< identity we already know
  kProven,    ///< the candidate echoed our challenge: the peer restarted, reset the session
  kUnproven,  ///< another token, not (yet) proven: challenge it, change nothing else
  kForged,    ///< the current token with another epoch: no new incarnation has that token
};

/**
 * Classify a handshake frame (@p h) from a peer, given the session @p s and our token.
 * Epochs do not decide a restart: any epoch can be forged, and a restarted node whose clock
 * stepped back, or that restarted within one epoch tick, carries a lower or equal one. Only
 * the echo of the challenge proves a new incarnation; a proven one replaces the old one
 * whatever its epoch (one node id is one process at a time, so a process that receives the
 * node's frames under a new token means the old one is gone).
 */
constexpr HelloVerdict classify_hello(const Session& s, const HelloClaim& h, uint64_t my_token) {
  if (!s.known) return HelloVerdict::kFirst;
  if (h.token == s.token) return h.epoch == s.epoch ? HelloVerdict::kSame : HelloVerdict::kForged;
  const Candidate& c = s.cand;
  // The echo is the challenge itself, or the challenge + 1: what a challenge sent in answer
  // to our challenge carries. Two nodes that both restarted, each still holding the other's
  // previous incarnation, challenge each other; either challenge proves its sender.
  const bool echoed = c.pending && h.token == c.token && h.epoch == c.epoch &&
                      h.dst_token == my_token && (h.ack == c.isn || h.ack == c.isn + 1);
  return echoed ? HelloVerdict::kProven : HelloVerdict::kUnproven;
}

}  // namespace imago::rel
