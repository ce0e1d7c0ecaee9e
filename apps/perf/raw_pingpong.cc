// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/raw_pingpong.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <cerrno>
#include <cstring>

#include "apps/perf/raw_traffic.h"

namespace imago::perf {
namespace {

constexpr uint16_t kMaxBurst = 64;

// Fill a fresh mbuf with raw frame @p seq. @return it, or nullptr when the pool is empty.
rte_mbuf* make_frame(rte_mempool* pool, const dp::EncapConfig& encap, uint16_t size, uint64_t seq,
                     uint16_t flags) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (!m) return nullptr;
  auto* frame = rte_pktmbuf_mtod(m, uint8_t*);
  raw_fill(frame + dp::encap_header_len(encap.kind), size, seq, flags);
  size_t len = dp::encode_frame(encap, frame, dp::LinkType::Raw, size);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  return m;
}

}  // namespace

int RawPinger::init(const PingerConfig& cfg, dp::FaultyPort& port, rte_mempool* pool) {
  size_t room = rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM;
  if (cfg.size < kRawMinSize || dp::encap_header_len(cfg.encap.kind) + cfg.size + dp::encap_trailer_len(cfg.encap) > room) {
    return -EINVAL;
  }
  cfg_ = cfg;
  port_ = &port;
  pool_ = pool;
  tsc_hz_ = rte_get_tsc_hz();
  timeout_tsc_ = tsc_hz_ * cfg.timeout_us / 1'000'000;
  return 0;
}

unsigned RawPinger::send_ping(uint64_t now_tsc) {
  rte_mbuf* m = make_frame(pool_, cfg_.encap, cfg_.size, stats_.sent, 0);
  if (!m) return 0;
  if (port_->tx_burst(&m, 1, now_tsc) != 1) {
    rte_pktmbuf_free(m);
    return 0;
  }
  outstanding_ = true;
  ping_tsc_ = now_tsc;
  if (stats_.first_tsc == 0) stats_.first_tsc = now_tsc;
  ++stats_.sent;
  return 1;
}

unsigned RawPinger::receive(uint64_t now_tsc) {
  rte_mbuf* pkts[kMaxBurst];
  uint16_t n = port_->rx_burst(pkts, kMaxBurst, now_tsc);
  for (uint16_t i = 0; i < n; ++i) {
    dp::DecodedFrame f;
    if (!dp::decode_frame(cfg_.encap, rte_pktmbuf_mtod(pkts[i], const uint8_t*),
                      rte_pktmbuf_data_len(pkts[i]), f, stats_.decode)) {
      continue;
    }
    if (f.type != dp::LinkType::Raw || !raw_verify(f.payload, f.payload_len)) {
      ++stats_.corrupted;
      continue;
    }
    RawHdr h;
    std::memcpy(&h, f.payload, sizeof h);
    if (outstanding_ && h.seq.get() == stats_.sent - 1) {
      stats_.rtt_ns.record((now_tsc - ping_tsc_) * 1'000'000'000 / tsc_hz_);
      ++stats_.replies;
      stats_.last_tsc = now_tsc;
      outstanding_ = false;
    } else {
      ++stats_.late;
    }
  }
  rte_pktmbuf_free_bulk(pkts, n);
  return n;
}

void RawPinger::send_fin(uint64_t now_tsc) {
  if (now_tsc < next_fin_tsc_) return;
  next_fin_tsc_ = now_tsc + tsc_hz_ / 1000;
  ++fin_attempts_;  // best effort: the echoer may be gone after the first
  rte_mbuf* m = make_frame(pool_, cfg_.encap, kRawMinSize, stats_.sent, kRawFin);
  if (m && rte_eth_tx_burst(port_->port(), 0, &m, 1) != 1) rte_pktmbuf_free(m);
}

unsigned RawPinger::poll(uint64_t now_tsc) {
  port_->flush(now_tsc);
  unsigned work = receive(now_tsc);
  if (outstanding_ && now_tsc - ping_tsc_ > timeout_tsc_) {
    ++stats_.lost;
    outstanding_ = false;
  }
  if (!outstanding_) {
    if (stats_.sent < cfg_.pings) {
      work += send_ping(now_tsc);
    } else if (!done()) {
      send_fin(now_tsc);
    }
  }
  return work;
}

int RawEchoer::init(uint16_t burst, const dp::EncapConfig& encap, dp::FaultyPort& port) {
  if (burst == 0 || burst > kMaxBurst) return -EINVAL;
  burst_ = burst;
  encap_ = encap;
  port_ = &port;
  return 0;
}

unsigned RawEchoer::poll(uint64_t now_tsc) {
  rte_mbuf* pkts[kMaxBurst];
  rte_mbuf* out[kMaxBurst];
  uint16_t n_out = 0;
  port_->flush(now_tsc);
  uint16_t n = port_->rx_burst(pkts, burst_, now_tsc);
  for (uint16_t i = 0; i < n; ++i) {
    dp::DecodedFrame f;
    auto* frame = rte_pktmbuf_mtod(pkts[i], uint8_t*);
    bool raw = dp::decode_frame(encap_, frame, rte_pktmbuf_data_len(pkts[i]), f, stats_.decode) &&
               f.type == dp::LinkType::Raw && f.payload_len >= kRawMinSize;
    RawHdr h;
    if (raw) std::memcpy(&h, f.payload, sizeof h);
    if (!raw || (h.flags.get() & kRawFin)) {
      stats_.fins += raw;
      rte_pktmbuf_free(pkts[i]);
      continue;
    }
    // Answer to whoever asked: their addresses become ours to send to; payload untouched.
    dp::EncapConfig back = encap_;
    back.dst_mac = f.src_mac;
    back.dst_ip = f.src_ip;
    size_t len = dp::encode_frame(back, frame, dp::LinkType::Raw, f.payload_len);
    pkts[i]->data_len = static_cast<uint16_t>(len);
    pkts[i]->pkt_len = static_cast<uint32_t>(len);
    out[n_out++] = pkts[i];
  }
  uint16_t sent = port_->tx_burst(out, n_out, now_tsc);
  stats_.tx_failed += n_out - sent;
  rte_pktmbuf_free_bulk(out + sent, n_out - sent);
  stats_.echoed += sent;
  if (n) stats_.last_frame_tsc = now_tsc;
  return n;
}

}  // namespace imago::perf
