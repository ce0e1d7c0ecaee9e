// SPDX-License-Identifier: BSD-3-Clause
// Receive path: the ACK/SACK/NACK/credit side of every frame, then the records of a data
// frame into the receive window, then in-order delivery (with reassembly) to the application.
#include <algorithm>

#include "reliability/engine.h"
#include "reliability/peer.h"
#include "reliability/rack.h"

namespace imago::rel {

namespace {

inline void count(Peer& p, Reject r) { p.c.reject[static_cast<size_t>(r)]++; }

// Distances beyond this are nonsense from any honest sender (windows are <= 2^30).
constexpr int32_t kFarAway = 1 << 30;

// An honest receiver advertises at most its window (<= 2^30 units); a larger credit would
// let ack + credit wrap around the sender's own sequence space. Keep the last good limit.
void update_credit(Peer& p, Seq ack, uint32_t credit) {
  if (credit != kCreditUnlimited && credit > uint32_t{kFarAway})
    return count(p, Reject::kBadCredit);
  p.credit_out.update(ack, credit);
}

}  // namespace

void Engine::on_ack_info(Peer& p, const Header& h, std::span<const uint8_t> frame, uint64_t now) {
  SendWindow& tx = p.tx;
  const Seq ack = h.ack;
  // Only an ACK in [una, nxt] says something new. Checked by unsigned distance from una:
  // serial comparison (seq.h) says nothing for numbers exactly 2^31 apart (RFC 1982), and an
  // ACK there passed as an advance of 2^31 units (a loop of minutes, found by the fuzzer).
  if (ack - tx.una() > tx.nxt() - tx.una()) {
    // Older than what we know: reordered, nothing new (its NACK and SACK too). Beyond what we
    // sent, or older than any honest frame can be (2^30, as on the receive side): a lie.
    if (tx.una() - ack > uint32_t{kFarAway}) count(p, Reject::kBadAck);
    return;
  }
  if (ack != tx.una()) release_acked(p, ack, now);
  if (cfg_.flow_control) update_credit(p, ack, h.credit);
  Seq sack_max = ack;
  uint64_t sample_tx = 0;  // first transmission of the newest newly SACKed unit sent once
  const uint64_t rack_before = p.rack_frame;
  if (cfg_.selective_repeat && h.sack_count > 0 && !take_sack(p, h, frame, &sack_max, &sample_tx))
    return count(p, Reject::kBadSack);
  if (sample_tx != 0) p.rto.sample(now - sample_tx);
  if (p.delay.delivered(p.rack_frame, p.frames_out, now, tx.flight_frames(), tx.frames(), p.rto.min_rtt())) p.c.delay_cuts++;
  // A frame sent later than any known delivered got through: the peer is alive and the path
  // moving, so the tail-loss probe waits a PTO from now (RFC 8985 7.2: an ACK of new data
  // re-arms it). Without this a probe fires while the window's repairs are merely queued.
  if (p.rack_frame != rack_before) arm_tail_probe(p, now);
  // Without SACK_MORE the peer holds nothing beyond sack_max (always so in go-back-N).
  const bool sack_complete = !(h.flags & frame_flag::kSackMore) || !cfg_.selective_repeat;
  p.unreported_from = sack_complete ? tx.nxt() : sack_max;
  p.unreported_to = tx.nxt();
  detect_losses(p, h, frame, sack_max, sack_complete, now);
}

bool Engine::sample_ok(const Peer& p, const TxFrame& f, Seq s) const {
  // Karn: only a frame sent once gives an unambiguous RTT. And only unit @p s of it that the
  // peer reports at once: a unit the last ACK could not list (beyond its SACK entries) may
  // have been held for many round trips, and one such sample inflates the RTO by orders of
  // magnitude.
  return f.tx_count == 1 && !(seq_le(p.unreported_from, s) && seq_lt(s, p.unreported_to));
}

void Engine::release_acked(Peer& p, Seq ack, uint64_t now) {
  SendWindow& tx = p.tx;
  const TxFrame& last = tx.frame(tx.fpos(ack - 1));
  const bool last_sacked = tx.sacked(ack - 1);
  // A unit SACKed before was sampled then: it has waited for a repair below it since, and
  // sampling it now would stretch the RTT by the whole repair (Karn: sent once only).
  if (!last_sacked && sample_ok(p, last, ack - 1)) p.rto.sample(now - last.first_tx_ns);
  p.rto.reset_backoff();
  // RACK evidence: the frame that last carried it got through. Without timestamps on the
  // wire a repair's answer cannot be told from a late original's; RFC 8985's min_rtt test
  // misfires here (min_rtt carries the peer's ACK delay, or an ACK blackout), so a repair's
  // delivery proves what the frame proved before it (rack_delivered(), proof_back).
  if (!last_sacked) rack_delivered(p, last);
  tx.release_to(ack);
  if (tx.used() == 0) p.early_max = 0;  // what was queued before the session went
  settle_ext(p);
  if (seq_lt(p.retx_cursor, ack)) p.retx_cursor = ack;
  p.c.valid_acks++;
  p.rto_deadline = tx.has_outstanding() ? now + p.rto.rto() : kNever;
  arm_tail_probe(p, now);
  update_ack_required(p);
}

void Engine::detect_losses(Peer& p, const Header& h, std::span<const uint8_t> frame, Seq sack_max,
                           bool sack_complete, uint64_t now) {
  SendWindow& tx = p.tx;
  const Seq ack = h.ack;
  const bool nack = (h.flags & frame_flag::kNack) && tx.outstanding(ack);
  if (nack) p.c.valid_nacks++;
  uint32_t lost = 0;
  if (sack_max != ack) {
    // Selective repeat, RACK style (RFC 8985): a hole is lost once a unit sent in a later
    // frame arrived. A repair is therefore resent only after something sent later got
    // through, never just because another NACK came.
    lost = mark_holes(p, h, frame, sack_max, now);
  } else if (nack && (ack != p.goback_seq || now - p.goback_ns >= p.rto.srtt())) {
    // Go-back-N, or an overflow the receiver could not buffer: everything from the ACK on,
    // except what was sent less than one path RTT ago (min_rtt, not srtt: srtt carries the
    // receiver's ACK delay and would hold repairs back for ~10 ms). A repeated NACK for the
    // same ACK within an SRTT is the echo of the last go-back, not a new loss.
    const uint64_t guard = p.rto.has_sample() ? p.rto.min_rtt() : cfg_.nack_interval_ns;
    lost = mark_sent_by(p, now > guard ? now - guard : 0);
    if (lost > 0) p.goback_seq = ack, p.goback_ns = now;
  }
  if (sack_complete) lost += mark_lost_by_order(p, now);
  if (lost > 0) p.c.pkts_lost++, p.delay.lost(now);
}

uint32_t Engine::mark_lost(Peer& p, Seq from, Seq to, uint64_t sent_by, const RackTimes* rack) {
  // A frame's units all went out in the same transmissions, and a repair carries every one
  // of them: the walk goes a frame at a time.
  SendWindow& tx = p.tx;
  uint32_t n = 0;
  for (Seq s = from; s != to;) {
    const uint32_t pos = tx.fpos(s);
    const TxFrame& f = tx.frame(pos);
    if (f.in_flight && (rack != nullptr ? rack_lost(p, f, *rack) : f.last_tx_ns <= sent_by)) {
      lose_frame(p, pos);
      ++n;
    }
    const Seq end = tx.frame_end(pos);
    s = end - from < to - from ? end : to;
  }
  return n;
}

uint32_t Engine::mark_sent_by(Peer& p, uint64_t sent_by) {
  // Everything in flight is at or past the cumulative ACK, in transmission order: the walk ends
  // at the first frame sent later, not at the window's end (a go-back-N NACK walked it all).
  uint32_t n = 0;
  for (uint32_t pos; p.tx.flight_oldest(&pos) && p.tx.frame(pos).last_tx_ns <= sent_by; ++n) lose_frame(p, pos);
  return n;
}

void Engine::lose_frame(Peer& p, uint32_t pos) {
  p.tx.set_retx(pos);  // out of flight
  p.delay.forget(p.tx.frame(pos).number);
  const Seq first = p.tx.frame_first(pos);
  if (seq_lt(first, p.retx_cursor)) p.retx_cursor = first;
}

uint32_t Engine::mark_lost_by_order(Peer& p, uint64_t now) {
  // RACK without the SACK bound: the peer holds nothing beyond its SACK ranges, so every
  // frame in flight that was sent before one that got through is lost. This repairs a lost
  // tail after an RTO probe or a tail-loss probe, and units the receiver had no room for.
  // The in-flight list is in transmission order, and so is each path's part of it: a path's
  // walk ends at its first frame RACK does not call lost, and the walk at the first frame
  // sent after the newest delivered, or once every path's has ended.
  uint32_t n = 0;
  uint32_t pos, next;
  const RackTimes t = rack_times(p, cfg_.reorder_window_ns, now);
  uint8_t ended = 0;
  for (bool more = p.tx.flight_oldest(&pos); more && ended != paths_used_;) {
    const TxFrame& f = p.tx.frame(pos);
    if (f.number >= p.rack_frame) break;
    more = p.tx.flight_newer(pos, &next);  // before marking takes it out
    const auto path = static_cast<uint8_t>(1u << f.path);
    if (!(ended & path) && !rack_lost(p, f, t)) ended |= path;
    if (!(ended & path)) {
      const Seq s = p.tx.frame_first(pos);
      const uint32_t m = mark_lost(p, s, s + 1, kNever);
      if (m == 0) p.tx.flight_remove(pos);  // cannot be, but a walk that never ends is worse
      n += m;
    }
    pos = next;
  }
  return n;
}

void Engine::on_records(Peer& p, const Header& h, std::span<const uint8_t> body, uint64_t now) {
  each_record(body, h.seq, rec_flag::kAll, [&](const Record& r) { on_unit(p, r.seq, r.flags, r.payload, now); });
  try_deliver(p);
}

void Engine::nack_request(Peer& p, uint64_t now) {
  if (p.rx.nxt() != p.last_nack_seq || now - p.last_nack_ns >= cfg_.nack_interval_ns) {
    p.nack_now = true;
    p.ack_now = true;
  }
}

void Engine::on_unit(Peer& p, Seq s, uint8_t flags, std::span<const uint8_t> payload,
                     uint64_t now) {
  RecvWindow& rx = p.rx;
  const int32_t d = seq_diff(rx.nxt(), s);
  if (d < 0) {
    if (d < -kFarAway) return count(p, Reject::kOutOfWindow);
    p.c.dup_received++;
    p.ack_now = true;  // a duplicate means our ACK was lost or late: repeat it now
    return;
  }
  if (d > kFarAway) return count(p, Reject::kOutOfWindow);
  if (!rx.fits(s)) {
    p.c.overflow++;
    p.credit_in.on_overflow();
    p.nack_now = p.ack_now = true;  // Pupa: NACK + credit update at once
    return;
  }
  if (rx.present(s)) {
    p.c.dup_received++;
    return;
  }
  if (d == 0 && rx.dlv() == s && deliver_direct(p, flags, payload)) {
    rx.skip(s);
    if (p.ack_deadline == kNever) p.ack_deadline = now + cfg_.ack_delay_ns;
    return;
  }
  if (d > 0) {
    p.c.out_of_order++;
    if (!cfg_.selective_repeat) return nack_request(p, now);  // go-back-N keeps only in-order units
    // A unit beyond all that is held opens a new hole: report it at once, so the sender's
    // RACK finds the loss one round trip after it happened. More units past the same holes
    // repeat the NACK at most every nack_interval_ns. At most one ACK per frame received.
    if (seq_gt(s, rx.high()))
      p.nack_now = p.ack_now = true;
    else
      nack_request(p, now);
  }
  // A large unit waits in its frame when the sink can keep the frame (in-place receive):
  // copying it into the window costs more than a reference on the frame; a small one is
  // cheaper to copy than to hold a whole frame for.
  void* held = payload.size() >= kHoldFrom ? frames_->hold_frame() : nullptr;
  rx.store(s, flags, payload, held);
  if (p.ack_deadline == kNever) p.ack_deadline = now + cfg_.ack_delay_ns;
}

void Engine::release_held(Peer& p) {
  p.rx.drain_held([this](void* h) { frames_->release_frame(h); });
}

bool Engine::deliver_one(Peer& p, std::span<const uint8_t> m) {
  if (!app_->deliver(p.id, m)) return false;
  p.c.msgs_received++;
  p.c.bytes_received += m.size();
  return true;
}

bool Engine::deliver_direct(Peer& p, uint8_t flags, std::span<const uint8_t> payload) {
  // The in-order case with nothing waiting: hand the frame's own bytes up (no copy into the
  // window, and a zero-copy sink can keep them). Credit bookkeeping needs the slow path.
  if (p.deliver_blocked || p.credit_in.limited() || p.reasm.complete()) return false;
  if (!(flags & (rec_flag::kMore | rec_flag::kCont)))
    return !p.reasm.in_message() && deliver_one(p, payload);
  // A fragment: straight into the reassembly buffer, one copy instead of two (none into the
  // window slot); its last one delivers the message.
  add_fragment(p, flags, payload);
  if (p.reasm.complete()) try_deliver(p);
  return true;
}

void Engine::add_fragment(Peer& p, uint8_t flags, std::span<const uint8_t> payload) {
  Reassembly& ra = p.reasm;
  // Past rebuild_above() bytes, rebuild in a buffer the application lends: the message is
  // then delivered in it, with no copy (the bytes so far move once).
  const bool first = !(flags & rec_flag::kCont);
  const uint64_t so_far = first ? 0 : ra.length();
  if (!ra.lent() && (first ? (flags & rec_flag::kMore) != 0 : ra.active()) &&
      so_far + payload.size() > rebuild_above_) {
    const RebuildBuffer b = app_->rebuild_buffer(p.id);
    if (b.data != nullptr && b.cap >= cfg_.max_message_size)
      ra.adopt(b, so_far);  // a message cut short by this first fragment is not copied
    else if (b.data != nullptr)
      app_->rebuild_buffer_free(p.id, b);  // too small to hold every message: unusable
  }
  if (Reject r = ra.add(flags, payload); r != Reject::kNone) count(p, r);
}

bool Engine::deliver_rebuilt(Peer& p) {
  Reassembly& ra = p.reasm;
  if (!ra.lent()) {
    if (!deliver_one(p, ra.message())) return false;
    ra.consumed();
    return true;
  }
  const std::span<const uint8_t> m = ra.message();
  if (!app_->deliver_rebuilt(p.id, m, ra.loan())) return false;
  p.c.msgs_received++;
  p.c.bytes_received += m.size();
  ra.give_back();  // the application's now
  return true;
}

void Engine::drop_reassembly(Peer& p) {
  if (const RebuildBuffer b = p.reasm.give_back(); b.data != nullptr) app_->rebuild_buffer_free(p.id, b);
}

void Engine::try_deliver(Peer& p) {
  RecvWindow& rx = p.rx;
  bool freed = false, refused = false;
  for (;;) {
    if (p.reasm.complete() && !deliver_rebuilt(p)) {
      refused = true;
      break;
    }
    if (rx.dlv() == rx.nxt()) break;
    const RxSlot& sl = rx.slot(rx.dlv());
    const bool single = !(sl.rec_flags & (rec_flag::kMore | rec_flag::kCont));
    if (single && p.reasm.in_message()) {
      count(p, Reject::kBadFragment);  // a whole message cut a fragmented one short
      p.reasm.reset();
    }
    if (single) {
      if (!deliver_one(p, rx.payload(rx.dlv()))) {
        refused = true;
        break;
      }
    } else {
      add_fragment(p, sl.rec_flags, rx.payload(rx.dlv()));
    }
    if (void* h = rx.pop()) frames_->release_frame(h);
    freed = true;
  }
  p.deliver_blocked = refused;
  if (refused) p.c.deliver_refused++;
  if (freed && p.credit_in.limited()) {
    // Partial credit as space frees: tell the sender when it was stopped, when it may go
    // unlimited again, or when an eighth of the window opened since the last update.
    const uint32_t adv = p.credit_in.advertise(rx.free_from_ack());
    if (adv != p.credit_sent && (p.credit_sent == 0 || adv == kCreditUnlimited ||
                                 (adv > p.credit_sent && adv - p.credit_sent >= rx.slots() / 8)))
      p.ack_now = true;
  } else if (freed && p.credit_sent != kCreditUnlimited && cfg_.flow_control) {
    p.ack_now = true;  // back to unlimited: say so
  }
}

}  // namespace imago::rel
