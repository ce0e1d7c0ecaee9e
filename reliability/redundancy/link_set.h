/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A node on two networks (NASA KSC, section 3): the engine's FrameSink that puts each frame
 * on network A, B or both, and the receive side that takes frames from both, keeps the first
 * copy of each and hands it to the engine. Three modes:
 *
 * - active/standby: frames go on the active network; the other carries heartbeats only;
 *   when the active one goes down toward a peer, traffic to that peer fails over, and comes
 *   back after `failback_ns` of health (0: never);
 * - duplicate: every frame on both; the receiver keeps the first copy (dedup.h);
 * - ping-pong: frames alternate; an ACK goes back on the network the last data came in on;
 *   a frame sent again goes on the other network than its last sending, and counts a failure
 *   against that one; a network that goes down takes no more frames until it heals.
 *
 * Every frame carries a shim (shim.h); heartbeats go on both networks to every peer every
 * `heartbeat_ns` and tell each peer which networks we hear it on (health.h).
 *
 * Pure and single-threaded like the engine: it runs on the engine's lcore, time comes in
 * with on_frame() and poll() (set_now() for sends the application drives), and nothing is
 * allocated after add_peer().
 */
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "reliability/engine.h"
#include "reliability/frame_sink.h"
#include "reliability/redundancy/dedup.h"
#include "reliability/redundancy/health.h"
#include "reliability/redundancy/shim.h"

namespace imago::rel::red {

enum class Mode : uint8_t { kActiveStandby = 1, kDuplicate = 2, kPingPong = 3 };

/** @return "active-standby", "duplicate" or "ping-pong". */
const char* mode_name(Mode m);
/** Parse a mode_name(). @return false when @p s names none. */
bool parse_mode(const char* s, Mode* out);

struct Config {
  Mode mode = Mode::kDuplicate;
  HealthConfig health;
  uint64_t failback_ns = 0;  ///< active/standby: back to A once it is not down this long (0: never)
  uint32_t max_frame = 9216; ///< largest reliability frame the engine sends (without the shim)
  uint32_t pingpong_run = 16;///< ping-pong: frames to a peer on one network before the other
};

/** Ping-pong sends a peer's frames over two paths. Each is a path of its own to RACK
 *  (sent_path(), rack.h), so frames of one network overtaking the other's cost nothing; within
 *  a network RACK still waits this long before it calls a hole lost
 *  (rel::Config::reorder_window_ns, which the engine's configuration leaves 0), against a
 *  network that reorders by itself. */
inline constexpr uint64_t kPingPongReorderNs = 500'000;

/** Fit an engine's configuration @p ec to a link set in mode @p c: a reordering window for
 *  ping-pong. (Its frames must also leave room for the shim on the link: sizeof(Shim).) */
inline void fit_engine(const Config& c, rel::Config* ec) {
  if (c.mode == Mode::kPingPong && ec->reorder_window_ns == 0) ec->reorder_window_ns = kPingPongReorderNs;
}

/** Per network. */
struct NetCounters {
  uint64_t frames_sent = 0;       ///< frames (not heartbeats) the network's link took
  uint64_t frames_received = 0;   ///< valid frames (not heartbeats) received on it
  uint64_t heartbeats_sent = 0;
  uint64_t heartbeats_received = 0;
  uint64_t heartbeats_lost = 0;   ///< gaps in the heartbeats received (the network's loss)
  uint64_t resent = 0;            ///< frames last sent on it that had to be sent again
  uint64_t failovers = 0;         ///< times it went down toward a peer while the other was not
  uint64_t failbacks = 0;         ///< active/standby: times traffic came back to it
  uint64_t duplicates_dropped = 0;  ///< second copies received on it
  uint64_t stale_passed = 0;      ///< copies older than the duplicate window, passed to the engine to judge
  uint64_t tx_refused = 0;        ///< its link refused a frame (back-pressure, or down)
  NetState state = NetState::kUp; ///< the worst over peers, now
};

/** Call @p fn(name, value) for every counter of network @p c (RESULT, imagod's statistics). */
template <typename Fn>
void for_each_counter(const NetCounters& c, Fn&& fn) {
  fn("frames_sent", c.frames_sent), fn("frames_received", c.frames_received);
  fn("heartbeats_sent", c.heartbeats_sent), fn("heartbeats_received", c.heartbeats_received);
  fn("heartbeats_lost", c.heartbeats_lost), fn("resent", c.resent);
  fn("failovers", c.failovers), fn("failbacks", c.failbacks);
  fn("duplicates_dropped", c.duplicates_dropped), fn("stale_passed", c.stale_passed);
  fn("tx_refused", c.tx_refused), fn("state", static_cast<uint64_t>(c.state));
}

/** A change the link set reports (Listener). */
struct NetEvent {
  enum Kind : uint8_t { kState = 1, kFailover = 2, kFailback = 3 } kind;
  NodeId peer;
  uint8_t net;     ///< kState: the network; kFailover/kFailback: the one traffic moved to
  NetState state;  ///< kState: the new state
  uint64_t at_ns;
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual void on_net_event(const NetEvent& e) = 0;
};

class LinkSet final : public FrameSink {
 public:
  /** @param nets network A and B (each a link's FrameSink, e.g. dp::EngineLink). */
  LinkSet(const Config& c, NodeId self, uint32_t epoch, FrameSink* a, FrameSink* b);

  /** Frames received go to @p e (which must use this link set as its FrameSink). */
  void attach(Engine* e) { engine_ = e; }
  void set_listener(Listener* l) { listener_ = l; }
  /** Watch @p peer (control path: allocates). @return 0, -EEXIST. */
  int add_peer(NodeId peer, uint64_t now_ns);

  /** A frame received on network @p net (0: A, 1: B), link header removed. */
  void on_frame(uint8_t net, std::span<const uint8_t> frame, uint64_t now_ns);
  /** Heartbeats and health. @return frames sent. */
  uint32_t poll(uint64_t now_ns);
  /** We were not polled for @p ns beyond absence_tolerance_ns() (the lcore descheduled):
   *  nothing could be heard on either network then, so that is no network's silence (as
   *  Engine::credit_absence() for the peers). Before the frames that waited are received. */
  void credit_absence(uint64_t now_ns, uint64_t ns);
  uint64_t absence_tolerance_ns() const { return cfg_.health.heartbeat_ns; }
  uint64_t next_deadline() const { return next_poll_; }
  /** Time for frames sent outside on_frame()/poll() (the application's sends). */
  void set_now(uint64_t now_ns) { now_ = now_ns; }

  const NetCounters& counters(uint8_t net) const;
  uint64_t bad_shim() const { return bad_shim_; }  ///< received frames without a valid shim
  uint64_t not_peer() const { return not_peer_; }  ///< from a node that is no peer of ours
  /** @return @p peer's state on @p net (kDown for an unknown peer). */
  NetState state(NodeId peer, uint8_t net) const;
  /** @return the network traffic to @p peer goes on now (active/standby), else 0. */
  uint8_t active(NodeId peer) const;
  const Config& config() const { return cfg_; }

  // FrameSink.
  bool send_frame(NodeId peer, std::span<const uint8_t> frame) override;
  FrameRoom frame_room() const override;
  uint8_t* frame_memory_alloc(size_t bytes) override;
  void frame_memory_free(uint8_t* mem) override;
  bool send_held(NodeId peer, uint8_t* slot, std::span<uint8_t> frame, uint8_t again) override;
  bool slot_busy(const uint8_t* slot) const override;
  uint8_t sent_path() const override { return sent_path_; }
  void* hold_frame() override;
  void release_frame(void* held) override;
  bool multicast() const override;
  bool send_group(GroupId g, std::span<const uint8_t> frame) override;
  void subscribe(GroupId g, bool on) override;

 private:
  struct Peer {
    NodeId id = 0;
    uint32_t seq = 0;          ///< its frame channel
    uint8_t flip = 0;          ///< ping-pong: the next network
    uint32_t run = 0;          ///< ping-pong: frames sent on it in this run
    uint8_t active = 0;        ///< active/standby: the network in use
    uint8_t rx_net = 0;        ///< where its last data (or group data) frame came in
    uint8_t answer_net = 0;    ///< where the last answer to it went
    bool answer_unheard = false;  ///< nothing came from it since that answer
    uint64_t last_tx = 0;      ///< when a frame (not a heartbeat) last went to it
    NetHealth health[kMaxNets];
    uint32_t hb_tx[kMaxNets] = {};
    uint32_t hb_rx[kMaxNets] = {};
    uint32_t hb_rx_epoch[kMaxNets] = {};
    bool hb_rx_seen[kMaxNets] = {};
    /** The peer's heartbeat number each network has caught up with (anything but a heartbeat
     *  brings it level with the other): one that lags the other lost what the other carried. */
    uint32_t level[kMaxNets] = {};
    uint32_t level_epoch = 0;  ///< the peer's epoch those numbers are of
    DedupWindow frames, groups;
  };
  /** What the link set keeps at the start of each held slot (before its networks' own). */
  struct SlotOwn {
    uint8_t held_net;  ///< the network whose link header the slot holds (kNoNet: none yet)
    uint8_t last;      ///< bit n: the frame's last sending went on network n
    uint8_t pad[14];
  };
  static constexpr uint8_t kNoNet = 0xFE;

  Peer* find(NodeId id);
  const Peer* find(NodeId id) const;
  /** @return true when @p p was heard on some network within the down-detection time. */
  bool peer_heard(const Peer& p) const;
  /** @return the networks @p p is heard on (the shim's heard bits). */
  uint8_t heard_bits(const Peer& p) const;
  void raise_level(Peer& p, uint8_t net, const Shim& s);
  void clamp_heartbeat(const Peer& p, Shim& s, bool back) const;
  uint8_t usable(const Peer& p) const;
  uint8_t nets_for(Peer& p, bool answer, uint8_t last);
  uint8_t group_nets();
  void evaluate(Peer& p, uint64_t now);
  void event(NetEvent::Kind k, NodeId peer, uint8_t net, NetState s);
  void took(uint8_t sent);
  uint32_t heartbeat(Peer& p, uint8_t net);
  void on_heartbeat(Peer& p, uint8_t net, uint32_t epoch, uint32_t seq);
  /** A shim and a copy of @p frame in scratch_. */
  std::span<const uint8_t> wrap(ShimKind kind, uint8_t mask, uint8_t heard, uint32_t seq,
                                std::span<const uint8_t> frame);
  bool send_copy(Peer& p, uint8_t mask, std::span<const uint8_t> frame);
  template <typename Fn>
  uint8_t send_on(uint8_t mask, Fn&& fn);

  Config cfg_;
  NodeId self_;
  uint32_t epoch_;
  FrameSink* nets_[kMaxNets];
  Engine* engine_ = nullptr;
  Listener* listener_ = nullptr;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::unordered_map<NodeId, Peer*> index_;
  NetCounters c_[kMaxNets];
  uint64_t now_ = 0;
  uint64_t next_poll_ = 0;
  uint32_t group_seq_ = 0;
  uint8_t group_flip_ = 0;
  uint8_t rx_net_ = 0;     ///< the network of the frame being received (hold_frame())
  uint8_t sent_path_ = 0;  ///< sent_path(): ping-pong, the network the last frame took
  bool polled_ = false;    ///< poll() ran once (health starts then)
  bool inner_memory_ = false;  ///< held slots are the networks' memory: send_held() on them
  struct OwnMemory {
    std::unique_ptr<uint8_t[]> raw;
    uint8_t* aligned;  ///< 64-byte aligned, inside raw
  };
  std::vector<OwnMemory> own_memory_;
  std::vector<uint8_t> scratch_;  ///< a shim and a frame sent by copy
  uint64_t bad_shim_ = 0, not_peer_ = 0;
};

}  // namespace imago::rel::red
