// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/engine_link.h"

#include <rte_cycles.h>

#include <cerrno>
#include <cstring>

namespace imago::dp {

int EngineLink::init(FaultyPort& port, rte_mempool* pool, const EncapConfig& encap, uint16_t burst) {
  if (burst == 0 || burst > kMaxBurst) return -EINVAL;
  port_ = &port;
  pool_ = pool;
  encap_ = encap;
  burst_ = burst;
  clock_ = TscClock(rte_get_tsc_hz());
  peers_.reserve(AllowList::kMaxPeers);
  allow_ = AllowList(encap.kind);
  return 0;
}

int EngineLink::add_peer_addr(rel::NodeId peer, const MacAddr& mac, uint32_t ip) {
  if (peers_.size() == peers_.capacity()) return -ENOSPC;
  if (int rc = allow_.add(peer, mac, ip); rc < 0) return rc;
  PeerAddr a{peer, encap_};
  a.encap.dst_mac = mac;
  a.encap.dst_ip = ip;
  peers_.push_back(a);
  return 0;
}

const EngineLink::PeerAddr* EngineLink::find(rel::NodeId id) const {
  for (const PeerAddr& p : peers_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

bool EngineLink::send_frame(rel::NodeId peer, std::span<const uint8_t> frame) {
  const PeerAddr* a = find(peer);
  if (!a) {
    ++counters_.unknown_peer;
    return true;  // nowhere to send it: like a frame lost on the wire, the engine repairs
  }
  if (pending_n_ == burst_ && (flush(now_tsc_), pending_n_ == burst_)) {
    ++counters_.tx_backpressure;
    return false;
  }
  size_t hdr = encap_header_len(a->encap.kind);
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m || hdr + frame.size() + encap_trailer_len(a->encap) > rte_pktmbuf_tailroom(m)) {
    ++counters_.alloc_failed;
    rte_pktmbuf_free(m);
    return false;
  }
  auto* data = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(data + hdr, frame.data(), frame.size());
  size_t len = encode_frame(a->encap, data, LinkType::Reliability, static_cast<uint16_t>(frame.size()));
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  pending_[pending_n_++] = m;
  return true;
}

unsigned EngineLink::flush(uint64_t now_tsc) {
  unsigned sent = port_->flush(now_tsc);  // delayed frames of the fault layer first
  if (pending_n_ == 0) return sent;
  uint16_t k = port_->tx_burst(pending_, pending_n_, now_tsc);
  counters_.frames_out += k;
  if (k < pending_n_) std::memmove(pending_, pending_ + k, (pending_n_ - k) * sizeof(rte_mbuf*));
  pending_n_ = static_cast<uint16_t>(pending_n_ - k);
  return sent + k;
}

unsigned EngineLink::poll(uint64_t now_tsc) {
  now_tsc_ = now_tsc;
  uint64_t now = clock_.ns(now_tsc);
  rte_mbuf* pkts[kMaxBurst];
  uint16_t n = port_->rx_burst(pkts, burst_, now_tsc);
  for (uint16_t i = 0; i < n; ++i) {
    DecodedFrame f;
    if (!decode_frame(encap_, rte_pktmbuf_mtod(pkts[i], const uint8_t*),
                      rte_pktmbuf_data_len(pkts[i]), f, counters_.decode)) {
      continue;
    }
    if (f.type != LinkType::Reliability) {
      ++counters_.not_ours;
      continue;
    }
    Admit verdict = allow_.check(f.src_mac, f.src_ip, f.payload, f.payload_len);
    if (verdict != Admit::Allowed) {
      ++(verdict == Admit::Spoofed ? counters_.spoofed : counters_.not_allowed);
      continue;
    }
    ++counters_.frames_in;
    current_ = pkts[i];
    engine_->on_frame(std::span(f.payload, f.payload_len), now);
  }
  current_ = nullptr;
  rte_pktmbuf_free_bulk(pkts, n);
  engine_->poll(now);
  return n + flush(now_tsc);
}

}  // namespace imago::dp
