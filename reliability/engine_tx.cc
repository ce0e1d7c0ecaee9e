// SPDX-License-Identifier: BSD-3-Clause
// Transmit path: coalescing queued units into frames (retransmissions first), piggy-backing
// ACK/SACK/NACK/credit on every frame, and the sender-requested ACK water marks.
#include <cstring>

#include "reliability/engine.h"
#include "reliability/peer.h"

namespace imago::rel {

/** What the frame being built carries; applied to the peer only once the sink took it. */
struct FrameMeta {
  Seq ack;
  uint32_t credit;
  bool nack;
  bool ack_req;
};

size_t Engine::begin_frame(Peer& p, bool with_records, FrameMeta* m) {
  m->ack = p.rx.nxt();
  m->credit = p.credit_in.advertise(p.rx.free_from_ack(), p.rx.has_gap());
  m->nack = p.nack_now;
  m->ack_req = p.probe_now || (with_records && p.ack_required);
  uint8_t flags = static_cast<uint8_t>((m->nack ? frame_flag::kNack : 0) |
                                       (m->ack_req ? frame_flag::kAckReq : 0));
  HeaderOut h{with_records ? FrameType::kData : FrameType::kAck,
              flags,
              cfg_.node_id,
              p.id,
              cfg_.epoch,
              token_,
              p.s.token,
              p.tx.nxt(),
              m->ack,
              m->credit};
  uint8_t* buf = txbuf_.get();
  encode_header(h, buf);
  size_t len = sizeof(FrameHeader);
  if (!cfg_.selective_repeat || !p.rx.has_gap()) return len;
  // SACK: the runs of units held beyond the cumulative ACK, lowest first.
  uint8_t n = 0;
  Seq s = p.rx.nxt();
  while (n < cfg_.max_sack && seq_lt(s, p.rx.high())) {
    while (seq_lt(s, p.rx.high()) && !p.rx.slot(s).present) ++s;
    if (!seq_lt(s, p.rx.high())) break;
    const Seq start = s;
    while (seq_lt(s, p.rx.high()) && p.rx.slot(s).present) ++s;
    encode_sack(buf, n++, start, s);
  }
  set_sack_count(buf, n);
  return len + size_t{n} * sizeof(SackRange);
}

bool Engine::transmit(Peer& p, size_t len, FrameType t, const FrameMeta* m, uint64_t now) {
  finish_frame(txbuf_.get(), len, cfg_.crc);
  if (!frames_->send_frame(p.id, {txbuf_.get(), len})) {
    p.c.tx_backpressure++;
    p.tx_blocked = true;
    return false;
  }
  p.tx_blocked = false;
  p.last_sent = now;
  p.c.pkts_sent++;
  if (m == nullptr) return true;  // handshake frame: no ACK state
  if (t == FrameType::kAck) p.c.ack_only_sent++;
  if (m->nack) {
    p.c.nacks_sent++;
    p.last_nack_ns = now;
    p.last_nack_seq = m->ack;
  }
  if (m->ack_req) {
    p.c.ack_reqs_sent++;
    p.ack_req_deadline = now + cfg_.ack_delay_ns;
  }
  p.nack_now = p.ack_now = p.probe_now = false;
  p.ack_deadline = kNever;
  p.credit_sent = m->credit;
  return true;
}

bool Engine::want_data(const Peer& p, uint64_t now, bool all) const {
  if (p.s.state != PeerState::kEstablished) return false;
  if (p.retx_count > 0 && p.credit_out.allows(p.retx_cursor)) return true;
  const SendWindow& tx = p.tx;
  if (!tx.has_unsent() || !p.credit_out.allows(tx.nxt())) return false;
  return all || p.fast_pending > 0 || p.unsent_bytes >= cfg_.mtu ||
         now - tx.at(tx.nxt()).enq_ns >= cfg_.coalesce_ns;
}

uint32_t Engine::build_records(Peer& p, uint8_t* buf, size_t* len, Seq* first, uint32_t* n_new) {
  SendWindow& tx = p.tx;
  uint32_t n = 0;
  Seq prev = 0;
  auto add = [&](Seq s) {
    const TxUnit& u = tx.at(s);
    const bool expl = n > 0 && s != prev + 1;
    const size_t need = record_header_size(u.len, expl) + u.len;
    if (*len + need > cfg_.mtu || n == rec_seqs_cap_) return false;
    *len += encode_record_header(buf + *len, u.rec_flags, s, expl, u.len);
    if (u.len) std::memcpy(buf + *len, tx.payload(u).data(), u.len);
    *len += u.len;
    if (n == 0) *first = s;
    prev = s;
    rec_seqs_[n++] = s;
    return true;
  };
  // Retransmissions first, oldest first, within the credit.
  uint32_t left = p.retx_count;
  for (Seq s = p.retx_cursor; left > 0 && s != tx.nxt(); ++s) {
    if (!tx.at(s).retx) {
      if (s == p.retx_cursor) p.retx_cursor = s + 1;  // keep the cursor on the first one
      continue;
    }
    if (!p.credit_out.allows(s) || !add(s)) return n;
    --left;
  }
  *n_new = 0;
  for (Seq s = tx.nxt(); s != tx.end() && p.credit_out.allows(s); ++s, ++*n_new)
    if (!add(s)) break;
  return n;
}

void Engine::commit_records(Peer& p, uint32_t n, uint32_t n_new, uint64_t now) {
  SendWindow& tx = p.tx;
  bool retx = false;
  Seq last_retx = 0;
  // Frames are numbered for loss detection: the units of one frame arrive or vanish
  // together, and frames built in one clock tick share a timestamp but not a number.
  const uint64_t frame = ++p.frames_out;
  for (uint32_t i = 0; i < n; ++i) {
    const Seq s = rec_seqs_[i];
    TxUnit& u = tx.at(s);
    if (u.retx) {
      u.retx = false;
      --p.retx_count;
      p.c.msgs_retransmitted++;
      retx = true;
      last_retx = s;
    } else if (u.tx_count == 0) {
      p.c.units_sent++;
      u.first_tx_ns = now;
      p.unsent_bytes -= u.len + record_header_size(u.len, false);
      if (u.rec_flags & rec_flag::kFast) --p.fast_pending;
    }
    u.tx_count++;
    u.last_tx_ns = now;
    u.frame = frame;
    tx.flight_push(s);
  }
  for (uint32_t i = 0; i < n_new; ++i) tx.advance_nxt();
  if (retx) p.retx_cursor = last_retx + 1;
  if (p.rto_deadline == kNever) p.rto_deadline = now + p.rto.rto();
  if (n_new > 0) arm_tail_probe(p, now);  // the tail moved: probe after a PTO from now
}

uint32_t Engine::flush(Peer& p, uint64_t now, bool all) {
  if (p.s.state == PeerState::kDead) return 0;
  uint32_t sent = 0;
  if (p.hello_ack_now) {
    if (!send_hello(p, true, now)) return 0;
    p.hello_ack_now = false;
    ++sent;
  }
  if (!p.s.known) return sent;  // ACKs need the peer's token
  for (;;) {
    const bool data = want_data(p, now, all);
    const bool control = p.ack_now || p.nack_now || p.probe_now;
    if (!data && !control) break;
    FrameMeta m;
    size_t len = begin_frame(p, data, &m);
    uint32_t n = 0, n_new = 0;
    Seq first = p.tx.nxt();
    if (data) n = build_records(p, txbuf_.get(), &len, &first, &n_new);
    if (n == 0 && !control) break;  // retransmissions held back by credit
    const FrameType t = n > 0 ? FrameType::kData : FrameType::kAck;
    txbuf_[offsetof(FrameHeader, type)] = static_cast<uint8_t>(t);
    set_seq(txbuf_.get(), first);
    if (!transmit(p, len, t, &m, now)) break;
    ++sent;
    if (n == 0) break;
    commit_records(p, n, n_new, now);
  }
  if (p.s.state == PeerState::kEstablished && p.tx.has_unsent() &&
      !p.credit_out.allows(p.tx.nxt())) {
    p.c.credit_stalls++;
    // Nothing in flight would bring a credit update back: probe after an RTO.
    if (!p.tx.has_outstanding() && p.rto_deadline == kNever) p.rto_deadline = now + p.rto.rto();
  }
  return sent;
}

void Engine::update_ack_required(Peer& p) {
  const SendWindow& tx = p.tx;
  // Free space against the water marks, the tighter of slots and bytes, in percent. Runs
  // for every message sent: multiplications, no division.
  const uint64_t free_slots = uint64_t{tx.free_slots()} * 100, slots = tx.slots();
  const uint64_t free_bytes = tx.free_bytes() * 100, bytes = tx.capacity_bytes();
  auto below = [&](uint64_t pct) { return free_slots < pct * slots || free_bytes < pct * bytes; };
  auto above = [&](uint64_t pct) { return free_slots > pct * slots && free_bytes > pct * bytes; };
  if (!p.ack_required && below(cfg_.ack_req_low_pct)) {
    p.ack_required = true;
  } else if (p.ack_required && above(cfg_.ack_req_high_pct)) {
    p.ack_required = false;
    p.ack_req_deadline = kNever;
  }
}

}  // namespace imago::rel
