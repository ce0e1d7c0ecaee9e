/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * One imago node at run time: its reliability engine on a port, and the endpoints of the
 * shared table that belong to it. Node::poll() is the engine lcore's task: it moves
 * descriptors from endpoint tx rings into the engine, frames between engine and port, and
 * delivered messages onto endpoint rx rings (in the tier their size calls for).
 *
 * On the wire each message carries a 4-byte endpoint tag in front (the hash of the
 * endpoint's name); tag 0 is the node's control channel, which announces endpoints opening
 * and closing to the peer, so a sender waits for its peer's endpoint and a peer sees an
 * endpoint closed when its application exits or is killed.
 *
 * A group endpoint (EndpointSlot::group) has no tag and no announcement: its messages go to
 * the engine's group stream (Engine::group_send), and the streams of the group this node
 * receives reach it with their sources, their events (imago_group_event) in their place.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "api/big_ledger.h"
#include "api/imago_msg.h"
#include "api/shm.h"
#include "api/tiers.h"
#include "dataplane/node_engine.h"
#include "reliability/engine.h"

namespace imago::api {

/** What a node is made of; the port and pool belong to the caller. */
struct NodeSpec {
  uint64_t id = 0;
  unsigned index = 0;  ///< in ShmRoot::node_ids
  dp::FaultyPort* port = nullptr;
  rte_mempool* mbuf_pool = nullptr;
  dp::EncapConfig encap;
  uint16_t burst = 32;
  rel::Config engine;  ///< node_id, epoch and seed are filled in by init()
  /** Network B (a node on two networks, dp::NodeEngineConfig): its port (null: none), pool,
   *  encapsulation and the redundancy mode. */
  dp::FaultyPort* port_b = nullptr;
  rte_mempool* mbuf_pool_b = nullptr;
  dp::EncapConfig encap_b;
  rel::red::Config redundancy;
  /** A node of a multi-hop fabric (dp::NodeEngineConfig::circuits): its topology and a port per
   *  link (null: none; @p port is then the first link's, for nothing but the node's clock). */
  const dp::CircuitSetup* circuits = nullptr;
};

/** A peer and where its frames go (on network B too, for a node on two networks). */
struct PeerAddr {
  uint64_t id = 0;
  dp::MacAddr mac{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  uint32_t ip = 0;
  dp::MacAddr mac_b{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  uint32_t ip_b = 0;
};

/** Node-wide counters (the engine lcore writes them). */
struct NodeCounters {
  uint64_t control_in = 0;
  uint64_t control_bad = 0;   ///< malformed control messages or untagged messages
  uint64_t announce_sent = 0;
};

class Node final : public rel::AppSink, public rel::red::Listener {
 public:
  static constexpr unsigned kStage = 32;  ///< messages taken from, or put on, an endpoint's ring at once
  /// ...and the ring slots they may take (a message of up to IMAGO_SEND_INLINE_MAX bytes takes four)
  static constexpr unsigned kStageSlots = kStage * tx_slots(IMAGO_SEND_INLINE_MAX);

  /** Control path. @return 0 or a negative errno. */
  int init(const NodeSpec& spec, ShmRoot* shm);
  /** Control path, before the engine lcore starts. @return 0 or a negative errno. */
  int add_peer(const PeerAddr& peer);
  /** The big pool is shared by the deliveries of @p nodes nodes (this one among them). */
  void share_big_pool(uint32_t nodes) { big_.init(shm_->big_pool->size, send_reserve(shm_->big_pool), nodes); }
  /** Teardown, the engine lcore stopped: give back the received frames held in place (they
   *  may be another node's, attached to its memory: every node does this before any goes). */
  void release_frames() {
    if (ne_.engine) ne_.engine->release_frames();
  }
  /** Teardown, the engine lcore stopped: a fabric node closes its circuits and tells its
   *  neighbours it stops (dp::CircuitLink::leave()); any other does nothing. */
  void leave_fabric() {
    if (ne_.circ) ne_.circ->leave();
  }
  /** @return true when @p id is a peer of this node. */
  bool has_peer(uint64_t id) const;

  /** The engine lcore's task. @return work done. */
  static unsigned task(void* self, uint64_t now_tsc) { return static_cast<Node*>(self)->poll(now_tsc); }
  unsigned poll(uint64_t now_tsc);

  // rel::AppSink, called by the engine from inside poll().
  bool deliver(rel::NodeId peer, std::span<const uint8_t> msg) override;
  // Messages above the frame-sized tier are rebuilt in a big-pool buffer and handed over in
  // it, with no copy after reassembly.
  uint64_t rebuild_above() const override;
  rel::RebuildBuffer rebuild_buffer(rel::NodeId peer) override;
  bool deliver_rebuilt(rel::NodeId peer, std::span<const uint8_t> msg, rel::RebuildBuffer b) override;
  void rebuild_buffer_free(rel::NodeId peer, rel::RebuildBuffer b) override;
  // Messages sent from a pool buffer above the engine's ref_min() go out of it by reference
  // (no copy), while fewer than half its pool's buffers are held so; the engine gives
  // each back here once the peer acknowledged it.
  void ext_done(uint64_t cookie) override;
  void on_peer_up(rel::NodeId peer) override;
  void on_peer_reset(rel::NodeId peer, uint64_t discarded) override;
  void on_peer_dead(rel::NodeId peer, uint64_t discarded) override;
  void on_peer_settings(rel::NodeId peer, rel::PeerSettings theirs, rel::PeerSettings ours) override {
    dp::node_engine_log_settings(spec_.id, peer, theirs, ours);
  }
  bool deliver_group(rel::NodeId src, rel::GroupId g, std::span<const uint8_t> msg) override;
  void on_group_event(const rel::GroupEvent& e) override;
  bool on_group_report(const rel::GroupEvent& e) override;
  // rel::red::Listener (a node on two networks): to the endpoints that asked
  // (IMAGO_EP_NET_EVENTS) toward that peer.
  void on_net_event(const rel::red::NetEvent& e) override;

  uint64_t id() const { return spec_.id; }
  const rel::Engine& engine() const { return *ne_.engine; }
  const dp::EngineLink& link() const { return ne_.link; }
  /** @return the node's link set (two networks), or nullptr. */
  const rel::red::LinkSet* link_set() const { return ne_.set.get(); }
  const NodeCounters& counters() const { return c_; }

 private:
  struct Active {
    EndpointSlot* slot;
    uint32_t slot_index;
    uint32_t peer_index;  // in peers_
    // Deliveries are written straight into slots reserved on the rx ring (a zero-copy
    // enqueue, kept open within one poll()) and published together by flush_staged().
    rte_ring_zc_data staged;
    uint16_t staged_room;  // slots reserved
    uint16_t staged_n;     // slots written
    uint16_t staged_msgs;  // messages and events among them
    bool group_ok;  // a group endpoint the engine joined or opened (to leave or close)
  };
  struct Announce {
    uint64_t peer;
    uint32_t hash;
    uint8_t op;
  };
  struct Remote {
    uint64_t peer;
    uint32_t hash;
  };
  // Which endpoint (slot index, or kControlSlot) each of the last messages sent to one peer
  // came from. When the peer restarts or dies the engine drops the messages it had not
  // confirmed, always the last ones sent to that peer: this charges them to their endpoints.
  struct History {
    std::unique_ptr<uint8_t[]> slot;
    uint32_t mask = 0;
    uint64_t n = 0;  // messages recorded since the session began
  };
  static constexpr uint8_t kControlSlot = 0xff;

  void refresh(uint32_t gen);
  void activate(uint32_t slot_index);
  void activate_group(Active& a);
  void tell_node_gone(Active& a, uint64_t peer);
  void retire(Active& a);
  Active* find(uint64_t peer, uint32_t hash);
  /** @return the group endpoint of @p g with @p flag (IMAGO_GROUP_SEND or _RECV), or nullptr. */
  Active* find_group(rel::GroupId g, uint32_t flag);
  /** Put one message from @p src on @p a's rx ring (staged). @return 1 handed over, 0 kept
   *  by the engine for later (back-pressure), -1 dropped (it can never be handed over). */
  int stage(Active& a, uint64_t src, std::span<const uint8_t> body, void* rebuilt);
  /** @return room for @p slots more staged slots (one message) on @p a (flushing if need be). */
  bool stage_room(Active& a, unsigned slots = 1);
  /** A SEND group endpoint's stream, for its statistics. */
  void publish_group(EndpointSlot& s);
  void set_ready(uint64_t peer, uint32_t hash, bool ready);
  void set_ready(EndpointSlot& s, bool ready);
  uint32_t app_max(uint64_t engine_max) const;
  uint32_t group_send_cap() const;
  void cap_group_sends();

  unsigned drain_tx(Active& a, uint64_t now_ns);
  int send_one(Active& a, const imago_msg& d, uint8_t tier, std::span<const uint8_t> msg, uint16_t flags,
               uint64_t now_ns);
  /** @return the index in ext_held_ of pool buffer @p obj's pool. */
  unsigned pool_of(const void* obj) const;
  bool tx_view(Active& a, const rte_ring_zc_data& z, unsigned at, std::span<const uint8_t>* msg, uint8_t* scratch);
  bool take(rel::NodeId peer, std::span<const uint8_t> msg, void* rebuilt);
  /** Put event @p ev (@p len bytes, from @p src) among @p a's staged descriptors, or count
   *  it lost when there is no room. */
  void stage_event(Active& a, uint64_t src, const void* ev, uint32_t len);
  void flush_staged(Active& a);
  TierSide side(EndpointSlot& s) const { return {shm_, &s, caches_}; }

  void on_control(uint64_t peer, std::span<const uint8_t> body);
  void queue_announce(uint64_t peer, uint32_t hash, uint8_t op);
  void send_announces(uint64_t now_ns);
  void forget_remotes(uint64_t peer);
  int peer_index(uint64_t peer) const;
  void record_sent(uint32_t peer_index, uint8_t slot) {
    History& h = history_[peer_index];
    h.slot[h.n++ & h.mask] = slot;
  }
  void charge_unconfirmed(uint64_t peer, uint64_t discarded, bool dead);

  NodeSpec spec_;
  ShmRoot* shm_ = nullptr;
  PoolCaches* caches_ = nullptr;  ///< this engine lcore's, in shm_->engine_caches
  dp::NodeEngine ne_;  ///< the engine and its link to the port
  uint64_t peers_[kMaxEndpoints] = {};
  History history_[kMaxEndpoints];  // parallel to peers_
  /// Parallel to peers_: its session was up once. A node that died after that is gone for an
  /// ordered group (tell_node_gone()); one never heard from may just not have started yet.
  bool was_up_[kMaxEndpoints] = {};
  unsigned n_peers_ = 0;
  uint32_t seen_gen_ = UINT32_MAX;
  uint32_t settings_gen_ = 0;  ///< the engine's peer_settings_gen() the group sends were capped at
  std::unique_ptr<Active[]> active_;  // kMaxEndpoints, the first n_active_ in use
  unsigned n_active_ = 0;
  static constexpr unsigned kAnnounceCap = 2 * kMaxEndpoints;
  Announce announce_[kAnnounceCap] = {};
  unsigned announce_head_ = 0, announce_n_ = 0;
  Remote remote_[4 * kMaxEndpoints] = {};
  unsigned n_remote_ = 0;
  uint64_t now_ns_ = 0;
  uint32_t ext_held_[3] = {};  ///< buffers the engine sends by reference, per pool (msg, frame, big)
  BigLedger big_;              ///< the big pool's buffers our deliveries hold
  NodeCounters c_;
};

}  // namespace imago::api
