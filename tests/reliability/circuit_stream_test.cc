// SPDX-License-Identifier: BSD-3-Clause
// Real engines over virtual circuits (reliability/circuits/circuit_sink.h), in the
// simulator: streams between two ends through forwarding nodes, links that lose frames and
// links that die. The reliability engine runs end to end, so a frame lost on any hop is
// repaired by the two ends; a circuit that dies is opened again the other way round a ring.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "reliability/circuits/circuit_sink.h"
#include "reliability/circuits/topology.h"
#include "reliability/config.h"
#include "reliability/rng.h"
#include "tests/reliability/circuit_sim.h"

namespace imago::rel::circ {
namespace {

using test::InFlight;
using test::kMs;

/** Message @p i from @p src: its length and bytes follow from both. */
std::vector<uint8_t> message(NodeId src, uint32_t i) {
  std::vector<uint8_t> m(16 + (i * 7919u + src) % 3000);
  for (size_t k = 0; k < m.size(); ++k) m[k] = static_cast<uint8_t>(i * 31 + k * 7 + src);
  return m;
}

class Fabric {
 public:
  struct Node final : CircuitPorts, AppSink {
    Fabric* f = nullptr;
    NodeId id = 0;
    RoutingTable routes;
    std::unique_ptr<CircuitSink> sink;
    std::unique_ptr<Engine> e;
    std::map<NodeId, uint32_t> next;  ///< per source: the next message index expected
    std::string error;
    bool peer_died = false;
    bool send(PortId port, std::span<const uint8_t> fr) override { return f->carry(id, port, fr); }
    bool deliver(NodeId peer, std::span<const uint8_t> m) override {
      const uint32_t i = next[peer]++;
      if (error.empty() && std::vector<uint8_t>(m.begin(), m.end()) != message(peer, i))
        error = "message " + std::to_string(i) + " from " + std::to_string(peer) + " wrong or out of order";
      return true;
    }
    void on_peer_dead(NodeId, uint64_t) override { peer_died = true; }
  };

  Fabric(Topology t, uint64_t seed, double loss) : topo_(std::move(t)), rng_(seed), loss_(loss) {
    dead_.assign(topo_.links().size(), false);
    for (NodeId n : topo_.nodes()) {
      auto nd = std::make_unique<Node>();
      nd->f = this, nd->id = n;
      nd->routes.compute(topo_, n, dead_);
      nd->sink = std::make_unique<CircuitSink>(CircuitSink::Config{}, n, &nd->routes, seed + n, nd.get());
      nodes_[n] = std::move(nd);
    }
  }

  /** Give node @p a and @p b engines that are each other's peer. */
  void ends(NodeId a, NodeId b) {
    Config c = fast_link_preset();
    c.send_window = c.recv_window = 1024;
    c.max_message_size = 64 * 1024;
    c.send_buffer_bytes = 1 << 20;
    c.crc = true;
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      Node& n = node(x);
      c.node_id = x, c.epoch = 1, c.seed = x;
      ASSERT_EQ(Engine::create(c, n.sink.get(), &n, &n.e), 0);
      n.sink->attach(n.e.get());
      ASSERT_EQ(n.e->add_peer(y, now_), 0);
      ASSERT_EQ(n.sink->add_peer(y, now_), 0);
    }
  }

  Node& node(NodeId n) { return *nodes_.at(n); }
  uint64_t now() const { return now_; }

  void kill_link(size_t i) {
    dead_[i] = true;
    for (auto& [n, nd] : nodes_) nd->routes.compute(topo_, n, dead_);
    const Link& l = topo_.links()[i];
    node(l.a).sink->node().link_down(l.pa, now_);
    node(l.b).sink->node().link_down(l.pb, now_);
  }
  /** The index of the link between @p a and @p b. */
  size_t link(NodeId a, NodeId b) const {
    for (size_t i = 0; i < topo_.links().size(); ++i) {
      const Link& l = topo_.links()[i];
      if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return i;
    }
    return ~size_t{0};
  }

  /** Move time on by @p ns in 10 us steps: frames arrive, sinks and engines run, and
   *  @p each(now) may send. */
  template <typename F>
  void run(uint64_t ns, F&& each) {
    for (const uint64_t end = now_ + ns; now_ < end;) {
      now_ += 10'000;
      while (!queue_.empty() && queue_.front().at <= now_) {
        const InFlight d = std::move(queue_.front());
        queue_.pop_front();
        node(d.to).sink->on_frame(d.port, d.bytes, now_);
      }
      for (auto& [n, nd] : nodes_) {
        nd->sink->poll(now_);
        if (nd->e) nd->e->poll(now_);
      }
      each(now_);
    }
  }

 private:
  bool carry(NodeId from, PortId port, std::span<const uint8_t> f) {
    const int li = topo_.link_index(from, port);
    if (li < 0 || dead_[static_cast<size_t>(li)] || rng_.chance(loss_)) return true;
    const Link& l = topo_.links()[static_cast<size_t>(li)];
    const bool from_a = l.a == from && l.pa == port;
    queue_.push_back({now_ + 20'000, from_a ? l.b : l.a, from_a ? l.pb : l.pa, {f.begin(), f.end()}});
    return true;
  }

  Topology topo_;
  Rng rng_;
  double loss_;
  std::vector<bool> dead_;
  std::map<NodeId, std::unique_ptr<Node>> nodes_;
  std::deque<InFlight> queue_;
  uint64_t now_ = 0;
};

/** Send messages @p a -> @p b and back, @p per_step at a time, until @p total each way. */
struct Streams {
  NodeId a, b;
  uint32_t total, sent_ab = 0, sent_ba = 0;
  void step(Fabric& f, uint64_t now) {
    for (int k = 0; k < 4 && sent_ab < total; ++k)
      if (f.node(a).e->send(b, message(a, sent_ab), 0, now) == 0) ++sent_ab;
    for (int k = 0; k < 2 && sent_ba < total / 2; ++k)
      if (f.node(b).e->send(a, message(b, sent_ba), 0, now) == 0) ++sent_ba;
  }
  bool done(Fabric& f) { return f.node(b).next[a] == total && f.node(a).next[b] == total / 2; }
};

TEST(CircuitStream, EnginesEndToEndOverTwoLossyHopsDeliverEverythingOnceInOrder) {
  // Do: a line 1-2-3-4, every link losing 5 % of frames; streams 1 -> 4 and 4 -> 1 through
  // the forwarding nodes 2 and 3.
  Fabric f(make_line(4), 1, 0.05);
  f.ends(1, 4);
  Streams s{1, 4, 3000};
  f.run(3000 * kMs, [&](uint64_t now) { s.step(f, now); });
  // Expect: every message once, in order, intact, both ways; the hops forwarded; the ends
  // repaired what the hops lost.
  EXPECT_TRUE(s.done(f)) << f.node(4).next[1] << " and " << f.node(1).next[4];
  EXPECT_EQ(f.node(4).error, "");
  EXPECT_EQ(f.node(1).error, "");
  EXPECT_GT(f.node(2).sink->node().counters().data_forwarded, 1000u);
  EXPECT_GT(f.node(1).e->counters(4)->msgs_retransmitted, 0u);
  EXPECT_FALSE(f.node(1).peer_died || f.node(4).peer_died);
}

TEST(CircuitStream, ACircuitThatDiesIsSetUpTheOtherWayRoundARingAndTheStreamGoesOn) {
  // Do: a ring of 6; streams 1 -> 4 and back (three hops either way); the link the circuit
  // takes out of node 1 dies a third of the way through.
  Fabric f(make_ring(6), 2, 0.01);
  f.ends(1, 4);
  Streams s{1, 4, 3000};
  bool killed = false;
  f.run(3000 * kMs, [&](uint64_t now) {
    s.step(f, now);
    if (!killed && f.node(4).next[1] > 1000) {
      killed = true;
      const size_t l2 = f.link(1, 2), l6 = f.link(1, 6);
      f.kill_link(f.node(2).sink->node().counters().data_forwarded > 0 ? l2 : l6);
    }
  });
  // Expect: the circuit reopened (the other way), every message once, in order, intact, and
  // neither end declared the other dead.
  ASSERT_TRUE(killed);
  EXPECT_GE(f.node(1).sink->counters().reopened, 1u);
  EXPECT_TRUE(s.done(f)) << f.node(4).next[1] << " and " << f.node(1).next[4];
  EXPECT_EQ(f.node(4).error, "");
  EXPECT_EQ(f.node(1).error, "");
  EXPECT_FALSE(f.node(1).peer_died || f.node(4).peer_died);
}

}  // namespace
}  // namespace imago::rel::circ
