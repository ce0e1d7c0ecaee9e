// SPDX-License-Identifier: BSD-3-Clause
// Timers: handshake retries, retransmission timeout, ACK timer and refresh, ACK-request
// refresh, death after silence, and the deadline the caller should poll at next.
#include <algorithm>

#include "reliability/engine.h"
#include "reliability/peer.h"

namespace imago::rel {

uint32_t Engine::poll(uint64_t now_ns) {
  now_ = now_ns;
  uint32_t sent = 0;
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.tx.ext_pending()) p.tx.reclaim(), settle_ext(p);  // messages by reference in parked slots
    run_timers(p, now_ns);
    sent += flush(p, now_ns, false);
  }
  group_poll(now_ns);
  return sent;
}

void Engine::credit_absence(uint64_t now, uint64_t ns) {
  // Two nodes on one lcore: the first polled after a stall would otherwise declare the
  // other dead before that one could say a word; a peer in another process has its frames
  // waiting, but perhaps behind more than one burst.
  for (auto& pp : peers_) {
    if (pp->s.state == PeerState::kDead) continue;
    pp->last_heard = std::min(now, pp->last_heard + ns);
    // The answers to what we sent before may be waiting in the rx ring, or (two nodes on one
    // lcore) not written yet: one RTO from now before calling it lost.
    if (pp->rto_deadline != kNever) pp->rto_deadline = std::max(pp->rto_deadline, now + pp->rto.rto());
    pp->c.absences++;
  }
  for (uint32_t i = 0; i < cfg_.group_sources; ++i) {
    GroupTx& t = gtx_[i];
    if (t.g == 0 || t.nack) continue;
    for (GroupMember& m : t.members) m.progress_ns = std::min(now, held_back_since(t, m) + ns);
  }
}

void Engine::run_timers(Peer& p, uint64_t now) {
  if (p.s.state == PeerState::kDead) {
    // Asked now and then whether it is back: two nodes that each declared the other dead
    // (a partition, a stalled process) would otherwise never speak again.
    if (now >= p.hello_deadline) {
      send_hello(p, false, now);
      p.hello_deadline = now + dead_probe_ns();
    }
    return;
  }
  if (now - p.last_heard >= cfg_.dead_after_ns) return declare_dead(p);
  if (p.s.state == PeerState::kConnecting && now >= p.hello_deadline) {
    if (send_hello(p, false, now)) {
      p.hello_deadline = now + p.hello_interval;
      p.hello_interval = std::min(p.hello_interval * 2, cfg_.rto_max_ns);
    } else {
      p.hello_deadline = now + cfg_.tx_retry_ns;
    }
  }
  if (p.deliver_blocked) try_deliver(p);
  if (now >= p.rto_deadline) on_rto(p, now);
  if (now >= p.tlp_deadline) on_tail_probe(p);
  if (now >= p.ack_deadline) p.ack_now = true;
  if (p.ack_required && p.tx.has_outstanding() && now >= p.ack_req_deadline) {
    p.probe_now = true;  // Pupa: every ACK-timer tick re-sends pending ACK requests
    p.ack_req_deadline = now + cfg_.ack_delay_ns;
  }
  if (p.s.known && now - p.last_sent >= keepalive_ns()) p.ack_now = true;  // refresh
}

// Nothing in flight, and what would go next (a queued repair first, else a new unit) lies
// beyond the peer's credit: only a credit update moves the stream.
bool Engine::credit_starved(const Peer& p) const {
  uint32_t oldest;
  if (p.tx.flight_oldest(&oldest)) return false;
  if (p.tx.retx_frames() > 0) return !p.credit_out.allows(p.retx_cursor);
  return p.tx.has_unsent() && !p.credit_out.allows(p.tx.nxt());
}

void Engine::on_rto(Peer& p, uint64_t now) {
  SendWindow& tx = p.tx;
  p.rto_deadline = kNever;
  if (credit_starved(p)) {
    // The zero-window probe (RFC 9293 3.8.6.1), for repairs as for new data: the credit
    // that would free them may have been lost, and the peer sends none unasked.
    p.c.rto_expired++;
    p.probe_now = true;
    p.rto.backoff();
    p.rto_deadline = now + p.rto.rto();
  } else if (tx.has_outstanding()) {
    const uint64_t rto = p.rto.rto();
    uint32_t oldest;  // the frame in flight transmitted longest ago (not SACKed, not queued)
    const uint64_t sent = tx.flight_oldest(&oldest) ? tx.frame(oldest).last_tx_ns : now;
    if (now - sent < rto) {  // everything was (re)sent recently: wait for the oldest
      p.rto_deadline = sent + rto;
      return;
    }
    p.c.rto_expired++;
    p.c.pkts_lost++;
    // Repair selectively: resend only the oldest unacknowledged unit, as a probe. Marking the
    // whole window resent thousands of units the peer holds beyond its few SACK ranges, and
    // an expiry is often spurious (a descheduled receiver). The ACK the probe brings back
    // marks the rest (RACK in detect_losses): SACKed units never, units transmitted before
    // the probe and still missing then, a lost tail included.
    mark_lost(p, tx.una(), tx.una() + 1, now);
    if (TxFrame& f = tx.frame(tx.fpos(tx.una())); f.retx) f.probe = true;  // a guess, as the sink is told
    p.tlp_deadline = kNever;
    p.rto.backoff();
    p.probe_now = true;  // ask for an ACK with the repair, so the next one is not a guess
    p.rto_deadline = now + p.rto.rto();
  }
}

void Engine::arm_tail_probe(Peer& p, uint64_t now) {
  // PTO (RFC 8985 7.2): two smoothed RTTs, and at least the peer's ACK delay plus two path
  // RTTs, since a unit sent without ACK request is answered only when its ACK timer fires.
  // Without an RTT sample the RTO alone decides.
  if (!p.tx.has_outstanding() || !p.rto.has_sample()) {
    p.tlp_deadline = kNever;
    return;
  }
  const uint64_t pto = std::max(2 * p.rto.srtt(), cfg_.ack_delay_ns + 2 * p.rto.min_rtt());
  p.tlp_deadline = now + pto;
}

void Engine::on_tail_probe(Peer& p) {
  // Nothing was heard for a PTO: resend the newest unit with an ACK request. If the tail was
  // lost the probe repairs its last unit, and the SACK it brings back marks the rest (RACK),
  // after one round trip instead of one RTO; a lone lost message (a ping) is simply resent.
  // When the peer holds the newest unit, what is missing is a repair that vanished too: the
  // probe resends the unit in flight the longest instead. One probe, until new data, an
  // advancing ACK or a SACK of newer frames re-arms it; the RTO stays armed.
  p.tlp_deadline = kNever;
  if (p.s.state != PeerState::kEstablished || !p.tx.has_outstanding()) return;
  Seq probe = p.tx.nxt() - 1;
  if (p.tx.sacked(probe)) {
    uint32_t pos;
    if (!p.tx.flight_oldest(&pos)) return;
    probe = p.tx.frame_first(pos);
  }
  if (!p.credit_out.allows(probe) || mark_lost(p, probe, probe + 1, kNever) == 0) return;
  p.tx.frame(p.tx.fpos(probe)).probe = true;  // the sink is told it is a guess
  p.c.tail_probes++;
  p.probe_now = true;
}

uint64_t Engine::peer_deadline(const Peer& p) const {
  if (p.s.state == PeerState::kDead) return p.hello_deadline;
  const bool established = p.s.state == PeerState::kEstablished;
  // ACKs, NACKs and probes wait for the peer's token (flush() sends none before): until it is
  // known they are not work that is due, or a caller would spin on them.
  const bool control = p.s.known && (p.ack_now || p.nack_now || p.probe_now);
  const bool pending = control || p.hello_ack_now ||
                       (established && p.tx.retx_frames() > 0 && p.credit_out.allows(p.retx_cursor));
  // Work is due now, unless the sink pushed back: then retry shortly, never spin.
  if (pending) return p.tx_blocked ? now_ + cfg_.tx_retry_ns : now_;
  uint64_t d = std::min({p.rto_deadline, p.tlp_deadline, p.ack_deadline,
                         p.last_heard + cfg_.dead_after_ns});
  if (p.s.state == PeerState::kConnecting) d = std::min(d, p.hello_deadline);
  if (p.ack_required && p.tx.has_outstanding()) d = std::min(d, p.ack_req_deadline);
  if (p.s.known) d = std::min(d, p.last_sent + keepalive_ns());
  if (established && p.tx.has_unsent() && p.credit_out.allows(p.tx.nxt()) && delay_allows(p, now_)) {
    const bool now_due = p.fast_pending > 0 || p.unsent_bytes >= cfg_.mtu;
    uint64_t due = now_due ? now_ : p.tx.unsent_enq_ns() + cfg_.coalesce_ns;
    d = std::min(d, p.tx_blocked ? std::max(due, now_ + cfg_.tx_retry_ns) : due);
  }
  if (p.deliver_blocked) d = std::min(d, now_ + cfg_.deliver_retry_ns);
  return d;
}

uint64_t Engine::next_deadline() const {
  uint64_t d = kNever;
  for (const auto& p : peers_) d = std::min(d, peer_deadline(*p));
  return std::min(d, group_deadline_);
}

}  // namespace imago::rel
