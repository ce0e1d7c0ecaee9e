// SPDX-License-Identifier: BSD-3-Clause
// Transmit path: held frames out (repairs first, each as it first went out), piggy-backing
// ACK/SACK/NACK/credit on every frame, and the sender-requested ACK water marks.
#include <algorithm>
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
  // In ACK-required state a DATA frame asks once per ack_req_spacing_ units sent: an ACK for
  // every frame of a large window would cost the receiver more than the data.
  m->ack_req = p.probe_now || (with_records && ((p.ack_required && p.tx.nxt() - p.ack_req_seq >= ack_req_spacing_) ||
                                                 delay_ask(p)));
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
  // SACK: what is held beyond the cumulative ACK, as much as the frame holds (a DATA frame
  // keeps its room for records).
  const uint32_t n = build_sack(p, buf, with_records ? cfg_.max_sack : ack_sack_max_);
  return len + size_t{n} * sizeof(SackRange);
}

bool Engine::transmitted(Peer& p, bool taken, uint64_t now) {
  if (!taken) {
    p.c.tx_backpressure++;
    p.tx_blocked = true;
    return false;
  }
  p.tx_blocked = false;
  p.last_sent = now;
  p.c.pkts_sent++;
  return true;
}

bool Engine::transmit(Peer& p, size_t len, FrameType t, const FrameMeta* m, uint64_t now) {
  finish_frame(txbuf_.get(), len, cfg_.crc);
  if (!transmitted(p, frames_->send_frame(p.id, {txbuf_.get(), len}), now)) return false;
  if (m != nullptr) carried(p, t, *m, now);  // none on a handshake frame
  return true;
}

void Engine::carried(Peer& p, FrameType t, const FrameMeta& m, uint64_t now) {
  if (t == FrameType::kAck) p.c.ack_only_sent++;
  if (m.nack) {
    p.c.nacks_sent++;
    p.last_nack_ns = now;
    p.last_nack_seq = m.ack;
  }
  if (m.ack_req) {
    p.c.ack_reqs_sent++;
    p.ack_req_seq = p.tx.nxt();
    p.ack_req_deadline = now + cfg_.ack_delay_ns;
  }
  p.nack_now = p.ack_now = p.probe_now = false;
  p.ack_deadline = kNever;
  p.credit_sent = m.credit;
}

bool Engine::want_data(const Peer& p, uint64_t now, bool all) const {
  if (p.s.state != PeerState::kEstablished) return false;
  const SendWindow& tx = p.tx;
  if (!tx.has_unsent() || !p.credit_out.allows(tx.nxt())) return false;
  if (!delay_allows(p, now)) return false;
  return all || p.fast_pending > 0 || p.unsent_bytes >= cfg_.mtu ||
         now - tx.unsent_enq_ns() >= cfg_.coalesce_ns;
}

bool Engine::send_held(Peer& p, uint32_t pos, bool again) {
  SendWindow& tx = p.tx;
  const TxFrame& f = tx.frame(pos);
  uint8_t* slot = tx.slot_of(pos);
  std::span<uint8_t> bytes{slot + f.start, f.len};
  const uint8_t why = !again ? send_why::kFirst : f.probe ? send_why::kProbe : send_why::kLost;
  const bool took = f.ext != nullptr ? frames_->send_ext(p.id, tx.sink_memory() ? slot : nullptr,
                                                         bytes.first(f.len - f.ext_len), {f.ext, f.ext_len}, why)
                    : tx.sink_memory() ? frames_->send_held(p.id, slot, bytes, why)
                                       : frames_->send_frame(p.id, bytes);
  if (took) {
    const uint8_t path = std::min<uint8_t>(frames_->sent_path(), kMaxPaths - 1);
    tx.frame(pos).path = path;
    paths_used_ |= static_cast<uint8_t>(1u << path);
  }
  return took;
}

int Engine::resend_lost(Peer& p, uint64_t now) {
  // Repairs first, oldest first, within the credit: the frame that carried the unit, as it
  // went out (its header's ACK and credit are stale then; the peer takes stale ones as
  // reordered, and the fresh ones follow in the next frame).
  SendWindow& tx = p.tx;
  for (Seq s = p.retx_cursor; tx.retx_frames() > 0 && s != tx.nxt();) {
    const uint32_t pos = tx.fpos(s);
    if (!tx.frame(pos).retx) {
      const bool first = s == p.retx_cursor;
      s = tx.frame_end(pos);
      if (first) p.retx_cursor = s;  // keep the cursor on the first one
      continue;
    }
    if (!p.credit_out.allows(s)) return 0;
    if (!transmitted(p, send_held(p, pos, true), now)) return -1;
    commit_frame(p, pos, now);
    return 1;
  }
  return 0;
}

bool Engine::send_new_frame(Peer& p, size_t hdr_len, const FrameMeta* m, uint64_t now) {
  SendWindow& tx = p.tx;
  uint32_t pos;
  if (!tx.next_unsent(&pos)) return false;
  TxFrame& f = tx.frame(pos);
  // The header and SACK ranges built in txbuf_ go right before the frame's records.
  set_seq(txbuf_.get(), f.first);
  f.start = tx.records_offset() - static_cast<uint32_t>(hdr_len);
  f.len = static_cast<uint32_t>(hdr_len) + f.rec_len;
  uint8_t* frame = tx.slot_of(pos) + f.start;
  std::memcpy(frame, txbuf_.get(), hdr_len);
  finish_frame(frame, f.len - f.ext_len, cfg_.crc, {f.ext, f.ext_len});  // the payload by reference, if any
  if (!transmitted(p, send_held(p, pos, false), now)) return false;
  carried(p, FrameType::kData, *m, now);
  commit_frame(p, pos, now);
  if (m->ack_req) p.delay.asked(f.number, now, delay_probe(p));
  tx.mark_sent();
  arm_tail_probe(p, now);  // the tail moved: probe after a PTO from now
  return true;
}

void Engine::commit_frame(Peer& p, uint32_t pos, uint64_t now) {
  SendWindow& tx = p.tx;
  TxFrame& f = tx.frame(pos);
  const uint64_t proof = f.number - f.proof_back;  // what its delivery proved so far
  const bool probe = f.probe;
  if (f.retx) {
    // Units the peer acknowledged or holds (an ACK or SACK inside the frame) go again as
    // duplicates it drops: they are not counted as retransmitted.
    p.c.msgs_retransmitted += tx.frame_missing(pos);
    tx.clear_retx(pos);
    const Seq end = tx.frame_end(pos);
    if (seq_lt(p.retx_cursor, end)) p.retx_cursor = end;
  } else if (f.tx_count == 0) {
    p.c.units_sent += f.n;
    f.first_tx_ns = now;
    p.unsent_bytes -= f.rec_len;
    p.fast_pending -= f.fast;
  }
  // Transmissions are numbered for loss detection: frames sent in one clock tick share a
  // timestamp but not a number.
  f.number = ++p.frames_out;
  // A probe went out after a PTO or an RTO of silence: its answer is its own. Any other
  // repair's answer may be the original's, overtaken by the repair (proof_back).
  f.proof_back = f.tx_count == 0 || probe ? 0 : static_cast<uint32_t>(std::min<uint64_t>(f.number - proof, UINT32_MAX));
  f.tx_count++;
  f.last_tx_ns = now;
  tx.flight_push(pos);
  if (p.rto_deadline == kNever) p.rto_deadline = now + p.rto.rto();
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
    if (p.s.state == PeerState::kEstablished && p.tx.retx_frames() > 0) {
      const int r = resend_lost(p, now);
      if (r < 0) break;
      if (r > 0) {
        ++sent;
        continue;
      }
    }
    const bool data = want_data(p, now, all);
    const bool control = p.ack_now || p.nack_now || p.probe_now;
    if (!data && !control) break;
    FrameMeta m;
    const size_t len = begin_frame(p, data, &m);
    if (data ? !send_new_frame(p, len, &m, now) : !transmit(p, len, FrameType::kAck, &m, now))
      break;
    ++sent;
    if (!data) break;
  }
  if (p.s.state == PeerState::kEstablished && p.tx.has_unsent() &&
      !p.credit_out.allows(p.tx.nxt())) {
    p.c.credit_stalls++;
    // Nothing in flight would bring a credit update back: probe after an RTO.
    if (!p.tx.has_outstanding() && p.rto_deadline == kNever) p.rto_deadline = now + p.rto.rto();
  }
  return sent;
}

bool Engine::delay_allows(const Peer& p, uint64_t now) const {
  // The frames in flight are known only when the last ACK could list all the peer holds:
  // beyond a long hole it cannot, what it holds looks in flight, and a cap would stop the
  // stream until an RTO.
  return p.unreported_from != p.unreported_to || p.delay.allows(p.tx.flight_frames(), now);
}

bool Engine::delay_probe(const Peer& p) const {
  // Below a receive burst in flight no queue builds that the cap would cut: no probe, so
  // that a request and its answer are not joined by an ACK of their own.
  return cfg_.delay_cap && p.delay.want_probe(now_) && p.tx.flight_frames() >= DelayCap::kLeast;
}

bool Engine::delay_ask(const Peer& p) const {
  return delay_probe(p) || p.delay.want_clock(p.frames_out + 1, now_);
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
    p.ack_req_seq = p.tx.nxt() - ack_req_spacing_;  // the next frame asks
  } else if (p.ack_required && above(cfg_.ack_req_high_pct)) {
    p.ack_required = false;
    p.ack_req_deadline = kNever;
  }
}

}  // namespace imago::rel
