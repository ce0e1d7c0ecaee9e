// SPDX-License-Identifier: BSD-3-Clause
// Sessions: the handshake, resets on a peer restart, and death after silence.
#include <cerrno>

#include "reliability/engine.h"
#include "reliability/peer.h"

namespace imago::rel {

namespace {

inline void count(Peer& p, Reject r) { p.c.reject[static_cast<size_t>(r)]++; }

// Nothing received from the peer's current ISN yet, so adopting another ISN loses nothing.
bool rx_untouched(const Peer& p) {
  return p.rx.dlv() == p.s.peer_isn && p.rx.high() == p.s.peer_isn && !p.reasm.in_message();
}

}  // namespace

void Engine::learn_peer(Peer& p, const Header& h) {
  p.s.known = true;
  p.s.epoch = h.src_epoch;
  p.s.token = h.src_token;
  p.s.peer_isn = h.seq;
  p.rx.reset(h.seq);
  p.reasm.reset();
  p.credit_in.reset();
  p.credit_sent = kCreditUnlimited;
  p.ack_deadline = kNever;
  p.deliver_blocked = false;
}

void Engine::on_hello(Peer& p, const Header& h, uint64_t now) {
  const bool dead = p.s.state == PeerState::kDead;
  bool changed = true;  // what we know of the peer changed
  switch (classify_hello(p.s, h.src_epoch, h.src_token)) {
    case HelloVerdict::kStale:
      return count(p, Reject::kStaleEpoch);
    case HelloVerdict::kWrongToken:
      return count(p, Reject::kWrongToken);
    case HelloVerdict::kRestart:
      p.c.resets++;
      reset_session(p, true);  // the old incarnation's data must not reach the new one
      learn_peer(p, h);
      break;
    case HelloVerdict::kFirst:
      if (dead) reset_session(p, false);  // died before the handshake; a first HELLO revives
      learn_peer(p, h);
      break;
    case HelloVerdict::kSame:
      if (dead) return count(p, Reject::kPeerDead);
      if (h.seq != p.s.peer_isn) {
        // A HELLO addressed to us with another ISN replaces one learnt from a stale HELLO,
        // but only while no data of the old ISN was taken.
        if (h.dst_token != token_ || !rx_untouched(p)) return count(p, Reject::kStaleEpoch);
        p.s.peer_isn = h.seq;
        p.rx.reset(h.seq);
      } else {
        changed = false;
      }
      break;
  }
  p.last_heard = now;
  p.c.pkts_received++;
  if (h.dst_token == token_ && h.ack == p.s.my_isn) p.s.confirmed = true;
  // Answer every HELLO; answer a HELLO_ACK only if it taught us something (no ping-pong).
  if (h.type == FrameType::kHello || changed) p.hello_ack_now = true;
  if (p.s.known && p.s.confirmed && p.s.state == PeerState::kConnecting) {
    p.s.state = PeerState::kEstablished;
    p.hello_deadline = kNever;
    app_->on_peer_up(p.id);
  }
}

bool Engine::session_ok(Peer& p, const Header& h) {
  Reject r = Reject::kNone;
  if (p.s.state == PeerState::kDead) {
    r = Reject::kPeerDead;
  } else if (!p.s.known) {
    r = Reject::kNoSession;
  } else if (h.src_epoch != p.s.epoch) {
    r = seq_lt(h.src_epoch, p.s.epoch) ? Reject::kStaleEpoch : Reject::kNoSession;
  } else if (h.src_token != p.s.token || h.dst_token != token_) {
    r = Reject::kWrongToken;
  }
  if (r == Reject::kNone) return true;
  count(p, r);
  return false;
}

void Engine::reset_session(Peer& p, bool notify) {
  const uint64_t discarded = p.tx.messages_held();
  p.c.discarded_msgs += discarded;
  p.s = Session{};
  p.s.my_isn = cfg_.initial_seq ? *cfg_.initial_seq : static_cast<Seq>(rng_.next());
  p.tx.reset(p.s.my_isn);
  p.rx.reset(0);
  p.reasm.reset();
  p.credit_out.reset();
  p.credit_in.reset();
  p.credit_sent = kCreditUnlimited;
  p.rto_deadline = p.ack_deadline = p.ack_req_deadline = p.tlp_deadline = kNever;
  p.unsent_bytes = 0;
  p.rack_frame = p.goback_ns = 0;
  p.retx_cursor = p.unreported_from = p.unreported_to = p.s.my_isn;
  p.retx_count = p.fast_pending = 0;
  p.ack_required = p.probe_now = p.ack_now = p.nack_now = false;
  p.deliver_blocked = p.hello_ack_now = p.tx_blocked = false;
  p.hello_deadline = now_;
  p.hello_interval = cfg_.rto_initial_ns;
  p.last_heard = now_;  // a fresh session gets a full dead_after to complete
  if (notify) app_->on_peer_reset(p.id, discarded);
}

void Engine::declare_dead(Peer& p) {
  const uint64_t discarded = p.tx.messages_held();
  const Session keep = p.s;
  reset_session(p, false);
  // Keep the identity: the same incarnation stays dead, a higher epoch revives the peer.
  p.s.known = keep.known;
  p.s.epoch = keep.epoch;
  p.s.token = keep.token;
  p.s.state = PeerState::kDead;
  p.hello_deadline = kNever;
  p.c.deaths++;
  app_->on_peer_dead(p.id, discarded);
}

bool Engine::send_hello(Peer& p, bool is_ack, uint64_t now) {
  HeaderOut h{is_ack ? FrameType::kHelloAck : FrameType::kHello,
              0,
              cfg_.node_id,
              p.id,
              cfg_.epoch,
              token_,
              p.s.known ? p.s.token : 0,
              p.s.my_isn,
              p.s.known ? p.s.peer_isn : 0,
              0};
  encode_header(h, txbuf_.get());
  if (!transmit(p, sizeof(FrameHeader), h.type, nullptr, now)) return false;
  p.c.hellos_sent++;
  return true;
}

}  // namespace imago::rel
