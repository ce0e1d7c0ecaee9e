/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The seam between the pure reliability engine and a DPDK port: engine frames become mbufs
 * (link header + reliability frame) sent through the fault layer, received frames are
 * decoded and handed to Engine::on_frame(), and TSC cycles become the engine's nanoseconds.
 * Received frames are admitted only from the configured peers, each from its own address
 * (allow_list.h), and with a cluster key only with a valid tag (encap.h, auth.h).
 *
 * One EngineLink per engine and port, polled from one lcore. No allocation after init():
 * mbufs come from the pool, the pending burst is a fixed array.
 */
#pragma once

#include <rte_mbuf.h>
#include <rte_memzone.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/allow_list.h"
#include "dataplane/encap.h"
#include "dataplane/fault.h"
#include "dataplane/tx_queue.h"
#include "reliability/engine.h"
#include "reliability/redundancy/link_set.h"

namespace imago::dp {

/** Turns TSC cycles into nanoseconds with one multiply (128-bit, so it never overflows). */
class TscClock {
 public:
  explicit TscClock(uint64_t tsc_hz = 1)
      : mult_((static_cast<unsigned __int128>(1'000'000'000) << 32) / tsc_hz) {}
  uint64_t ns(uint64_t tsc) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(tsc) * mult_) >> 32);
  }

 private:
  unsigned __int128 mult_;
};

struct EngineLinkCounters {
  uint64_t frames_in = 0;        ///< reliability frames handed to the engine
  uint64_t frames_out = 0;       ///< frames taken by the port (or its fault layer)
  uint64_t tx_backpressure = 0;  ///< send_frame() refused: the port and the pending burst full
  uint64_t tx_backoffs = 0;      ///< the port took nothing of a burst: retried only after a back-off
  uint64_t alloc_failed = 0;     ///< no mbuf for a frame (refused too: the engine retries)
  uint64_t not_ours = 0;         ///< decoded frames of another link type
  uint64_t unknown_peer = 0;     ///< frames the engine asked to send to a peer with no address
  uint64_t not_allowed = 0;      ///< received from an address and a node that are no peer of ours
  uint64_t spoofed = 0;          ///< received in the name of a peer, not from its address
  uint64_t held_out = 0;         ///< frames sent from a held slot without a copy (retransmissions too)
  uint64_t held_in = 0;          ///< holds on received frames: units kept in place out of order
  uint64_t hold_refused = 0;     ///< holds refused (a quarter of the pool held already): copied
  uint64_t group_out = 0;        ///< group frames sent once to a group's multicast address
  uint64_t chained_out = 0;      ///< of held_out, frames whose payload went from the sender's buffer (send_ext())
  uint64_t rx_linearized = 0;    ///< frames received in several segments, joined to be read
  DecodeCounters decode;         ///< rejected frames by reason, the tag's (decode_auth_*) too
};

/** Call @p fn(name, value) for every counter of @p c, the decoder's per reason as
 *  "decode_<reason>" (RESULT lines and imagod's statistics print them all: a counter added to
 *  the struct is added here). */
template <typename Fn>
void for_each_counter(const EngineLinkCounters& c, Fn&& fn) {
  fn("frames_in", c.frames_in), fn("frames_out", c.frames_out), fn("tx_backpressure", c.tx_backpressure);
  fn("tx_backoffs", c.tx_backoffs);
  fn("alloc_failed", c.alloc_failed), fn("not_ours", c.not_ours), fn("unknown_peer", c.unknown_peer);
  fn("not_allowed", c.not_allowed), fn("spoofed", c.spoofed);
  fn("held_out", c.held_out), fn("held_in", c.held_in), fn("hold_refused", c.hold_refused);
  fn("group_out", c.group_out), fn("chained_out", c.chained_out), fn("rx_linearized", c.rx_linearized);
  fn("decode_accepted", c.decode.accepted), fn("decode_rejected", c.decode.total_rejected());
  for (size_t i = 0; i < kDecodeErrorCount; ++i)
    fn((std::string("decode_") + decode_error_name(static_cast<DecodeError>(i))).c_str(), c.decode.rejected[i]);
}

class EngineLink final : public rel::FrameSink {
 public:
  static constexpr uint16_t kMaxBurst = TxQueue::kMaxBurst;

  /**
   * @param encap  the port's encapsulation, our own addresses (src MAC/IP, UDP port) and the
   *               cluster key, if any (frames are tagged and must be)
   * @return 0, or -EINVAL (burst 0 or above kMaxBurst).
   */
  int init(FaultyPort& port, rte_mempool* pool, const EncapConfig& encap, uint16_t burst);
  /** Where frames for @p peer go, and the address its frames must come from (control path;
   *  broadcast or no address: any address of no other peer, see allow_list.h).
   *  @return 0, -ENOSPC or -EEXIST (@p peer added before). */
  int add_peer_addr(rel::NodeId peer, const MacAddr& mac, uint32_t ip = 0);
  /** Frames received go to @p engine (which must use this link as its FrameSink). */
  void attach(rel::Engine* engine) { engine_ = engine; }
  /** Frames received go to @p set as network @p net instead (a node on two networks: the
   *  set is the engine's FrameSink, this link one of its two). */
  void attach_set(rel::red::LinkSet* set, uint8_t net) { set_ = set, net_ = net; }

  /** Lcore task body: receive a burst into the engine, run its timers, send what it made.
   *  @return frames received + frames sent. */
  unsigned poll(uint64_t now_tsc);
  /** Receive a burst into the engine (or the link set) only. @return frames received. */
  unsigned receive(uint64_t now_tsc);
  /** Send the pending burst. @return frames the port took. */
  unsigned flush(uint64_t now_tsc);
  /** @return the engine time of @p tsc. */
  uint64_t now_ns(uint64_t tsc) const { return clock_.ns(tsc); }
  /** Set the time used by frames sent outside poll() (from Engine::send). */
  void set_now(uint64_t now_tsc) { now_tsc_ = now_tsc; }

  bool send_frame(rel::NodeId peer, std::span<const uint8_t> frame) override;
  // Held frames (frame_sink.h): slots in a memzone of hugepage memory, each sent as an mbuf
  // attached to it as an external buffer, the slot's shared info (its refcount) in the slot.
  rel::FrameRoom frame_room() const override;
  uint8_t* frame_memory_alloc(size_t bytes) override;
  void frame_memory_free(uint8_t* mem) override;
  bool send_held(rel::NodeId peer, uint8_t* slot, std::span<uint8_t> frame, uint8_t again) override;
  bool slot_busy(const uint8_t* slot) const override;
  // Messages by reference (frame_sink.h): the head in the slot, the payload in the sender's
  // buffer, two mbufs chained, each attached to its part. On the ports whose PMD copies a
  // chain into one frame (net_memif, net_af_packet), with no trailer.
  bool chains() const override { return chains_; }
  /** Chain on any port (tests: on net_ring, whose receiver then joins each chained frame). */
  void force_chains(bool on) { chains_ = on && encap_trailer_len(encap_) == 0; }
  bool send_ext(rel::NodeId peer, uint8_t* slot, std::span<uint8_t> head, std::span<const uint8_t> ext,
                uint8_t again) override;
  // In-place receive (frame_sink.h): a reference on the mbuf being received, at most a
  // quarter of the pool's mbufs at a time, so that receiving and sending never run dry.
  void* hold_frame() override;
  void release_frame(void* held) override;
  // Groups (frame_sink.h): a group's frames go once to its multicast address (group_mac(),
  // group_ipv4()); subscribe() puts the addresses of the groups joined in the port's
  // multicast list, or where the PMD has none turns all-multicast on (logged once; a port
  // in promiscuous mode, imago's default, receives them either way).
  bool multicast() const override { return multicast_; }
  bool send_group(rel::GroupId g, std::span<const uint8_t> frame) override;
  void subscribe(rel::GroupId g, bool on) override;
  /** Send group frames to each member instead (a network that does not carry multicast).
   *  Control path, before the engine sends any. */
  void set_multicast(bool on) { multicast_ = on; }
  /** @return the groups subscribed to now. */
  const std::vector<rel::GroupId>& subscribed() const { return groups_; }

  /** @return holds on received mbufs not given back yet. */
  uint32_t holds() const { return holds_; }

  const EngineLinkCounters& counters() const { return counters_; }
  /** @return memzones of held frames still given to the engine (0 once it let them all go). */
  size_t held_zones() const { return zones_.size(); }
  /** @return the mbuf whose frame the engine is processing now (inside poll()'s on_frame),
   *  or nullptr: a delivered span inside it may be kept zero-copy by taking a reference. */
  rte_mbuf* current_frame() const { return current_; }

 private:
  struct PeerAddr {
    rel::NodeId id;
    EncapConfig encap;  // our base encapsulation with this peer's destination
  };
  const PeerAddr* find(rel::NodeId id) const;
  bool room_for_one();
  rte_mbuf* attach_head(const PeerAddr& a, uint8_t* slot, std::span<uint8_t> frame, std::span<const uint8_t> apart,
                        bool again);
  const uint8_t* frame_bytes(rte_mbuf* m, uint32_t* len);
  bool send_copy(const EncapConfig& to, std::span<const uint8_t> frame, std::span<const uint8_t> more = {});
  static constexpr uint32_t kMaxLinear = 16384;  ///< the longest chained frame joined on receipt
  void apply_mc_list();
  void sync_tx();  ///< the queue's counters into counters_
  struct Zone {
    uint8_t* mem;
    const rte_memzone* mz;
  };

  FaultyPort* port_ = nullptr;
  rte_mempool* pool_ = nullptr;
  EncapConfig encap_;
  uint16_t burst_ = 32;
  rel::Engine* engine_ = nullptr;
  rel::red::LinkSet* set_ = nullptr;
  uint8_t net_ = 0;
  TscClock clock_;
  uint64_t now_tsc_ = 0;
  std::vector<PeerAddr> peers_;
  AllowList allow_;
  TxQueue tx_;  ///< the pending burst (and the back-off of a port that refuses)
  rte_mbuf* current_ = nullptr;
  uint32_t holds_ = 0;     ///< references taken by hold_frame() and not released
  uint32_t hold_cap_ = 0;  ///< a quarter of the pool
  std::vector<Zone> zones_;  ///< held-frame memory handed to the engine
  uint32_t zone_serial_ = 0;
  bool multicast_ = true;
  bool chains_ = false;  ///< send_ext() chains (see chains())
  bool iova_va_ = false; ///< IOVA as VA: an address is its IOVA
  std::unique_ptr<uint8_t[]> linear_;  ///< a chained frame received, joined (kMaxFrame)
  bool mc_fallback_logged_ = false;
  std::vector<rel::GroupId> groups_;  ///< subscribed (control path)
  EngineLinkCounters counters_;
};

}  // namespace imago::dp
