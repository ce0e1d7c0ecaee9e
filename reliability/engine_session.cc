// SPDX-License-Identifier: BSD-3-Clause
// Sessions: the handshake, the proof a claimed restart must give before it resets the
// session (challenge and echo), and death after silence.
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

// kSame with another ISN: a HELLO addressed to us replaces an ISN learnt from a stale
// HELLO or a challenge, but only while no data of the old ISN was taken. One addressed to
// another token is the peer's challenge to someone claiming to be us: not for us.
Reject adopt_isn(Peer& p, const Header& h, uint64_t my_token, bool* changed) {
  if (h.seq == p.s.peer_isn) {
    *changed = false;
    return Reject::kNone;
  }
  if (h.dst_token != my_token) return Reject::kWrongToken;
  if (!rx_untouched(p)) return Reject::kStaleEpoch;
  p.s.peer_isn = h.seq;
  p.rx.reset(h.seq);
  return Reject::kNone;
}

}  // namespace

void Engine::learn_peer(Peer& p, const Header& h) {
  p.s.known = true;
  p.s.epoch = h.src_epoch;
  p.s.token = h.src_token;
  p.s.peer_isn = h.seq;
  release_held(p);
  p.rx.reset(h.seq);
  drop_reassembly(p);
  p.credit_in.reset();
  p.credit_sent = kCreditUnlimited;
  p.ack_deadline = kNever;
  p.deliver_blocked = false;
}

void Engine::on_hello(Peer& p, const Header& h, uint64_t now) {
  const bool dead = p.s.state == PeerState::kDead;
  bool changed = true;  // what we know of the peer changed
  switch (classify_hello(p.s, {h.src_epoch, h.src_token, h.dst_token, h.ack}, token_)) {
    case HelloVerdict::kUnproven:
      return challenge(p, h, now);
    case HelloVerdict::kForged:
      return count(p, Reject::kUnprovenRestart);
    case HelloVerdict::kProven:
      p.c.resets++;
      // The old incarnation's data must not reach the new one. Our ISN is the challenge the
      // peer echoed, so this very frame confirms the new session.
      reset_session(p, true, p.s.cand.isn);
      learn_peer(p, h);
      break;
    case HelloVerdict::kFirst:
      if (dead) reset_session(p, false, new_isn());  // died before the handshake; revive
      learn_peer(p, h);
      break;
    case HelloVerdict::kSame:
      // The incarnation we declared dead is back, or (a new ISN on our established session,
      // addressed to us) it declared us dead and came back: either way a new session, both
      // ISNs new, counted and told as a restart (the unconfirmed were dropped at the death).
      // In the second case it did not restart: it expired us from its group streams.
      if (dead || (p.s.state == PeerState::kEstablished && h.seq != p.s.peer_isn && h.dst_token == token_)) {
        p.c.resets++;
        reset_session(p, true, new_isn(), dead ? GroupEvent::kGone : GroupEvent::kDropped);
        learn_peer(p, h);
        break;
      }
      if (Reject r = adopt_isn(p, h, token_, &changed); r != Reject::kNone) return count(p, r);
      break;
  }
  accept_hello(p, h, changed, now);
}

void Engine::accept_hello(Peer& p, const Header& h, bool changed, uint64_t now) {
  p.settings_told = false;
  const uint64_t stated = h.hello_max_message != 0 ? h.hello_max_message : cfg_.max_message_size;
  if (stated != p.peer_max_message) {
    p.peer_max_message = stated;
    peers_max_message_ = UINT64_MAX;
    for (const auto& q : peers_) peers_max_message_ = std::min(peers_max_message_, q->peer_max_message);
    ++peer_settings_gen_;
  }
  p.last_heard = now;
  p.c.pkts_received++;
  if (h.type == FrameType::kHello) p.hello_echo = h.credit;
  if (h.dst_token == token_ && h.ack == p.s.my_isn) {
    sample_handshake(p, h, now);
    p.s.confirmed = true;
  }
  // Answer every HELLO; answer a HELLO_ACK only if it taught us something (no ping-pong).
  if (h.type == FrameType::kHello || changed) p.hello_ack_now = true;
  if (p.s.confirmed) confirm(p);
}

void Engine::sample_handshake(Peer& p, const Header& h, uint64_t now) {
  // Without it the first data sample would set min_rtt; when an ACK blackout held that
  // unit's answer (go-back-N then resends everything, and Karn forbids more samples), it
  // stays at the blackout for good and spares every repair. A floor, not a sample: the
  // answer may have waited while the peer started (its HELLO queued before its first poll),
  // and a session of group control alone would keep that as its srtt. The echo names the
  // HELLO answered: only our latest, so a late answer to an earlier one is no floor (it
  // would be an underestimate).
  if (h.type != FrameType::kHelloAck || h.credit == 0 || h.credit != p.hello_attempts) return;
  // An answer later than the first HELLO's resend waited on the peer, not the path: a member
  // started a second before its publisher kept a min_rtt of 1.28 s (an outside tester).
  if (now - p.hello_tx_ns > cfg_.rto_initial_ns) return;
  p.rto.floor_sample(now - p.hello_tx_ns);
}

void Engine::confirm(Peer& p) {
  p.s.confirmed = true;
  if (p.s.known && p.s.state == PeerState::kConnecting) {
    p.s.state = PeerState::kEstablished;
    p.hello_deadline = kNever;
    app_->on_peer_up(p.id);
  }
}

void Engine::challenge(Peer& p, const Header& h, uint64_t now) {
  // Like TCP's challenge ACK (RFC 5961 section 4): a claimed restart changes nothing; we
  // answer it at the peer's address with a fresh ISN and take it once that ISN comes back.
  count(p, Reject::kUnprovenRestart);
  Candidate& c = p.s.cand;
  if (!c.pending || c.token != h.src_token || c.epoch != h.src_epoch)
    c = Candidate{true, h.src_epoch, h.src_token, new_isn()};  // one slot: the newest claim
  if (p.challenge_ns != kNever && now - p.challenge_ns < cfg_.challenge_interval_ns) return;
  // ack: anything but the claimant's ISN, so the challenge does not confirm it: it stays
  // CONNECTING, and its HELLO retries repeat the proof until one gets through.
  const size_t len = encode_hello(p, FrameType::kHelloAck, h.src_token, c.isn, h.seq + 1);
  finish_frame(txbuf_.get(), len, cfg_.crc);
  // Not transmit(): a challenge is no traffic of the session. It must not count as our
  // keep-alive (last_sent), or a HELLO flood would starve the peer of ACK refreshes.
  if (!frames_->send_frame(p.id, {txbuf_.get(), len})) {
    p.c.tx_backpressure++;  // the claimant's next HELLO gets the challenge
    return;
  }
  p.challenge_ns = now;
  p.c.pkts_sent++;
  p.c.hellos_sent++;
  p.c.challenges_sent++;
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
  } else if (!p.s.confirmed && h.ack - p.s.my_isn > p.tx.nxt() - p.s.my_isn) {
    // Before our handshake is confirmed, a frame must show it knows our ISN: its ACK lies in
    // what we sent from it. Whoever claimed the peer's identity first (a HELLO of a node
    // never heard) and learnt our token elsewhere gets nothing delivered without it.
    r = Reject::kNoSession;
  }
  if (r == Reject::kNone) {
    // It carries our token and an ACK in our sequence space: the peer knows both, as a
    // HELLO_ACK would show. Our handshake is confirmed by it (the HELLO_ACK may be lost).
    if (!p.s.confirmed) confirm(p);
    return true;
  }
  count(p, r);
  return false;
}

Seq Engine::new_isn() {
  // A peer that declared us dead and came back is known by its new ISN alone (on_hello()):
  // a fixed one repeated would make its new session a continuation of the old here. Fixed
  // ones step by an odd stride near 2^32 / phi, not by 1: an old session's frame still on
  // the wire (same incarnations, same tokens) would carry the next session's first numbers
  // and be delivered in it again (the engine fuzzer: a message delivered twice).
  constexpr Seq kStride = 0x9E3779B9u;
  return cfg_.initial_seq ? *cfg_.initial_seq + kStride * isns_drawn_++ : static_cast<Seq>(rng_.next());
}

void Engine::reset_session(Peer& p, bool notify, Seq isn, GroupEvent::Why why) {
  const uint64_t discarded = p.tx.messages_held();
  p.c.discarded_msgs += discarded;
  p.s = Session{};
  p.s.my_isn = isn;
  p.tx.reset(p.s.my_isn);
  settle_ext(p);
  release_held(p);
  p.rx.reset(0);
  drop_reassembly(p);
  p.credit_out.reset();
  p.delay.reset();
  p.credit_in.reset();
  p.credit_sent = kCreditUnlimited;
  p.rto_deadline = p.ack_deadline = p.ack_req_deadline = p.tlp_deadline = kNever;
  p.unsent_bytes = p.early_max = 0;
  p.rack_frame = p.goback_ns = 0;
  for (uint64_t& r : p.rack_path) r = 0;
  p.retx_cursor = p.unreported_from = p.unreported_to = p.s.my_isn;
  p.fast_pending = 0;
  p.ack_required = p.probe_now = p.ack_now = p.nack_now = false;
  p.deliver_blocked = p.hello_ack_now = p.tx_blocked = false;
  p.hello_deadline = now_;
  p.hello_interval = cfg_.rto_initial_ns;
  p.hello_attempts = p.hello_echo = 0;
  p.last_heard = now_;  // a fresh session gets a full dead_after to complete
  if (notify) app_->on_peer_reset(p.id, discarded);
  group_peer_gone(p, why);
}

void Engine::declare_dead(Peer& p) {
  const uint64_t discarded = p.tx.messages_held();
  const Session keep = p.s;
  reset_session(p, false, new_isn());
  // Keep the identity: the same incarnation stays dead, a higher epoch revives the peer.
  p.s.known = keep.known;
  p.s.epoch = keep.epoch;
  p.s.token = keep.token;
  p.s.state = PeerState::kDead;
  p.hello_deadline = now_ + dead_probe_ns();
  p.c.deaths++;
  app_->on_peer_dead(p.id, discarded);
}

size_t Engine::encode_hello(const Peer& p, FrameType t, uint64_t dst_token, Seq seq, Seq ack, uint32_t echo) {
  HeaderOut h{t, 0, cfg_.node_id, p.id, cfg_.epoch, token_, dst_token, seq, ack, echo};
  encode_header(h, txbuf_.get());
  HelloBody b;
  b.mtu.set(cfg_.mtu);
  b.max_message.set(own_settings().max_message);
  std::memcpy(txbuf_.get() + sizeof(FrameHeader), &b, sizeof b);
  return sizeof(FrameHeader) + sizeof b;
}

PeerSettings Engine::own_settings() const {
  return {cfg_.mtu, static_cast<uint32_t>(std::min<uint64_t>(cfg_.max_message_size, UINT32_MAX))};
}

bool Engine::settings_agree(Peer& p, const Header& h) {
  if (h.hello_mtu == 0) return true;  // states none
  // Its frames, or ours, would be lost on their way in; a message queued before the session
  // that it cannot take would be dropped once whole, acknowledged: no session, rather than a
  // stall or a loss. Told once a peer (a flood of forged values is one notice), again after a
  // HELLO that agreed. (Checked before the identity: no state changes here.)
  if (h.hello_mtu == cfg_.mtu && h.hello_max_message >= p.early_max) return true;
  count(p, Reject::kSettingsMismatch);
  if (!p.settings_told) app_->on_peer_settings(p.id, {h.hello_mtu, h.hello_max_message}, own_settings());
  p.settings_told = true;
  return false;
}

bool Engine::send_hello(Peer& p, bool is_ack, uint64_t now) {
  const FrameType t = is_ack ? FrameType::kHelloAck : FrameType::kHello;
  uint32_t attempt = p.hello_attempts + 1;
  if (attempt == 0) attempt = 1;  // 0 means "no attempt" on the wire
  const uint32_t echo = is_ack ? p.hello_echo : attempt;
  const size_t len = encode_hello(p, t, p.s.known ? p.s.token : 0, p.s.my_isn, p.s.known ? p.s.peer_isn : 0, echo);
  if (!transmit(p, len, t, nullptr, now)) return false;
  if (is_ack) {
    p.hello_echo = 0;  // answered: a later HELLO_ACK (what changed) names no HELLO
  } else {
    p.hello_attempts = attempt;
    p.hello_tx_ns = now;
  }
  p.c.hellos_sent++;
  return true;
}

}  // namespace imago::rel
