// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/engine_link.h"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dataplane/log.h"
#include "dataplane/port.h"

namespace imago::dp {

int EngineLink::init(FaultyPort& port, rte_mempool* pool, const EncapConfig& encap, uint16_t burst) {
  if (burst == 0 || burst > kMaxBurst) return -EINVAL;
  port_ = &port;
  pool_ = pool;
  hold_cap_ = pool != nullptr ? pool->size / 4 : 0;
  encap_ = encap;
  burst_ = burst;
  clock_ = TscClock(rte_get_tsc_hz());
  tx_.init(&port, burst, rte_get_tsc_hz());
  // PMDs that copy each segment of an mbuf chain into one frame (net_memif, net_af_packet):
  // messages by reference go out as two chained parts, the payload copied once, by the PMD.
  // Not behind a trailer (the tag follows the payload), nor on other PMDs: net_ring hands
  // the chain itself to a receiver in the same process, which would have to join it (a copy
  // where a held frame costs none: it reads the sender's slot in place), a NIC would need its
  // multi-segment offload, and net_af_xdp sends the first segment alone.
  const std::string drv = port_driver(port.port());
  chains_ = encap_trailer_len(encap) == 0 && (drv == "net_memif" || drv == "net_af_packet");
  iova_va_ = rte_eal_iova_mode() == RTE_IOVA_VA;
  linear_ = std::make_unique_for_overwrite<uint8_t[]>(kMaxLinear);
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
  return send_copy(a->encap, frame);
}

bool EngineLink::send_group(rel::GroupId g, std::span<const uint8_t> frame) {
  EncapConfig to = encap_;
  to.dst_mac = group_mac(g);
  to.dst_ip = group_ipv4(g);
  if (!send_copy(to, frame)) return false;
  ++counters_.group_out;
  return true;
}

bool EngineLink::send_copy(const EncapConfig& to, std::span<const uint8_t> frame, std::span<const uint8_t> more) {
  if (!room_for_one()) return false;
  size_t hdr = encap_header_len(to.kind);
  const size_t whole = frame.size() + more.size();
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m || hdr + whole + encap_trailer_len(to) > rte_pktmbuf_tailroom(m)) {
    ++counters_.alloc_failed;
    rte_pktmbuf_free(m);
    return false;
  }
  auto* data = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(data + hdr, frame.data(), frame.size());
  if (!more.empty()) std::memcpy(data + hdr + frame.size(), more.data(), more.size());
  size_t len = encode_frame(to, data, LinkType::Reliability, static_cast<uint16_t>(whole));
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  tx_.push(m);
  return true;
}

void EngineLink::subscribe(rel::GroupId g, bool on) {
  auto it = std::find(groups_.begin(), groups_.end(), g);
  if (on == (it != groups_.end())) return;
  if (on) groups_.push_back(g);
  else groups_.erase(it);
  apply_mc_list();
}

void EngineLink::apply_mc_list() {
  // Distinct MACs only: groups whose ids differ above bit 23 share one.
  std::vector<rte_ether_addr> list;
  for (rel::GroupId g : groups_) {
    rte_ether_addr a;
    std::memcpy(a.addr_bytes, group_mac(g).b.data(), 6);
    bool dup = false;
    for (const rte_ether_addr& b : list) dup = dup || rte_is_same_ether_addr(&a, &b);
    if (!dup) list.push_back(a);
  }
  const uint16_t id = port_->port();
  int rc = rte_eth_dev_set_mc_addr_list(id, list.empty() ? nullptr : list.data(),
                                        static_cast<uint32_t>(list.size()));
  if (rc == 0 || list.empty()) return;
  // No list in this PMD (net_af_packet, net_ring, net_memif): all multicast instead.
  int all = rte_eth_allmulticast_enable(id);
  if (mc_fallback_logged_) return;
  mc_fallback_logged_ = true;
  IMAGO_LOG(INFO, dataplane, "port %u: no multicast address list (%s); %s\n", id, rte_strerror(-rc),
            all == 0 ? "all-multicast on" : rte_eth_promiscuous_get(id) == 1
                ? "promiscuous mode receives group frames" : "group frames may not arrive");
}

bool EngineLink::room_for_one() {
  if (tx_.room(now_tsc_)) return true;
  sync_tx();
  ++counters_.tx_backpressure;
  return false;
}

namespace {

// Never called: the slot's own count is never dropped, so no mbuf free (in whichever
// process, where this address means nothing) takes the count to 0.
void keep_slot(void*, void*) {}

/** What EngineLink keeps at the start of each held-frame slot (FrameRoom::priv). */
struct SlotPriv {
  rte_mbuf_ext_shared_info shinfo;  // refcnt: 1 (the slot's own, from its first send) + mbufs attached now
  rte_iova_t iova;                  // the slot's IOVA, found at its first send (0: not yet)
  rte_mbuf_ext_shared_info ext;     // the same for the payload of a message by reference (send_ext())
};

/** Count one more mbuf attached through @p s (the owner's own count first, at first use). */
void attach_ref(rte_mbuf_ext_shared_info* s) {
  if (rte_mbuf_ext_refcnt_read(s) == 0) {
    s->free_cb = keep_slot;
    s->fcb_opaque = nullptr;
    rte_mbuf_ext_refcnt_set(s, 1);
  }
  rte_mbuf_ext_refcnt_update(s, 1);
}


}  // namespace

rel::FrameRoom EngineLink::frame_room() const {
  return {sizeof(SlotPriv), static_cast<uint32_t>(encap_header_len(encap_.kind)),
          static_cast<uint32_t>(encap_trailer_len(encap_))};
}

uint8_t* EngineLink::frame_memory_alloc(size_t bytes) {
  // net_af_xdp sends an mbuf of its UMEM pool (ours) from the mbuf's own buffer, whatever it
  // is attached to: held frames go out copied there.
  if (port_driver(port_->port()) == "net_af_xdp") return nullptr;
  // A memzone: hugepage memory a secondary holding a delivered frame can read, IOVA
  // contiguous when the hugepages allow it (a real NIC's DMA reads the slot as it is).
  char name[RTE_MEMZONE_NAMESIZE];
  std::snprintf(name, sizeof name, "imago_fr_%lx_%u",
                static_cast<unsigned long>(reinterpret_cast<uintptr_t>(this) & 0xFFFFFFFFFFu), zone_serial_++);
  const int socket = pool_ != nullptr ? pool_->socket_id : SOCKET_ID_ANY;
  const rte_memzone* mz = rte_memzone_reserve_aligned(name, bytes, socket, RTE_MEMZONE_IOVA_CONTIG, 64);
  if (mz == nullptr) mz = rte_memzone_reserve_aligned(name, bytes, socket, 0, 64);
  if (mz == nullptr) return nullptr;  // the engine's heap then, and a copy per frame
  zones_.push_back({static_cast<uint8_t*>(mz->addr), mz});
  return static_cast<uint8_t*>(mz->addr);
}

void EngineLink::frame_memory_free(uint8_t* mem) {
  for (size_t i = 0; i < zones_.size(); ++i) {
    if (zones_[i].mem != mem) continue;
    rte_memzone_free(zones_[i].mz);
    zones_.erase(zones_.begin() + static_cast<ptrdiff_t>(i));
    return;
  }
}

bool EngineLink::slot_busy(const uint8_t* slot) const {
  const auto* priv = reinterpret_cast<const SlotPriv*>(slot);
  return __atomic_load_n(&priv->shinfo.refcnt, __ATOMIC_ACQUIRE) > 1 ||
         __atomic_load_n(&priv->ext.refcnt, __ATOMIC_ACQUIRE) > 1;
}

void* EngineLink::hold_frame() {
  if (current_ == nullptr || holds_ >= hold_cap_) {
    ++counters_.hold_refused;
    return nullptr;
  }
  rte_mbuf_refcnt_update(current_, 1);  // poll()'s free after the burst leaves it alive
  ++holds_;
  ++counters_.held_in;
  return current_;
}

void EngineLink::release_frame(void* held) {
  rte_pktmbuf_free(static_cast<rte_mbuf*>(held));
  --holds_;
}

bool EngineLink::send_held(rel::NodeId peer, uint8_t* slot, std::span<uint8_t> frame, uint8_t again) {
  const PeerAddr* a = find(peer);
  if (!a) {
    ++counters_.unknown_peer;
    return true;  // as send_frame()
  }
  if (!room_for_one()) return false;
  rte_mbuf* m = attach_head(*a, slot, frame, {}, again);
  if (m == nullptr) return false;
  tx_.push(m);
  ++counters_.held_out;
  return true;
}

// An mbuf attached to the held frame @p frame of @p slot (its link header in the room before
// it, written at the first sending: the slot's bytes then go out unchanged on every repair),
// followed on the wire by @p apart (a payload chained behind it, covered by the UDP checksum).
rte_mbuf* EngineLink::attach_head(const PeerAddr& a, uint8_t* slot, std::span<uint8_t> frame,
                                  std::span<const uint8_t> apart, bool again) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m) {
    ++counters_.alloc_failed;
    return nullptr;
  }
  const size_t hdr = encap_header_len(a.encap.kind);
  uint8_t* link = frame.data() - hdr;
  if (!again) encode_frame(a.encap, link, LinkType::Reliability, static_cast<uint16_t>(frame.size() + apart.size()), apart);
  // The tag after the frame (chains() is false with one: it would follow the payload).
  const auto len = static_cast<uint16_t>(hdr + frame.size() + (apart.empty() ? encap_trailer_len(a.encap) : 0));
  auto* priv = reinterpret_cast<SlotPriv*>(slot);
  if (priv->iova == 0) priv->iova = rte_mem_virt2iova(slot);
  attach_ref(&priv->shinfo);
  rte_pktmbuf_attach_extbuf(m, link, priv->iova + static_cast<rte_iova_t>(link - slot), len, &priv->shinfo);
  m->data_len = len;
  m->pkt_len = len;
  return m;
}

bool EngineLink::send_ext(rel::NodeId peer, uint8_t* slot, std::span<uint8_t> head, std::span<const uint8_t> ext,
                          uint8_t again) {
  const PeerAddr* a = find(peer);
  if (!a) {
    ++counters_.unknown_peer;
    return true;  // as send_frame()
  }
  if (slot == nullptr) return send_copy(a->encap, head, ext);  // the engine's own memory: joined
  if (!room_for_one()) return false;
  rte_mbuf* tail = rte_pktmbuf_alloc(pool_);
  rte_mbuf* m = tail != nullptr ? attach_head(*a, slot, head, ext, again) : nullptr;
  if (m == nullptr) {
    counters_.alloc_failed += tail == nullptr;
    rte_pktmbuf_free(tail);
    return false;
  }
  // The payload where the application wrote it. Its count lives in the slot: the engine
  // gives the buffer back only once the slot is not busy (slot_busy()), both counts at 1.
  auto* priv = reinterpret_cast<SlotPriv*>(slot);
  auto* bytes = const_cast<uint8_t*>(ext.data());  // only read: sent, never written
  const rte_iova_t iova = iova_va_ ? reinterpret_cast<rte_iova_t>(bytes) : rte_mem_virt2iova(bytes);
  attach_ref(&priv->ext);
  rte_pktmbuf_attach_extbuf(tail, bytes, iova, static_cast<uint16_t>(ext.size()), &priv->ext);
  tail->data_len = static_cast<uint16_t>(ext.size());
  tail->pkt_len = tail->data_len;
  m->next = tail;
  m->nb_segs = 2;
  m->pkt_len += tail->data_len;
  tx_.push(m);
  ++counters_.held_out;
  ++counters_.chained_out;
  return true;
}

unsigned EngineLink::flush(uint64_t now_tsc) {
  const unsigned sent = tx_.flush(now_tsc);
  sync_tx();
  return sent;
}

void EngineLink::sync_tx() {
  counters_.frames_out = tx_.frames_out();
  counters_.tx_backoffs = tx_.backoffs();
}

unsigned EngineLink::poll(uint64_t now_tsc) {
  const unsigned n = receive(now_tsc);
  engine_->poll(clock_.ns(now_tsc));
  return n + flush(now_tsc);
}

unsigned EngineLink::receive(uint64_t now_tsc) {
  now_tsc_ = now_tsc;
  uint64_t now = clock_.ns(now_tsc);
  rte_mbuf* pkts[kMaxBurst];
  uint16_t n = port_->rx_burst(pkts, burst_, now_tsc);
  for (uint16_t i = 0; i < n; ++i) {
    DecodedFrame f;
    uint32_t len;
    const uint8_t* bytes = frame_bytes(pkts[i], &len);
    if (!decode_frame(encap_, bytes, len, f, counters_.decode)) continue;
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
    current_ = bytes == linear_.get() ? nullptr : pkts[i];  // a joined copy is not held in place
    if (set_ != nullptr)
      set_->on_frame(net_, std::span(f.payload, f.payload_len), now);
    else
      engine_->on_frame(std::span(f.payload, f.payload_len), now);
  }
  current_ = nullptr;
  rte_pktmbuf_free_bulk(pkts, n);
  return n;
}

// The bytes of received frame @p m: in place, or joined in linear_ when they came in several
// segments (a chain from a peer on the same host: net_ring passes the sender's chain on).
const uint8_t* EngineLink::frame_bytes(rte_mbuf* m, uint32_t* len) {
  *len = rte_pktmbuf_data_len(m);
  if (m->nb_segs == 1) return rte_pktmbuf_mtod(m, const uint8_t*);
  *len = std::min<uint32_t>(rte_pktmbuf_pkt_len(m), kMaxLinear);  // longer: cut, and rejected as such
  ++counters_.rx_linearized;
  return static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, *len, linear_.get()));
}

}  // namespace imago::dp
