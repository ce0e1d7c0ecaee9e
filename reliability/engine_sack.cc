// SPDX-License-Identifier: BSD-3-Clause
// Selective acknowledgment: the receiver's SACK block (runs of held units as ranges, or a
// bitmap when there are more runs than ranges fit), and the sender's side of it (units the
// peer holds are marked, the holes between them are lost once something sent later arrived).
#include <algorithm>

#include "reliability/engine.h"
#include "reliability/peer.h"
#include "reliability/rack.h"

namespace imago::rel {

namespace {

/** Call @p f(j, len) for every run of set bits of @p bits, lowest first. */
template <typename F>
void for_each_run(uint64_t bits, F f) {
  while (bits != 0) {
    const auto j = static_cast<uint32_t>(__builtin_ctzll(bits));
    const uint64_t from_j = bits >> j;
    const uint32_t len = ~from_j == 0 ? 64 - j : static_cast<uint32_t>(__builtin_ctzll(~from_j));
    f(j, len);
    if (j + len >= 64) return;
    bits &= ~uint64_t{0} << (j + len);
  }
}

/** @return the bits j of the 64 units from @p lo with @p from <= lo + j - ack < @p to. */
uint64_t units_between(Seq lo, Seq ack, int64_t from, int64_t to) {
  const int64_t d0 = static_cast<int32_t>(lo - ack);  // lo is at most 63 below the ACK
  const int64_t a = std::max<int64_t>(0, from - d0), b = std::min<int64_t>(64, to - d0);
  if (a >= b) return 0;
  const uint64_t below_b = b == 64 ? ~uint64_t{0} : (uint64_t{1} << b) - 1;
  return below_b & (~uint64_t{0} << a);
}

Seq bitmap_base(Seq ack) { return ack & ~Seq{63}; }

constexpr int64_t kBeyond = int64_t{1} << 40;  // further than any window

}  // namespace

uint32_t Engine::build_sack(const Peer& p, uint8_t* buf, uint32_t max) const {
  const RecvWindow& rx = p.rx;
  // Ranges, lowest first, while they fit.
  uint32_t n = 0;
  Seq s = rx.nxt(), a, b;
  while (n < max && rx.next_run(s, &a, &b)) {
    encode_sack(buf, n++, a, b);
    s = b;
  }
  const Seq base = bitmap_base(rx.nxt());
  const uint32_t words = std::min(max, (rx.high() - base + 63) / 64);
  // More runs than ranges: a bitmap lists 64 units an entry, wherever the holes are. Taken
  // when it reaches further (the ring must be whole words for its bits to align).
  if (s != rx.high() && rx.slots() >= 64 && seq_gt(base + 64 * words, s)) {
    for (uint32_t k = 0; k < words; ++k) {
      // Only units of [nxt, high): [dlv, nxt) is not news, and a slot's bit beyond high
      // would be a unit one ring further on (a ring of a word or two).
      const Seq lo = base + 64 * k;
      encode_sack_word(buf, k, rx.held_bits(lo) & units_between(lo, rx.nxt(), 0, rx.high() - rx.nxt()));
    }
    or_flags(buf, frame_flag::kSackBitmap);
    n = words;
    s = seq_lt(base + 64 * words, rx.high()) ? base + 64 * words : rx.high();
  }
  set_sack_count(buf, static_cast<uint8_t>(n));
  if (s != rx.high()) or_flags(buf, frame_flag::kSackMore);
  return n;
}

void Engine::mark_sacked(Peer& p, Seq from, Seq to, uint64_t* sample_tx) {
  SendWindow& tx = p.tx;
  for (Seq s = from;;) {
    // Skip what earlier ACKs reported (its evidence was taken then), 64 units a step: every
    // ACK repeats the SACK of the ones before.
    s += tx.sacked_run(s, to - s);
    if (s == to) return;
    // The new units of one frame: its transmission got through (RACK evidence), and once
    // the peer holds all of it, it needs no repair and is no longer in flight.
    const uint32_t pos = tx.fpos(s);
    const TxFrame& f = tx.frame(pos);
    const Seq end = tx.frame_end(pos);
    const Seq stop = end - s < to - s ? end : to;
    rack_delivered(p, f);
    if (sample_ok(p, f, s)) *sample_tx = std::max(*sample_tx, f.first_tx_ns);
    for (; s != stop; ++s) tx.set_sacked(s);
    if (tx.frame_delivered(pos)) {
      tx.clear_retx(pos);
      tx.flight_remove(pos);
    }
  }
}

bool Engine::take_sack(Peer& p, const Header& h, std::span<const uint8_t> frame, Seq* sack_max,
                       uint64_t* sample_tx) {
  const Seq ack = h.ack;
  const uint32_t sent = p.tx.nxt() - ack;  // units sent beyond the ACK: where SACK may lie
  if (h.flags & frame_flag::kSackBitmap) {
    const Seq base = bitmap_base(ack);
    for (uint32_t k = 0; k < h.sack_count; ++k) {
      const Seq lo = base + 64 * k;
      const uint64_t w = decode_sack_word(frame, k);
      if (w & units_between(lo, ack, sent, kBeyond)) return false;  // not sent yet: a lie
      const uint64_t held = w & units_between(lo, ack, 1, sent);
      if (held == 0) continue;
      *sack_max = lo + 64 - static_cast<uint32_t>(__builtin_clzll(held));
      for_each_run(held & ~p.tx.sacked_bits(lo),
                   [&](uint32_t j, uint32_t len) { mark_sacked(p, lo + j, lo + j + len, sample_tx); });
    }
    return true;
  }
  for (uint32_t i = 0; i < h.sack_count; ++i) {
    Seq a, b;
    decode_sack(frame, i, &a, &b);
    // ack < a < b <= nxt, by unsigned distance from the ACK (see on_ack_info()).
    if (a - ack == 0 || a - ack >= b - ack || b - ack > sent) return false;
    mark_sacked(p, a, b, sample_tx);
    if (seq_gt(b, *sack_max)) *sack_max = b;
  }
  return true;
}

uint32_t Engine::mark_holes(Peer& p, const Header& h, std::span<const uint8_t> frame,
                            Seq sack_max, uint64_t now) {
  // RACK (RFC 8985) over the holes below sack_max only: the units the SACK listed were just
  // marked, and what lies beyond it is unknown.
  const Seq ack = h.ack;
  const RackTimes t = rack_times(p, cfg_.reorder_window_ns, now);
  uint32_t lost = 0;
  if (h.flags & frame_flag::kSackBitmap) {
    const Seq base = bitmap_base(ack);
    for (uint32_t k = 0; k < h.sack_count; ++k) {
      const Seq lo = base + 64 * k;
      const uint64_t missing = ~decode_sack_word(frame, k) & ~p.tx.sacked_bits(lo) &
                               units_between(lo, ack, 0, sack_max - ack);
      for_each_run(missing, [&](uint32_t j, uint32_t len) {
        lost += mark_lost(p, lo + j, lo + j + len, 0, &t);
      });
    }
    return lost;
  }
  Seq from = ack;
  for (uint32_t i = 0; i < h.sack_count; ++i) {
    Seq a, b;
    decode_sack(frame, i, &a, &b);
    if (seq_gt(a, from)) lost += mark_lost(p, from, a, 0, &t);
    if (seq_gt(b, from)) from = b;
  }
  return lost;
}

}  // namespace imago::rel
