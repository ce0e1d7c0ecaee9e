// SPDX-License-Identifier: BSD-3-Clause
// Real engines over virtual circuits (reliability/circuits/circuit_sink.h), in the
// simulator: streams between two ends through forwarding nodes, links that lose frames and
// links that die. The reliability engine runs end to end, so a frame lost on any hop is
// repaired by the two ends; a circuit that dies is opened again the other way round a ring.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
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

using test::EndLog;
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
    EndLog log;  ///< what its sink told of its ends
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
      nd->sink = std::make_unique<CircuitSink>(CircuitSink::Config{}, n, &nd->routes, seed + n, nd.get(), &nd->log);
      nodes_[n] = std::move(nd);
    }
  }

  /** Give node @p a and @p b engines that are each other's peer. */
  void ends(NodeId a, NodeId b) {
    start(a, b, 1);
    start(b, a, 1);
  }
  /** Node @p n starts again (a new process: circuits and session gone), epoch @p epoch. */
  void restart(NodeId n, NodeId peer, uint32_t epoch) {
    Node& nd = node(n);
    nd.e.reset();
    nd.sink = std::make_unique<CircuitSink>(CircuitSink::Config{}, n, &nd.routes, epoch * 1000 + n, &nd, &nd.log);
    start(n, peer, epoch);
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
  /** Kill link @p i as only node @p n has noticed so far (the other end's HELLOs have not
   *  missed enough yet): routes change, the other end tears nothing down. */
  void kill_link_seen_by(size_t i, NodeId n) {
    dead_[i] = true;
    for (auto& [m, nd] : nodes_) nd->routes.compute(topo_, m, dead_);
    const Link& l = topo_.links()[i];
    node(n).sink->node().link_down(l.a == n ? l.pa : l.pb, now_);
  }
  /** A frame as if node @p from sent it on @p port (never lost): forgeries, replays. */
  void inject(NodeId from, PortId port, std::span<const uint8_t> f) {
    const int li = topo_.link_index(from, port);
    const Link& l = topo_.links()[static_cast<size_t>(li)];
    const bool from_a = l.a == from && l.pa == port;
    queue_.push_back({now_ + 20'000, from_a ? l.b : l.a, from_a ? l.pb : l.pa, {f.begin(), f.end()}});
  }
  /** Node @p a's port on its link to @p b. */
  PortId topology_port(NodeId a, NodeId b) const {
    const Link& l = topo_.links()[link(a, b)];
    return l.a == a ? l.pa : l.pb;
  }
  /** Sees every frame a node sends (before loss). */
  std::function<void(NodeId from, PortId port, std::span<const uint8_t> f)> tap;

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
  void start(NodeId x, NodeId y, uint32_t epoch) {
    Config c = fast_link_preset();
    c.send_window = c.recv_window = 1024;
    c.max_message_size = 64 * 1024;
    c.send_buffer_bytes = 1 << 20;
    c.crc = true;
    c.node_id = x, c.epoch = epoch, c.seed = x + epoch;
    Node& n = node(x);
    ASSERT_EQ(Engine::create(c, n.sink.get(), &n, &n.e), 0);
    n.sink->attach(n.e.get());
    ASSERT_EQ(n.e->add_peer(y, now_), 0);
    ASSERT_EQ(n.sink->add_peer(y, now_), 0);
  }

  bool carry(NodeId from, PortId port, std::span<const uint8_t> f) {
    if (tap) tap(from, port, f);
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

/** Run @p s for 3 s; a third of the way through, @p kill the link the circuit takes out of
 *  node 1 (to @p left or to @p right). @return whether it did. */
template <typename Kill>
bool stream_and_kill(Fabric& f, Streams& s, NodeId left, NodeId right, Kill&& kill) {
  bool killed = false;
  f.run(3000 * kMs, [&](uint64_t now) {
    s.step(f, now);
    if (killed || f.node(s.b).next[s.a] <= s.total / 3) return;
    killed = true;
    kill(f.node(left).sink->node().counters().data_forwarded > 0 ? f.link(1, left) : f.link(1, right));
  });
  return killed;
}

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
  const bool killed = stream_and_kill(f, s, 2, 6, [&](size_t l) { f.kill_link(l); });
  // Expect: the circuit reopened (the other way), every message once, in order, intact, and
  // neither end declared the other dead.
  ASSERT_TRUE(killed);
  EXPECT_GE(f.node(1).sink->counters().reopened, 1u);
  EXPECT_TRUE(s.done(f)) << f.node(4).next[1] << " and " << f.node(1).next[4];
  EXPECT_EQ(f.node(4).error, "");
  EXPECT_EQ(f.node(1).error, "");
  EXPECT_FALSE(f.node(1).peer_died || f.node(4).peer_died);
}

/** A SETUP of node 1's for node 3 as anyone on a link could write one. */
std::vector<uint8_t> forged_setup(Rng& r) {
  std::vector<uint8_t> f(kMaxControl);
  circ_header(f.data(), CircKind::kSetup, 0, 64);
  SetupBody b;
  b.origin.set(1), b.dst.set(3);
  b.nonce.set(static_cast<uint32_t>(r.next() | 1)), b.back_vci.set(static_cast<uint32_t>(r.next() | 1));
  std::memcpy(f.data() + sizeof(CircuitHeader), &b, sizeof b);
  circ_seal(f.data(), sizeof b);
  return f;
}

/** Node 1's SETUPs (to node 3) as a recorder on its link would keep them. */
void record_setups(Fabric& f, std::vector<std::vector<uint8_t>>* out) {
  f.tap = [out](NodeId from, PortId, std::span<const uint8_t> fr) {
    if (from == 1 && fr.size() > 1 && fr[1] == static_cast<uint8_t>(CircKind::kSetup))
      out->emplace_back(fr.begin(), fr.end());
  };
}

size_t downs(const EndLog& log) {
  size_t n = 0;
  for (const EndLog::Event& e : log.events) n += !e.up;
  return n;
}

TEST(CircuitStream, ForgedAndReplayedSetUpsLeaveALiveCircuitAndItsStreamAlone) {
  // Do: a line 1-2-3, streams 1 -> 3 and back; SETUPs recorded on link 1-2 in an earlier
  // run (other nonces) and in this one (the live circuit's). Once the circuit is up, every
  // 50 us of the stream (20,000 a second) a SETUP 1 -> 3 arrives at node 2 from node 1's
  // side: a forged one (random nonce and back_vci), then a replayed one, byte for byte.
  std::vector<std::vector<uint8_t>> replays;
  {
    Fabric earlier(make_line(3), 77, 0);
    record_setups(earlier, &replays);
    earlier.ends(1, 3);
    earlier.run(50 * kMs, [](uint64_t) {});
  }
  Fabric f(make_line(3), 3, 0);
  record_setups(f, &replays);
  f.ends(1, 3);
  f.run(50 * kMs, [](uint64_t) {});
  f.tap = nullptr;
  ASSERT_TRUE(f.node(3).sink->up(1));
  ASSERT_GE(replays.size(), 2u);
  const PortId port = f.topology_port(1, 2);
  Rng r(5);
  Streams s{1, 3, 20000};
  uint64_t next = 0, sent = 0;
  f.run(3000 * kMs, [&](uint64_t now) {
    s.step(f, now);
    if (now < next || s.done(f)) return;
    next = now + 50'000;
    f.inject(1, port, sent % 2 == 0 ? forged_setup(r) : replays[(sent / 2) % replays.size()]);
    ++sent;
  });
  // Expect: the stream whole, in order, both ways; neither end saw the circuit go down or
  // the other die; node 3 held each new set-up and let it go unproven, and counted them.
  EXPECT_TRUE(s.done(f)) << f.node(3).next[1] << " and " << f.node(1).next[3];
  EXPECT_EQ(f.node(3).error, "");
  EXPECT_EQ(f.node(1).error, "");
  EXPECT_FALSE(f.node(1).peer_died || f.node(3).peer_died);
  EXPECT_EQ(downs(f.node(1).log), 0u);
  EXPECT_EQ(downs(f.node(3).log), 0u);
  const CircuitSinkCounters& c = f.node(3).sink->counters();
  EXPECT_GT(sent, 1000u);
  EXPECT_GE(c.setups_held, sent / 2);
  EXPECT_GE(c.setups_unproven + 1, c.setups_held);
  EXPECT_LE(f.node(3).sink->node().in_use(), 2u);  // the live circuit and one held
  std::printf("%llu SETUPs injected; node 3: %llu held, %llu let go unproven\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(c.setups_held),
              static_cast<unsigned long long>(c.setups_unproven));
}

TEST(CircuitStream, AnOpenerThatSawAHopDieFirstMovesTheCircuitWithItsFirstFrames) {
  // Do: a ring of 4, streams 1 -> 3 and back (two hops either way); the link the circuit
  // takes out of node 1 dies as node 1 alone has noticed: node 3's end still looks up when
  // node 1's new SETUP comes the other way round.
  Fabric f(make_ring(4), 4, 0);
  f.ends(1, 3);
  Streams s{1, 3, 3000};
  const bool killed = stream_and_kill(f, s, 2, 4, [&](size_t l) { f.kill_link_seen_by(l, 1); });
  // Expect: node 3 held the new circuit and took it with node 1's first frames on it (the
  // old one reported replaced); everything delivered, nobody declared dead.
  ASSERT_TRUE(killed);
  const CircuitSinkCounters& c = f.node(3).sink->counters();
  EXPECT_EQ(c.setups_held, 1u);
  EXPECT_EQ(c.setups_unproven, 0u);
  ASSERT_EQ(downs(f.node(3).log), 1u);
  EXPECT_EQ(f.node(3).log.events.end()[-2].why, CircReason::kReplaced);
  EXPECT_EQ(f.node(3).log.events.back().up, true);
  EXPECT_TRUE(s.done(f)) << f.node(3).next[1] << " and " << f.node(1).next[3];
  EXPECT_EQ(f.node(3).error, "");
  EXPECT_EQ(f.node(1).error, "");
  EXPECT_FALSE(f.node(1).peer_died || f.node(3).peer_died);
}

TEST(CircuitStream, AnOpenerThatRestartsMovesTheCircuitOnceItProvesItsRestart) {
  // Do: a line 1-2-3, sessions 1 <-> 3 up; node 1 starts again (no TEARDOWN: its circuit
  // and session are gone), so node 3's circuit still looks up when its SETUP comes. Then
  // streams 1 -> 3 and back.
  Fabric f(make_line(3), 6, 0);
  f.ends(1, 3);
  f.run(50 * kMs, [](uint64_t) {});
  ASSERT_TRUE(f.node(3).sink->up(1));
  f.restart(1, 3, 2);
  f.run(200 * kMs, [](uint64_t) {});
  // Expect: within 200 ms (node 3's old circuit would idle out after 5 s), node 3 held the
  // new circuit, sent its challenge on it too, took the proof that came on it (a reset of
  // the session) and moved to it; the streams then go whole.
  const CircuitSinkCounters& c = f.node(3).sink->counters();
  EXPECT_EQ(c.setups_held, 1u);
  EXPECT_EQ(c.setups_unproven, 0u);
  EXPECT_EQ(f.node(3).e->counters(1)->resets, 1u);
  ASSERT_EQ(downs(f.node(3).log), 1u);
  EXPECT_EQ(f.node(3).log.events.end()[-2].why, CircReason::kReplaced);
  Streams s{1, 3, 2000};
  f.run(2000 * kMs, [&](uint64_t now) { s.step(f, now); });
  EXPECT_TRUE(s.done(f)) << f.node(3).next[1] << " and " << f.node(1).next[3];
  EXPECT_EQ(f.node(3).error, "");
  EXPECT_EQ(f.node(1).error, "");
}

}  // namespace
}  // namespace imago::rel::circ
