// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/raw_traffic.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <nmmintrin.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "reliability/crc32c.h"

namespace imago::perf {
namespace {

constexpr uint16_t kMaxBurst = 512;

uint32_t raw_check(const uint8_t* payload, uint16_t len) {
  uint32_t c = crc32c(0, payload, offsetof(RawHdr, check));
  static constexpr uint8_t kZero[4] = {};
  c = crc32c(c, kZero, sizeof kZero);
  return crc32c(c, payload + offsetof(RawHdr, flags), len - offsetof(RawHdr, flags));
}

// Short payloads: raw_check()'s CRC from the values just written, not read back, since loads
// right behind the stores that wrote them stall (40 % of a 64 B sender's time). Long ones
// read it back: one serial chain in registers is three times slower than crc32c()'s lanes.
constexpr uint16_t kFillInRegisters = 256;

uint32_t fill_check(const RawHdr& h, uint64_t stamp, uint8_t fill, uint16_t len) {
  uint64_t w[2];
  std::memcpy(w, &h, sizeof w);
  uint64_t c = _mm_crc32_u64(_mm_crc32_u64(0xFFFFFFFFu, w[0]), w[1]);
  size_t k = sizeof h;
  if (stamp != 0) c = _mm_crc32_u64(c, stamp), k += sizeof stamp;
  const uint64_t pattern = fill * 0x0101010101010101ull;
  for (; k + 8 <= len; k += 8) c = _mm_crc32_u64(c, pattern);
  auto c32 = static_cast<uint32_t>(c);
  if ((len - k) & 4) c32 = _mm_crc32_u32(c32, static_cast<uint32_t>(pattern));
  if ((len - k) & 2) c32 = _mm_crc32_u16(c32, static_cast<uint16_t>(pattern));
  if ((len - k) & 1) c32 = _mm_crc32_u8(c32, fill);
  return ~c32;
}

}  // namespace

void raw_fill(uint8_t* payload, uint16_t len, uint64_t seq, uint16_t flags, uint64_t stamp) {
  RawHdr h;
  h.seq.set(seq);
  h.check.set(0);
  h.flags.set(flags);
  h.length.set(len);
  // Filler that depends on seq, so a frame spliced from two others fails the check.
  auto fill = static_cast<uint8_t>(seq * 131 + 7);
  const bool stamped = stamp && len >= kRawStampedSize;
  std::memcpy(payload, &h, sizeof h);
  std::memset(payload + sizeof h, fill, len - sizeof h);
  if (stamped) std::memcpy(payload + sizeof h, &stamp, sizeof stamp);
  h.check.set(len > kFillInRegisters ? raw_check(payload, len) : fill_check(h, stamped ? stamp : 0, fill, len));
  std::memcpy(payload + offsetof(RawHdr, check), &h.check, sizeof h.check);
}

uint64_t raw_stamp(const uint8_t* payload, uint16_t len) {
  uint64_t stamp = 0;
  if (len >= kRawStampedSize) std::memcpy(&stamp, payload + sizeof(RawHdr), sizeof stamp);
  return stamp;
}

bool raw_verify(const uint8_t* payload, uint16_t len) {
  if (len < kRawMinSize) return false;
  RawHdr h;
  std::memcpy(&h, payload, sizeof h);
  return h.length.get() == len && h.check.get() == raw_check(payload, len);
}

int RawSender::init(const RawSenderConfig& cfg, dp::FaultyPort& port, rte_mempool* pool) {
  size_t room = rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM;
  if (cfg.size < kRawMinSize || dp::encap_header_len(cfg.encap.kind) + cfg.size + dp::encap_trailer_len(cfg.encap) > room ||
      cfg.burst == 0 || cfg.burst > kMaxBurst) {
    return -EINVAL;
  }
  cfg_ = cfg;
  port_ = &port;
  pool_ = pool;
  pending_.assign(cfg.burst, nullptr);
  pacer_ = app::Pacer(cfg.rate_pps ? rte_get_tsc_hz() / cfg.rate_pps : 0);
  return 0;
}

uint16_t RawSender::build(uint16_t n, uint64_t now_tsc) {
  if (rte_pktmbuf_alloc_bulk(pool_, pending_.data(), n) != 0) {
    ++stats_.alloc_failed;
    return 0;
  }
  size_t hdr = dp::encap_header_len(cfg_.encap.kind);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pending_[i];
    auto* frame = rte_pktmbuf_mtod(m, uint8_t*);
    raw_fill(frame + hdr, cfg_.size, next_seq_ + i, 0);
    size_t len = dp::encode_frame(cfg_.encap, frame, dp::LinkType::Raw, cfg_.size);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
  }
  next_seq_ += n;
  if (stats_.first_tsc == 0) stats_.first_tsc = now_tsc;
  return n;
}

unsigned RawSender::send_fin(uint64_t now_tsc) {
  // FINs are the test's bookkeeping, not traffic under test: they go straight to the port,
  // after the fault layer has let every delayed frame go. Best effort: a receiver that has
  // seen one may already be gone (and its link down), so each attempt counts.
  if (port_->flush(now_tsc), port_->held() > 0 || now_tsc < next_fin_tsc_) return 0;
  next_fin_tsc_ = now_tsc + rte_get_tsc_hz() / 1000;
  ++stats_.fin_attempts;
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m) return 0;
  auto* frame = rte_pktmbuf_mtod(m, uint8_t*);
  raw_fill(frame + dp::encap_header_len(cfg_.encap.kind), kRawMinSize, stats_.sent, kRawFin);
  size_t len = dp::encode_frame(cfg_.encap, frame, dp::LinkType::Raw, kRawMinSize);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  if (rte_eth_tx_burst(port_->port(), 0, &m, 1) != 1) {
    rte_pktmbuf_free(m);
    return 0;
  }
  ++stats_.fins_sent;
  return 1;
}

unsigned RawSender::poll(uint64_t now_tsc) {
  if (pending_n_ == 0 && next_seq_ == cfg_.msgs) return done() ? 0 : send_fin(now_tsc);
  if (pending_n_ == 0) {
    auto n = static_cast<uint16_t>(std::min<uint64_t>(cfg_.burst, cfg_.msgs - next_seq_));
    n = pacer_.due(now_tsc, n);
    if (n == 0) return port_->flush(now_tsc);
    pending_n_ = build(n, now_tsc);
    pending_at_ = 0;
  }
  uint16_t want = static_cast<uint16_t>(pending_n_ - pending_at_);
  uint16_t k = port_->tx_burst(pending_.data() + pending_at_, want, now_tsc);
  stats_.tx_full += k < want;
  pending_at_ = static_cast<uint16_t>(pending_at_ + k);
  stats_.sent += k;
  if (k) stats_.last_tsc = now_tsc;
  if (pending_at_ == pending_n_) pending_n_ = pending_at_ = 0;
  return k;
}

int RawReceiver::init(uint64_t expected, uint16_t burst, const dp::EncapConfig& encap,
                      dp::FaultyPort& port) {
  if (burst == 0 || burst > kMaxBurst) return -EINVAL;
  expected_ = expected;
  burst_ = burst;
  encap_ = encap;
  port_ = &port;
  seen_.assign((expected + 63) / 64, 0);
  return 0;
}

void RawReceiver::account(const dp::DecodedFrame& f, uint64_t now_tsc) {
  if (f.type != dp::LinkType::Raw || !raw_verify(f.payload, f.payload_len)) {
    ++stats_.corrupted;
    return;
  }
  RawHdr h;
  std::memcpy(&h, f.payload, sizeof h);
  uint64_t seq = h.seq.get();
  if (h.flags.get() & kRawFin) {
    ++stats_.fins;
    stats_.sender_reported = seq;
    return;
  }
  if (seq >= expected_) {
    ++stats_.out_of_range;
    return;
  }
  uint64_t bit = uint64_t{1} << (seq % 64);
  if (seen_[seq / 64] & bit) {
    ++stats_.duplicated;
    return;
  }
  seen_[seq / 64] |= bit;
  if (any_ && seq < max_seq_) ++stats_.reordered;
  max_seq_ = any_ ? std::max(max_seq_, seq) : seq;
  any_ = true;
  ++stats_.delivered;
  stats_.bytes += f.payload_len;
  if (stats_.first_tsc == 0) stats_.first_tsc = now_tsc;
  stats_.last_tsc = now_tsc;
}

unsigned RawReceiver::poll(uint64_t now_tsc) {
  rte_mbuf* pkts[kMaxBurst];
  uint16_t n = port_->rx_burst(pkts, burst_, now_tsc);
  for (uint16_t i = 0; i < n; ++i) {
    dp::DecodedFrame f;
    if (dp::decode_frame(encap_, rte_pktmbuf_mtod(pkts[i], const uint8_t*),
                     rte_pktmbuf_data_len(pkts[i]), f, stats_.decode)) {
      account(f, now_tsc);
    }
  }
  rte_pktmbuf_free_bulk(pkts, n);
  stats_.received += n;
  if (n) stats_.last_frame_tsc = now_tsc;
  return n;
}

bool RawReceiver::complete() const {
  return stats_.fins > 0 && stats_.delivered >= stats_.sender_reported;
}

bool RawReceiver::finished(uint64_t now_tsc, uint64_t fin_grace_tsc, uint64_t idle_tsc) const {
  if (complete()) return true;
  if (stats_.received == 0) return false;
  uint64_t silent = now_tsc - stats_.last_frame_tsc;
  return (stats_.fins > 0 && silent > fin_grace_tsc) || silent > idle_tsc;
}

uint64_t RawReceiver::sent_total() const {
  return stats_.fins > 0 ? stats_.sender_reported : expected_;
}

}  // namespace imago::perf
