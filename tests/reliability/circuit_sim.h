// SPDX-License-Identifier: BSD-3-Clause
// A deterministic network of CircuitNodes (reliability/circuits/) over a topology: links that
// delay and lose frames with a seed, links that die (every node's routing table recomputed,
// as a routing protocol would), time moved by hand. The circuit tests and the simulator
// property drive it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <utility>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reliability/circuits/circuit_node.h"
#include "reliability/circuits/routing.h"
#include "reliability/circuits/topology.h"
#include "reliability/rng.h"

namespace imago::rel::circ::test {

inline constexpr uint64_t kMs = 1'000'000;

/** A frame on a link: where it arrives, and when. */
struct InFlight {
  uint64_t at;
  NodeId to;
  PortId port;
  std::vector<uint8_t> bytes;
};

/** What one node's ends of circuits heard, in order. */
struct EndLog final : CircuitListener {
  struct Event {
    bool up;
    CircuitId id;
    NodeId peer;
    bool origin;
    CircReason why;
  };
  std::vector<Event> events;
  void on_circuit_up(CircuitId id, NodeId peer, bool origin) override {
    events.push_back({true, id, peer, origin, CircReason::kNone});
  }
  void on_circuit_down(CircuitId id, NodeId peer, CircReason why) override {
    events.push_back({false, id, peer, false, why});
  }
};

class CircuitSim {
 public:
  struct Node : CircuitPorts {
    CircuitSim* sim = nullptr;
    NodeId id = 0;
    RoutingTable routes;
    EndLog log;
    std::unique_ptr<CircuitNode> cn;
    bool send(PortId port, std::span<const uint8_t> f) override { return sim->carry(id, port, f); }
  };

  CircuitSim(Topology t, uint64_t seed, const CircuitConfig& cfg = {}) : topo_(std::move(t)), rng_(seed) {
    dead_.assign(topo_.links().size(), false);
    for (NodeId n : topo_.nodes()) {
      auto nd = std::make_unique<Node>();
      nd->sim = this;
      nd->id = n;
      nd->routes.compute(topo_, n, dead_);
      nd->cn = std::make_unique<CircuitNode>(cfg, n, &nd->routes, seed * 7919 + n, nd.get(), &nd->log);
      nodes_[n] = std::move(nd);
    }
  }

  double loss = 0;          ///< chance each frame is lost on its link
  uint64_t delay_ns = 20'000;
  /** Drop (once) the next frames that match: for tests that lose one control frame. */
  std::function<bool(NodeId from, PortId port, std::span<const uint8_t> f)> drop;

  Node& node(NodeId n) { return *nodes_.at(n); }
  CircuitNode& cn(NodeId n) { return *nodes_.at(n)->cn; }
  const Topology& topology() const { return topo_; }
  uint64_t now() const { return now_; }
  uint64_t frames() const { return frames_; }

  /** Kill link @p i: no frame crosses it, both ends are told and compute their tables again.
   *  As in the dataplane, a node knows only its own links: the others' tables stay. */
  void kill_link(size_t i) {
    dead_[i] = true;
    for (auto& [n, nd] : nodes_) nd->routes.compute(topo_, n, seen_by(n));
    const Link& l = topo_.links()[i];
    cn(l.a).link_down(l.pa, now_);
    cn(l.b).link_down(l.pb, now_);
  }
  /** Link @p i works again (its ends' tables see it at once). */
  void revive_link(size_t i) {
    dead_[i] = false;
    for (auto& [n, nd] : nodes_) nd->routes.compute(topo_, n, seen_by(n));
  }
  bool link_dead(size_t i) const { return dead_[i]; }
  /** The dead links node @p n knows of: its own. */
  std::vector<bool> seen_by(NodeId n) const {
    std::vector<bool> d(dead_.size(), false);
    for (size_t i = 0; i < dead_.size(); ++i) d[i] = dead_[i] && (topo_.links()[i].a == n || topo_.links()[i].b == n);
    return d;
  }

  /** Move time on by @p ns, delivering frames and polling every node each 100 us. */
  void run(uint64_t ns) {
    const uint64_t end = now_ + ns;
    while (now_ < end) {
      now_ = std::min(end, now_ + 100'000);
      deliver_due();
      for (auto& [n, nd] : nodes_) nd->cn->poll(now_);
    }
  }

  /** Follow a data frame from @p n's end @p id to the other end, hop by hop through the
   *  forwarding tables. @return "" with *at and *local set, or what went wrong. */
  std::string walk(NodeId n, CircuitId id, NodeId* at, CircuitId* local) {
    PortId port;
    uint32_t vci;
    if (!cn(n).data_out(id, &port, &vci)) return "end " + std::to_string(id) + " at " + std::to_string(n) + " is not up";
    for (int hop = 0; hop < 256; ++hop) {
      const Link* l = link_of(n, port);
      if (l == nullptr) return "no link at " + std::to_string(n) + " port " + std::to_string(port);
      const bool from_a = l->a == n && l->pa == port;
      const NodeId m = from_a ? l->b : l->a;
      const PortId in = from_a ? l->pb : l->pa;
      switch (cn(m).route_data(in, vci, now_, &port, &vci, local)) {
        case CircuitNode::Verdict::kDrop: return "dropped at " + std::to_string(m);
        case CircuitNode::Verdict::kLocal: *at = m; return "";
        case CircuitNode::Verdict::kForward: n = m; break;
      }
    }
    return "a loop";
  }

 private:
  const Link* link_of(NodeId n, PortId p) const {
    auto it = port_link_.find(uint64_t{n} << 16 | p);
    if (it == port_link_.end()) {
      for (size_t i = 0; i < topo_.links().size(); ++i) {
        const Link& l = topo_.links()[i];
        port_link_[uint64_t{l.a} << 16 | l.pa] = i;
        port_link_[uint64_t{l.b} << 16 | l.pb] = i;
      }
      it = port_link_.find(uint64_t{n} << 16 | p);
      if (it == port_link_.end()) return nullptr;
    }
    return &topo_.links()[it->second];
  }

  bool carry(NodeId from, PortId port, std::span<const uint8_t> f) {
    ++frames_;
    const Link* l = link_of(from, port);
    if (l == nullptr) return true;  // nothing there: as a port with no cable
    if (dead_[static_cast<size_t>(l - topo_.links().data())]) return true;
    if (drop && drop(from, port, f)) return true;
    if (rng_.chance(loss)) return true;
    const bool from_a = l->a == from && l->pa == port;
    queue_.push_back({now_ + delay_ns, from_a ? l->b : l->a, from_a ? l->pb : l->pa, {f.begin(), f.end()}});
    return true;
  }

  void deliver_due() {
    // One delay for every link and time only moves on: the queue is in arrival order, and
    // each link stays FIFO. Frames sent while delivering arrive a delay later.
    while (!queue_.empty() && queue_.front().at <= now_) {
      const InFlight d = std::move(queue_.front());
      queue_.pop_front();
      cn(d.to).on_frame(d.port, d.bytes, now_);
    }
  }

  Topology topo_;
  Rng rng_;
  std::vector<bool> dead_;
  std::map<NodeId, std::unique_ptr<Node>> nodes_;
  mutable std::map<uint64_t, size_t> port_link_;
  std::deque<InFlight> queue_;
  uint64_t now_ = 0;
  uint64_t frames_ = 0;
};

}  // namespace imago::rel::circ::test

namespace imago::rel::circ::test {

/** What a circuit seed ran. */
struct CircuitRunStats {
  uint64_t opened = 0, up = 0, failed = 0, down_hop = 0, down_idle = 0, reopened = 0, walks = 0;
};

/**
 * Holds every node's ends to the rule: an origin hears up then down, or down, once, for a
 * circuit it opened; a destination hears up then down; each names the right peer. Feed it
 * each open() (opened()) and call sync() after running: it reads the events since.
 */
class EndChecker {
 public:
  struct End {
    bool up = false;
    bool origin = false;
    NodeId peer = 0;
  };
  using Key = std::pair<NodeId, CircuitId>;

  void opened(NodeId n, CircuitId id, NodeId dst) { ends_[{n, id}] = End{false, true, dst}; }
  /** An origin closed @p id: it hears nothing more of it. */
  void closed(NodeId n, CircuitId id) { ends_.erase({n, id}); }
  /** Apply the events each node's log got since the last call. @return "" or what broke. */
  std::string sync(CircuitSim& s, const std::vector<NodeId>& nodes, CircuitRunStats* st);
  const std::map<Key, End>& ends() const { return ends_; }
  /** Origins whose circuit went down of a dead hop since the last call, and their peers. */
  std::vector<std::pair<NodeId, NodeId>> take_dead_hops() { return std::exchange(dead_hops_, {}); }

 private:
  std::string apply(NodeId n, const EndLog::Event& e, CircuitRunStats* st);
  std::map<Key, End> ends_;
  std::map<NodeId, size_t> seen_;
  std::vector<std::pair<NodeId, NodeId>> dead_hops_;
};

inline std::string EndChecker::apply(NodeId n, const EndLog::Event& e, CircuitRunStats* st) {
  const Key k{n, e.id};
  auto it = ends_.find(k);
  const std::string at = " at node " + std::to_string(n) + " circuit " + std::to_string(e.id);
  if (e.up) {
    if (e.origin) {
      if (it == ends_.end() || !it->second.origin || it->second.up) return "an up for no open" + at;
      if (e.peer != it->second.peer) return "up to the wrong peer" + at;
      it->second.up = true;
      ++st->up;
      return "";
    }
    if (it != ends_.end()) return "accepted twice" + at;
    ends_[k] = End{true, false, e.peer};
    return "";
  }
  if (it == ends_.end()) return "a down for nothing open" + at;
  if (e.peer != it->second.peer) return "down from the wrong peer" + at;
  if (it->second.origin && !it->second.up) ++st->failed;
  if (e.why == CircReason::kHopDead) ++st->down_hop;
  if (e.why == CircReason::kIdle) ++st->down_idle;
  if (it->second.origin && e.why == CircReason::kHopDead) dead_hops_.emplace_back(n, e.peer);
  ends_.erase(it);
  return "";
}

inline std::string EndChecker::sync(CircuitSim& s, const std::vector<NodeId>& nodes, CircuitRunStats* st) {
  for (NodeId n : nodes) {
    const auto& ev = s.node(n).log.events;
    for (size_t& i = seen_[n]; i < ev.size(); ++i)
      if (std::string err = apply(n, ev[i], st); !err.empty()) return err;
  }
  return "";
}

/**
 * One seed of the circuit property: on a 64-node ring or fat tree (or a line of 16), links
 * losing up to 10 % of frames; 40 circuits between random nodes; up to 3 links die; circuits
 * that went down are opened again (a ring finds the other way); circuits up at their origin
 * carry traffic both ways (a walk through the forwarding tables every 20 ms, as an engine's
 * frames would); at the end every origin closes. Property: EndChecker's; a circuit up at its
 * origin reaches its destination's end and back; and in the end every table at every node
 * is empty.
 */
class CircuitRun {
 public:
  explicit CircuitRun(uint64_t seed) : seed_(seed), r_(seed * 0x9E3779B97F4A7C15ull + 17) {}

  std::string run(CircuitRunStats* st);

 private:
  Topology pick_topology();
  void open(CircuitSim& s, NodeId a, NodeId b);
  std::string traffic(CircuitSim& s, bool check);
  std::string phase(CircuitSim& s, uint64_t ns, bool check_walks);

  uint64_t seed_;
  Rng r_;
  std::vector<NodeId> nodes_;
  EndChecker ends_;
  CircuitRunStats* st_ = nullptr;
};

inline Topology CircuitRun::pick_topology() {
  switch (seed_ % 3) {
    case 0: return make_ring(64);
    case 1: return make_fat_tree(64, 8);
    default: return make_line(16);
  }
}

inline void CircuitRun::open(CircuitSim& s, NodeId a, NodeId b) {
  CircuitId id;
  if (a == b || s.cn(a).open(b, s.now(), &id) != 0) return;  // unreachable after a link died
  ends_.opened(a, id, b);
  ++st_->opened;
}

// Frames both ways over every circuit up at its origin. With @p check, each must arrive at
// its destination's end, which names the origin as its peer.
inline std::string CircuitRun::traffic(CircuitSim& s, bool check) {
  for (const auto& [k, e] : ends_.ends()) {
    if (!e.origin || !e.up) continue;
    NodeId at;
    CircuitId far;
    ++st_->walks;
    std::string err = s.walk(k.first, k.second, &at, &far);
    if (err.empty()) {
      auto f = ends_.ends().find({at, far});
      if (at != e.peer || f == ends_.ends().end() || f->second.peer != k.first) err = "arrived at the wrong end";
      else if (NodeId back; (err = s.walk(at, far, &back, &far)).empty() && back != k.first) err = "came back elsewhere";
    }
    if (check && !err.empty())
      return "circuit " + std::to_string(k.first) + "->" + std::to_string(e.peer) + " up but broken: " + err;
  }
  return "";
}

inline std::string CircuitRun::phase(CircuitSim& s, uint64_t ns, bool check_walks) {
  for (uint64_t t = 0; t < ns; t += 20 * kMs) {
    s.run(20 * kMs);
    if (std::string err = ends_.sync(s, nodes_, st_); !err.empty()) return err;
    if (std::string err = traffic(s, false); !err.empty()) return err;
  }
  return check_walks ? traffic(s, true) : "";
}

inline std::string CircuitRun::run(CircuitRunStats* st) {
  st_ = st;
  CircuitConfig c;
  c.setup_retry_ns = (5 + r_.below(20)) * kMs;
  c.setup_tries = 4 + static_cast<uint32_t>(r_.below(5));
  c.idle_ns = 300 * kMs;
  CircuitSim s(pick_topology(), seed_, c);
  s.loss = r_.chance(0.3) ? 0 : r_.uniform() * 0.1;
  nodes_ = s.topology().nodes();
  const uint64_t settle = c.setup_retry_ns * (c.setup_tries + 2);
  // Open, let every set-up settle: the circuits up at their origins work both ways.
  for (int i = 0; i < 40; ++i) open(s, nodes_[r_.below(nodes_.size())], nodes_[r_.below(nodes_.size())]);
  if (std::string err = phase(s, settle, true); !err.empty()) return err;
  // Kill up to 3 links; what crossed them goes down at both ends (or idles out when a
  // TEARDOWN was lost); what went down of a dead hop is opened again.
  const uint64_t kills = r_.below(4);
  for (uint64_t i = 0; i < kills; ++i) s.kill_link(r_.below(s.topology().links().size()));
  if (std::string err = phase(s, c.idle_ns + 2 * settle, false); !err.empty()) return err;
  for (const auto& [a, b] : ends_.take_dead_hops()) {
    const uint64_t before = st_->opened;
    open(s, a, b);
    st_->reopened += st_->opened - before;
  }
  if (std::string err = phase(s, settle, true); !err.empty()) return err;
  // Close from every origin; after the idle time nothing may be left anywhere.
  std::vector<EndChecker::Key> origins;
  for (const auto& [k, e] : ends_.ends())
    if (e.origin) origins.push_back(k);
  for (const auto& k : origins) s.cn(k.first).close(k.second, s.now()), ends_.closed(k.first, k.second);
  if (std::string err = phase(s, c.idle_ns + settle, false); !err.empty()) return err;
  for (NodeId n : nodes_)
    if (s.cn(n).in_use() != 0) return "node " + std::to_string(n) + " still holds " + std::to_string(s.cn(n).in_use());
  if (!ends_.ends().empty()) return std::to_string(ends_.ends().size()) + " ends never heard their circuit go";
  return "";
}

}  // namespace imago::rel::circ::test
