// SPDX-License-Identifier: BSD-3-Clause
// A cluster of real engines on the simulated network, with an application model that sends
// checkable messages and verifies, online, the property every run must keep:
//   every message is delivered exactly once, in order, intact, or its sender was excused
//   (told the peer reset or died, or a node on the stream crashed) before it went missing.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "reliability/engine.h"
#include "reliability/redundancy/link_set.h"
#include "reliability/rng.h"
#include "tests/reliability/held_frames.h"
#include "tests/reliability/sim.h"

namespace imago::sim {

/** Set while an engine call runs; the property test counts heap allocations under it. */
inline thread_local bool g_track_allocs = false;
inline thread_local uint64_t g_engine_allocs = 0;

class TrackAllocs {
 public:
  explicit TrackAllocs(bool on) : prev_(g_track_allocs) { g_track_allocs = on; }
  ~TrackAllocs() { g_track_allocs = prev_; }

 private:
  bool prev_;
};

/** One of a simulated node's two networks as its link set sees it: frames go onto @p net at
 *  the node's time (NodeT: id and time()). */
template <typename NodeT>
struct NetPortOf : rel::FrameSink {
  NodeT* n = nullptr;
  Network* net = nullptr;
  bool send_frame(NodeId peer, std::span<const uint8_t> f) override {
    TrackAllocs off(false);
    return net->transmit(n->id, peer, f, n->time());
  }
};

struct Scenario {
  uint32_t nodes = 2;
  uint64_t msgs = 5000;  ///< total over all streams
  rel::Config cfg;       ///< node_id, epoch, seed filled per node
  LinkFaults faults;
  std::vector<DropWindow> drops;
  struct Restart {
    NodeId node;
    uint64_t at, down_ns;
    int32_t epoch_step = 1;  ///< new epoch = previous + this (0: same epoch, < 0: lower)
  };
  std::vector<Restart> restarts;
  struct Stall {
    NodeId node;
    uint64_t from, to;
  };
  std::vector<Stall> stalls;  ///< the application stops draining
  double refuse = 0;          ///< chance the application refuses any one delivery
  bool one_way = false;       ///< only node 0 sends
  uint32_t max_burst = 32;
  uint64_t app_gap_ns = 20'000;  ///< mean pause between application bursts
  double fast = 0.05;            ///< share of messages sent with FASTPATH
  uint32_t max_size = 300;       ///< typical message size bound
  double big = 0.02;             ///< share of multi-frame messages
  uint32_t big_size = 6000;
  uint32_t fixed_size = 0;  ///< >= 16: every message has exactly this size
  /** The applications lend up to lend_buffers buffers to rebuild messages of more than
   *  lend_above bytes in (AppSink::rebuild_buffer). */
  uint64_t lend_above = UINT64_MAX;
  uint32_t lend_buffers = 0;
  /** Received frames in buffers of their own that the engines may hold (in-place receive);
   *  a buffer let go is overwritten before it is freed. */
  bool hold_frames = false;
  /** The links chain frames (FrameSink::chains()) and the applications send every message
   *  from a buffer of its own with Engine::send_ref(); a buffer given back is overwritten,
   *  and freed only some buffers later (a frame sent from it after would arrive corrupt). */
  bool send_by_ref = false;
  uint64_t time_limit_ns = 600ull * 1'000'000'000;
  /** Two networks per node (reliability/redundancy/): every node's engine sends through a
   *  LinkSet in this mode over network A (faults, drops) and network B (faults_b, drops_b). */
  bool redundant = false;
  rel::red::Config red;
  LinkFaults faults_b;
  std::vector<DropWindow> drops_b;
};

/** @return a one-way stream of @p msgs messages of @p size bytes from node 0 to node 1, its
 *  application always ahead of the link (bursts of up to 64 about every microsecond). */
inline Scenario one_way_stream(uint64_t msgs, uint32_t size) {
  Scenario sc;
  sc.nodes = 2;
  sc.one_way = true;
  sc.msgs = msgs;
  sc.fixed_size = size;
  sc.fast = 0;
  sc.max_burst = 64;
  sc.app_gap_ns = 1000;
  return sc;
}

/** Deterministic message content: length and bytes follow from (src, dst, index). */
inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/** Draw an engine configuration for a simulated run from @p r: windows, MTU, selective
 *  repeat or go-back-N, flow control, an ISN near the wrap, timers (dead after 2 s). */
inline void draw_engine_config(Rng& r, rel::Config& c) {
  c.send_window = 1u << (6 + r.below(5));  // 64 .. 1024 units
  c.recv_window = 1u << (5 + r.below(5));  // 32 .. 512 slots
  c.mtu = r.chance(0.2) ? 400 + static_cast<uint32_t>(r.below(600)) : 1454;
  c.max_message_size = 64 * 1024;
  c.send_buffer_bytes = 256 * 1024;
  if ((c.max_message_size + rel::unit_capacity(c)) / rel::unit_capacity(c) > c.send_window)
    c.send_window = 1024;
  c.selective_repeat = !r.chance(0.25);
  c.flow_control = !r.chance(0.15);
  if (r.chance(0.5)) c.initial_seq = 0xFFFFFFFFu - static_cast<uint32_t>(r.below(3000));
  c.ack_delay_ns = (1 + r.below(10)) * rel::kMs;
  c.rto_min_ns = 2 * rel::kMs + c.ack_delay_ns;
  c.rto_initial_ns = 20 * rel::kMs;
  c.rto_max_ns = 500 * rel::kMs;
  c.ack_refresh_ns = 100 * rel::kMs;
  c.dead_after_ns = 2 * rel::kSec;
}

/** An event the engines reported to a node's application (timeline for restart tests). */
struct PeerEvent {
  enum Kind { kUp, kReset, kDead } kind;
  uint64_t t;
  NodeId node, peer;
  uint64_t discarded;
};

class Cluster {
 public:
  Cluster(uint64_t seed, const Scenario& sc)
      : sc_(sc), net_(seed, sc.nodes), net_b_(mix(seed ^ 0xB), sc.nodes), rng_(mix(seed)), nodes_(sc.nodes) {
    net_.set_all(sc.faults);
    for (const auto& w : sc.drops) net_.add_drop(w);
    net_b_.set_all(sc.faults_b);
    for (const auto& w : sc.drops_b) net_b_.add_drop(w);
    streams_.resize(size_t{sc.nodes} * sc.nodes);
    uint32_t senders = sc.one_way ? 1 : sc.nodes;
    uint64_t n_streams = uint64_t{senders} * (sc.nodes - 1);
    for (NodeId s = 0; s < senders; ++s)
      for (NodeId d = 0; d < sc.nodes; ++d)
        if (s != d) stream(s, d).quota = sc.msgs / n_streams;
    for (NodeId i = 0; i < sc.nodes; ++i) {
      nodes_[i].c = this;
      nodes_[i].id = i;
      nodes_[i].seed = mix(seed + 1000 * i);
      nodes_[i].next_app = rng_.below(sc.app_gap_ns + 1);
      start(i, 1);
    }
  }

  /** Run to completion. @return "" when the property held, else what broke. */
  std::string run() {
    uint32_t same = 0;
    while (error_.empty()) {
      if (done()) {
        for (const auto& n : nodes_) {
          if (n.e && n.e->memory_bytes() != n.memory) return "engine memory grew";
          if (n.lent.size() >= sc_.nodes) return "more rebuild buffers held than peers";
        }
        return "";
      }
      if (now_ > sc_.time_limit_ns) return "time limit reached: " + progress();
      step();
      if (done()) continue;  // finish at the time the last message arrived
      uint64_t next = next_time();
      if (next <= now_) {
        if (++same > 200000) return "livelock at t=" + std::to_string(now_) + progress();
        next = now_;
      } else {
        same = 0;
      }
      now_ = next;
    }
    return error_;
  }

  uint64_t now() const { return now_; }
  Network& net() { return net_; }
  Network& net_b() { return net_b_; }
  rel::Engine* engine(NodeId i) { return nodes_[i].e.get(); }
  /** Node @p i's link set (Scenario::redundant), or nullptr. */
  rel::red::LinkSet* link_set(NodeId i) { return nodes_[i].set.get(); }
  /** Network counters summed over the link sets of nodes up now. */
  rel::red::NetCounters net_counters(uint8_t net) const {
    rel::red::NetCounters t;
    for (const auto& n : nodes_) {
      if (!n.set) continue;
      const auto& c = n.set->counters(net);
      t.frames_sent += c.frames_sent, t.frames_received += c.frames_received;
      t.heartbeats_lost += c.heartbeats_lost, t.resent += c.resent, t.failovers += c.failovers;
      t.failbacks += c.failbacks, t.duplicates_dropped += c.duplicates_dropped;
      t.stale_passed += c.stale_passed;
    }
    return t;
  }
  uint64_t delivered() const {
    uint64_t n = 0;
    for (const auto& s : streams_) n += s.delivered;
    return n;
  }
  uint64_t delivered_bytes() const { return delivered_bytes_; }
  /** @return messages delivered in buffers the applications lent (Scenario::lend_above). */
  uint64_t rebuilt() const { return rebuilt_; }
  /** @return units held in their received frames (Scenario::hold_frames). */
  uint64_t held() const { return held_; }
  uint64_t excused() const {
    uint64_t n = 0;
    for (const auto& s : streams_) n += s.excused_below;
    return n;
  }
  /** Sum of engine counters over nodes currently up. */
  rel::PeerCounters counters() const {
    rel::PeerCounters t = past_;
    for (const auto& n : nodes_)
      if (n.e) t.add(n.e->total_counters());
    return t;
  }
  size_t max_memory() const { return max_memory_; }
  /** Every on_peer_up / on_peer_reset / on_peer_dead, in time order. */
  const std::vector<PeerEvent>& events() const { return events_; }

 private:
  struct Stream {
    uint64_t quota = 0;
    uint64_t sent = 0;
    uint64_t excused_below = 0;  ///< indices below this may be missing
    uint64_t next = 0;           ///< every index below this was delivered or excused
    uint64_t delivered = 0;
    bool canceled = false;
  };

  struct Node;
  /** One of a node's two networks as its link set sees it (Scenario::redundant). */
  struct NetPort final : NetPortOf<Node> {
    void* hold_frame() override { return n->hold_frame(); }
    void release_frame(void* h) override { n->release_frame(h); }
  };

  struct Node : rel::FrameSink, rel::AppSink {
    Cluster* c = nullptr;
    NodeId id = 0;
    uint64_t time() const { return c->now_; }
    uint32_t epoch = 0;
    uint32_t starts = 0;  ///< incarnations so far (seeds each one apart, whatever its epoch)
    uint64_t seed = 0;
    uint64_t next_app = 0;
    bool up = false;
    size_t memory = 0;
    std::unique_ptr<rel::Engine> e;
    NetPort ports[2];
    std::unique_ptr<rel::red::LinkSet> set;  ///< Scenario::redundant: between e and ports
    std::vector<uint8_t> cached;  ///< the message app_step is trying to send
    NodeId cached_dst = ~0u;
    uint64_t cached_idx = ~uint64_t{0};

    bool send_frame(NodeId peer, std::span<const uint8_t> f) override {
      TrackAllocs off(false);
      return c->net_.transmit(id, peer, f, c->now_);
    }

    // Messages by reference (Scenario::send_by_ref): each buffer comes back exactly once.
    std::map<uint8_t*, size_t> by_ref;
    std::deque<uint8_t*> given_back;  ///< overwritten, freed 64 later
    std::vector<uint8_t> joined;
    bool chains() const override { return c->sc_.send_by_ref; }
    bool send_ext(NodeId peer, uint8_t*, std::span<uint8_t> head, std::span<const uint8_t> ext, uint8_t) override {
      TrackAllocs off(false);
      joined.assign(head.begin(), head.end());
      joined.insert(joined.end(), ext.begin(), ext.end());
      return c->net_.transmit(id, peer, joined, c->now_);
    }
    void ext_done(uint64_t cookie) override {
      TrackAllocs off(false);
      auto it = by_ref.find(reinterpret_cast<uint8_t*>(cookie));
      if (it == by_ref.end()) {
        c->error_ = "a message by reference given back twice, or never sent so";
        return;
      }
      std::memset(it->first, 0xEE, it->second);
      given_back.push_back(it->first);
      by_ref.erase(it);
      if (given_back.size() > 64) delete[] given_back.front(), given_back.pop_front();
    }
    /** Send the message in n.cached by reference, from a copy of its own. */
    int send_ref(NodeId d, uint32_t flags, uint64_t now) {
      auto* b = new uint8_t[cached.size() + 1];
      std::memcpy(b, cached.data(), cached.size());
      int rc;
      {
        TrackAllocs on(true);
        rc = e->send_ref(d, {b, cached.size()}, flags, now, reinterpret_cast<uint64_t>(b));
      }
      if (rc == 0) by_ref.emplace(b, cached.size());
      else delete[] b;
      return rc == 1 ? 0 : rc;
    }
    bool deliver(NodeId peer, std::span<const uint8_t> m) override {
      TrackAllocs off(false);
      return c->on_deliver(peer, id, m);
    }
    void on_peer_up(NodeId peer) override { c->log(PeerEvent::kUp, id, peer, 0); }
    void on_peer_reset(NodeId peer, uint64_t d) override {
      c->log(PeerEvent::kReset, id, peer, d);
      c->excuse(id, peer, false);
    }
    void on_peer_dead(NodeId peer, uint64_t d) override {
      c->log(PeerEvent::kDead, id, peer, d);
      c->excuse(id, peer, true);
    }

    // Rebuild buffers lent to the engine: each comes back exactly once, delivered with its
    // message or given back (the engine goes first: it gives back what it still holds).
    std::set<const uint8_t*> lent;
    Node() = default;
    Node(Node&&) = default;
    ~Node() override {
      e.reset();
      set.reset();
      for (auto& [b, len] : by_ref) delete[] b;
      for (uint8_t* b : given_back) delete[] b;
    }
    uint64_t rebuild_above() const override { return c->sc_.lend_above; }
    rel::RebuildBuffer rebuild_buffer(NodeId) override {
      TrackAllocs off(false);
      if (lent.size() >= c->sc_.lend_buffers) return {};
      const uint64_t cap = c->sc_.cfg.max_message_size;
      auto* b = new uint8_t[cap];
      lent.insert(b);
      return {b, cap, b};
    }
    bool deliver_rebuilt(NodeId peer, std::span<const uint8_t> m, rel::RebuildBuffer b) override {
      TrackAllocs off(false);
      if (m.data() != b.data || m.size() > b.cap) c->error_ = "a rebuilt message outside its buffer";
      if (!c->on_deliver(peer, id, m)) return false;
      rebuild_buffer_free(peer, b);
      ++c->rebuilt_;
      return true;
    }
    // Received frames the engine holds (Scenario::hold_frames).
    test::HeldFrames held;
    void* hold_frame() override {
      TrackAllocs off(false);
      void* h = held.hold();
      c->held_ += h != nullptr;
      return h;
    }
    void release_frame(void* h) override {
      TrackAllocs off(false);
      if (!held.release(h)) c->error_ = "a received frame given back twice, or never held";
    }
    /** Hand @p f, received on network @p k, to the engine (through the link set). */
    void receive(uint8_t k, std::span<const uint8_t> f, uint64_t now) {
      TrackAllocs on(true);
      if (set)
        set->on_frame(k, f, now);
      else
        e->on_frame(f, now);
    }
    /** As receive(), in a buffer of its own the engine may hold. */
    void receive_held(uint8_t k, std::span<const uint8_t> f, uint64_t now) {
      receive(k, held.begin(f), now);
      held.end();
    }

    void rebuild_buffer_free(NodeId, rel::RebuildBuffer b) override {
      TrackAllocs off(false);
      if (lent.erase(b.data) != 1) c->error_ = "a rebuild buffer given back twice, or never lent";
      delete[] b.data;
    }
  };

  Stream& stream(NodeId s, NodeId d) { return streams_[size_t{s} * sc_.nodes + d]; }

  void start(NodeId i, uint32_t epoch) {
    Node& n = nodes_[i];
    rel::Config cfg = sc_.cfg;
    cfg.node_id = i;
    cfg.epoch = epoch;
    cfg.seed = n.seed + ++n.starts;
    n.epoch = epoch;
    rel::FrameSink* sink = &n;
    if (sc_.redundant) {
      rel::red::fit_engine(sc_.red, &cfg);
      n.ports[0].n = &n, n.ports[0].net = &net_;
      n.ports[1].n = &n, n.ports[1].net = &net_b_;
      n.set = std::make_unique<rel::red::LinkSet>(sc_.red, i, static_cast<uint32_t>(mix(cfg.seed)),
                                                  &n.ports[0], &n.ports[1]);
      sink = n.set.get();
    }
    int rc = rel::Engine::create(cfg, sink, &n, &n.e);
    if (rc != 0) {
      error_ = "Engine::create failed: " + std::to_string(rc);
      return;
    }
    if (n.set) n.set->attach(n.e.get());
    for (NodeId j = 0; j < sc_.nodes; ++j) {
      if (j == i) continue;
      n.e->add_peer(j, now_);
      if (n.set) n.set->add_peer(j, now_);
    }
    n.memory = n.e->memory_bytes();
    max_memory_ = std::max(max_memory_, n.memory);
    n.up = true;
  }

  void crash(NodeId i) {
    Node& n = nodes_[i];
    past_.add(n.e->total_counters());
    n.e.reset();
    n.set.reset();
    n.up = false;
    if (!n.lent.empty()) error_ = "rebuild buffers kept past the engine's end";
    if (n.held.holds() != 0) error_ = "received frames held past the engine's end";
    if (!n.by_ref.empty()) error_ = "messages by reference kept past the engine's end";
    for (NodeId j = 0; j < sc_.nodes; ++j) {
      if (j == i) continue;
      excuse(i, j, false);  // what i had not confirmed dies with it
      excuse(j, i, false);  // what i acked but had not delivered dies with it
    }
  }

  void log(PeerEvent::Kind k, NodeId node, NodeId peer, uint64_t discarded) {
    TrackAllocs off(false);
    events_.push_back({k, now_, node, peer, discarded});
  }

  void excuse(NodeId s, NodeId d, bool cancel) {
    Stream& st = stream(s, d);
    st.excused_below = st.sent;
    if (cancel) st.canceled = true;
  }

  bool on_deliver(NodeId src, NodeId dst, std::span<const uint8_t> m) {
    for (const auto& s : sc_.stalls)
      if (s.node == dst && now_ >= s.from && now_ < s.to) return false;
    if (rng_.chance(sc_.refuse)) return false;
    Stream& st = stream(src, dst);
    if (m.size() < 16) return fail("short message", src, dst, 0), true;
    uint64_t idx;
    uint32_t hs, hd;
    std::memcpy(&idx, m.data(), 8);
    std::memcpy(&hs, m.data() + 8, 4);
    std::memcpy(&hd, m.data() + 12, 4);
    if (hs != src || hd != dst) return fail("misdelivered", src, dst, idx), true;
    if (idx >= st.sent) return fail("never sent", src, dst, idx), true;
    if (idx < st.next) return fail("duplicate or out of order", src, dst, idx), true;
    if (idx > st.next && idx > st.excused_below)
      return fail(
                 "skipped unexcused message " + std::to_string(std::max(st.next, st.excused_below)),
                 src, dst, idx),
             true;
    if (m.size() != size_of(src, dst, idx) || !content_ok(src, dst, idx, m))
      return fail("content corrupted", src, dst, idx), true;
    st.next = idx + 1;
    st.delivered++;
    delivered_bytes_ += m.size();
    return true;
  }

  void fail(const std::string& what, NodeId s, NodeId d, uint64_t idx) {
    if (!error_.empty()) return;
    error_ = what + " (stream " + std::to_string(s) + "->" + std::to_string(d) + ", index " +
             std::to_string(idx) + ", t=" + std::to_string(now_) + ")";
  }

  size_t size_of(NodeId s, NodeId d, uint64_t idx) const {
    if (sc_.fixed_size >= 16) return sc_.fixed_size;
    uint64_t h = mix(idx * 977 + s * 31 + d);
    if ((h % 10000) < sc_.big * 10000) return 16 + (h >> 20) % sc_.big_size;
    return 16 + (h >> 20) % sc_.max_size;
  }

  static void fill(NodeId s, NodeId d, uint64_t idx, uint8_t* p, size_t len) {
    std::memcpy(p, &idx, 8);
    std::memcpy(p + 8, &s, 4);
    std::memcpy(p + 12, &d, 4);
    uint64_t x = mix(idx ^ (uint64_t{s} << 40) ^ (uint64_t{d} << 50));
    for (size_t i = 16; i < len; ++i) {
      if ((i & 7) == 0) x = mix(x);
      p[i] = static_cast<uint8_t>(x >> ((i & 7) * 8));
    }
  }

  bool content_ok(NodeId s, NodeId d, uint64_t idx, std::span<const uint8_t> m) {
    scratch_.resize(m.size());
    fill(s, d, idx, scratch_.data(), m.size());
    return std::memcmp(scratch_.data(), m.data(), m.size()) == 0;
  }

  void app_step(Node& n) {
    // One burst on one stream of this node that still has messages to send.
    std::vector<NodeId> open;
    for (NodeId d = 0; d < sc_.nodes; ++d)
      if (d != n.id && !stream(n.id, d).canceled && stream(n.id, d).sent < stream(n.id, d).quota)
        open.push_back(d);
    n.next_app = open.empty() ? ~uint64_t{0} : now_ + 1 + rng_.below(2 * sc_.app_gap_ns);
    if (open.empty()) return;
    NodeId d = open[rng_.below(open.size())];
    Stream& st = stream(n.id, d);
    uint64_t burst = 1 + rng_.below(sc_.max_burst);
    for (uint64_t k = 0; k < burst && st.sent < st.quota; ++k) {
      if (n.cached_dst != d || n.cached_idx != st.sent) {  // a refused send keeps its bytes
        size_t len = size_of(n.id, d, st.sent);
        n.cached.resize(len);
        fill(n.id, d, st.sent, n.cached.data(), len);
        n.cached_dst = d;
        n.cached_idx = st.sent;
      }
      uint32_t flags = rng_.chance(sc_.fast) ? rel::send_flag::kFastpath : 0;
      int rc;
      if (sc_.send_by_ref) {
        rc = n.send_ref(d, flags, now_);
      } else {
        TrackAllocs on(true);
        rc = n.e->send(d, n.cached, flags, now_);
      }
      if (rc == 0) {
        st.sent++;
      } else if (rc == -ENOTCONN) {
        excuse(n.id, d, true);
        break;
      } else if (rc == -EAGAIN) {
        break;
      } else {
        fail("send returned " + std::to_string(rc), n.id, d, st.sent);
        break;
      }
    }
  }

  void step() {
    for (const auto& r : sc_.restarts) {
      if (r.at == now_ && nodes_[r.node].up) crash(r.node);
      if (r.at + r.down_ns == now_ && !nodes_[r.node].up)
        start(r.node, nodes_[r.node].epoch + static_cast<uint32_t>(r.epoch_step));
    }
    for (uint8_t k = 0; k < 2; ++k)
      (k == 0 ? net_ : net_b_).deliver_due(now_, [&](NodeId, NodeId to, std::span<const uint8_t> f) {
        Node& n = nodes_[to];
        if (!n.up) return;
        if (sc_.hold_frames) return n.receive_held(k, f, now_);
        n.receive(k, f, now_);
      });
    for (auto& n : nodes_) {
      if (!n.up) continue;
      if (n.set) {
        TrackAllocs on(true);
        n.set->set_now(now_);
        if (n.set->next_deadline() <= now_) n.set->poll(now_);
      }
      if (n.next_app <= now_) app_step(n);
      if (n.e->next_deadline() <= now_) {
        TrackAllocs on(true);
        n.e->poll(now_);
      }
      if ((++steps_ & 1023) == 0 && n.e->memory_bytes() != n.memory)
        fail("engine memory grew", n.id, n.id, 0);
    }
    if (g_engine_allocs != 0) fail("heap allocation inside the engine", 0, 0, g_engine_allocs);
  }

  uint64_t next_time() const {
    uint64_t t = std::min(net_.next_time(), net_b_.next_time());
    for (const auto& n : nodes_) {
      if (!n.up) continue;
      t = std::min({t, n.next_app, n.e->next_deadline()});
      if (n.set) t = std::min(t, n.set->next_deadline());
    }
    for (const auto& r : sc_.restarts) {
      if (r.at > now_) t = std::min(t, r.at);
      if (r.at + r.down_ns > now_) t = std::min(t, r.at + r.down_ns);
    }
    for (const auto& s : sc_.stalls)
      if (s.to > now_) t = std::min(t, s.to);
    return t;
  }

  bool done() const {
    for (const auto& r : sc_.restarts)
      if (r.at + r.down_ns >= now_) return false;
    for (size_t i = 0; i < streams_.size(); ++i) {
      const Stream& st = streams_[i];
      if (!st.canceled && st.sent < st.quota) return false;
      if (std::max(st.next, st.excused_below) < st.sent) return false;
    }
    return true;
  }

  std::string progress() const {
    std::string s;
    for (NodeId a = 0; a < sc_.nodes; ++a)
      for (NodeId b = 0; b < sc_.nodes; ++b) {
        if (a == b) continue;
        const Stream& st = streams_[size_t{a} * sc_.nodes + b];
        s += " [" + std::to_string(a) + "->" + std::to_string(b) + " sent " +
             std::to_string(st.sent) + "/" + std::to_string(st.quota) + " next " +
             std::to_string(st.next) + " excused " + std::to_string(st.excused_below) +
             (st.canceled ? " canceled" : "") + " state " +
             (nodes_[a].e ? std::to_string(static_cast<int>(nodes_[a].e->state(b))) : "down") + "]";
      }
    for (const auto& n : nodes_) {
      if (!n.e) continue;
      rel::PeerCounters c = n.e->total_counters();
      char buf[512];
      std::snprintf(
          buf, sizeof buf,
          "\n  node %u: pkts_sent %lu recv %lu acks_only %lu valid_acks %lu nacks %lu/%lu "
          "units %lu retx %lu rto %lu ovf %lu ooo %lu dup %lu refused %lu stalls %lu "
          "ackreq %lu bp %lu rejects %lu next_deadline %lu",
          n.id, c.pkts_sent, c.pkts_received, c.ack_only_sent, c.valid_acks, c.valid_nacks,
          c.nacks_sent, c.units_sent, c.msgs_retransmitted, c.rto_expired, c.overflow,
          c.out_of_order, c.dup_received, c.deliver_refused, c.credit_stalls, c.ack_reqs_sent,
          c.tx_backpressure, c.rejects(), n.e->next_deadline());
      s += buf;
      for (NodeId j = 0; j < sc_.nodes; ++j)
        if (j != n.id) s += "\n    peer " + std::to_string(j) + ": " + n.e->debug_state(j);
      for (size_t r = 1; r < static_cast<size_t>(rel::Reject::kCount); ++r)
        if (c.reject[r])
          s += std::string(" ") + rel::reject_name(static_cast<rel::Reject>(r)) + "=" +
               std::to_string(c.reject[r]);
    }
    return s;
  }

  Scenario sc_;
  Network net_;
  Network net_b_;  ///< network B (Scenario::redundant)
  Rng rng_;
  std::vector<Node> nodes_;
  std::vector<Stream> streams_;
  std::vector<uint8_t> scratch_;
  std::vector<PeerEvent> events_;
  rel::PeerCounters past_;
  uint64_t now_ = 0;
  uint64_t delivered_bytes_ = 0;
  uint64_t steps_ = 0;
  size_t max_memory_ = 0;
  std::string error_;
  uint64_t rebuilt_ = 0;
  uint64_t held_ = 0;
};

}  // namespace imago::sim
