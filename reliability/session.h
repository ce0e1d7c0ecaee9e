/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Session identity and the handshake decision (docs/PROTOCOL.md (section 3), "Sessions").
 *
 * A session with a peer is the pair (peer epoch, peer token) plus each side's initial
 * sequence number (ISN). A node learns the peer's identity from a HELLO or HELLO_ACK; it may
 * send data once the peer has proved, in a HELLO or HELLO_ACK addressed to our token, that
 * it knows our current ISN ("confirmed"). A higher epoch means the peer restarted: the
 * session is reset and nothing queued for, or received from, the old incarnation survives.
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

struct Session {
  PeerState state = PeerState::kConnecting;
  bool known = false;      ///< epoch/token/peer_isn below are the peer's
  bool confirmed = false;  ///< the peer knows our token and my_isn
  uint32_t epoch = 0;      ///< peer's epoch
  uint64_t token = 0;      ///< peer's token
  Seq peer_isn = 0;        ///< first sequence number the peer sends us
  Seq my_isn = 0;          ///< first sequence number we send the peer
};

/** What a HELLO / HELLO_ACK means for the session. */
enum class HelloVerdict : uint8_t {
  kFirst,       ///< first identity we learn for this peer
  kSame,        ///< identity we already know
  kRestart,     ///< higher epoch: the peer restarted, reset the session
  kStale,       ///< lower epoch: a frame from a previous incarnation
  kWrongToken,  ///< same epoch, other token: forged or misconfigured, drop
};

/** Classify a handshake frame from a peer claiming (@p epoch, @p token). */
constexpr HelloVerdict classify_hello(const Session& s, uint32_t epoch, uint64_t token) {
  if (!s.known) return HelloVerdict::kFirst;
  if (epoch == s.epoch) return token == s.token ? HelloVerdict::kSame : HelloVerdict::kWrongToken;
  // Epochs compare like sequence numbers, so a long-lived cluster may wrap them too.
  return seq_gt(epoch, s.epoch) ? HelloVerdict::kRestart : HelloVerdict::kStale;
}

}  // namespace imago::rel
