// SPDX-License-Identifier: BSD-3-Clause
// A multi-hop fabric on real PMDs (dataplane/circuit_link.h): whole node stacks (engine and
// CircuitLink, as imagod builds them) joined by net_ring pairs, one per link of the topology.
// Messages cross forwarding nodes intact and in order under loss; a forwarder that stops
// (its lcore dead) takes its links down by silence, both ends are told, and on a ring the
// circuit comes back the other way round with the stream going on; every mbuf comes back.
#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <memory>
#include <vector>

#include "tests/eal/fabric.h"
#include "tests/eal/patterned.h"

namespace imago::test {
namespace {

/** What a node delivered: the next message expected, and how many were wrong. */
struct Receiver final : rel::AppSink, Checker {
  bool deliver(rel::NodeId, std::span<const uint8_t> m) override { return check(m), true; }
};

/** A fabric over @p topo whose nodes deliver to checkers. */
struct Checked {
  Receiver apps[8];
  Fabric f;
  Checked(const rel::circ::Topology& topo, const dp::FaultConfig& tx_fault)
      : f(topo, sinks(topo.nodes().size()), Fabric::Options{.tx_fault = tx_fault}) {}
  std::vector<rel::AppSink*> sinks(size_t n) {
    std::vector<rel::AppSink*> v;
    for (size_t i = 0; i < n; ++i) v.push_back(&apps[i]);
    return v;
  }
  Receiver& app(rel::NodeId id) { return apps[id - 1]; }
};

/** Send up to @p total messages from @p from to @p to, as many as the engine takes now. */
void pump(Fabric& f, rel::NodeId from, rel::NodeId to, uint64_t total, uint64_t* sent, std::vector<uint8_t>& buf) {
  dp::NodeEngine& e = f.node(from);
  while (*sent < total) {
    for (size_t i = 0; i < size_of(*sent); ++i) buf[i] = byte_of(*sent, i);
    if (e.engine->send(to, {buf.data(), size_of(*sent)}, 0, dp::node_engine_now_ns(e, rte_rdtsc())) != 0) return;
    ++*sent;
  }
}

TEST(CircuitLink, MessagesCrossTwoForwardersWholeAndInOrderUnderLossAndEveryMbufComesBack) {
  dp::FaultConfig loss;
  loss.drop = 0.05, loss.seed = 11;
  std::vector<uint8_t> buf(4096);
  {
    Checked c(rel::circ::make_line(4), loss);  // 1 - 2 - 3 - 4: 2 and 3 only forward
    Fabric& f = c.f;
    ASSERT_TRUE(f.ok());
    const unsigned base = f.mbufs_in_use();
    ASSERT_EQ(dp::node_engine_add_peer(f.node(1), 4, dp::kBroadcastMac, 0), 0);
    ASSERT_EQ(dp::node_engine_add_peer(f.node(4), 1, dp::kBroadcastMac, 0), 0);
    ASSERT_TRUE(f.run([&] { return f.node(1).engine->state(4) == rel::PeerState::kEstablished; }));
    // Do: 20,000 messages of 1 B to 4 KiB from 1 to 4, every link losing 5 % of its frames.
    constexpr uint64_t kMsgs = 20000;
    uint64_t sent = 0;
    ASSERT_TRUE(f.run([&] {
      pump(f, 1, 4, kMsgs, &sent, buf);
      return c.app(4).next == kMsgs && f.node(1).engine->unconfirmed_messages(4) == 0;
    })) << f.node(1).engine->debug_state(4);
    // Expect: all whole and in order, repaired end to end, forwarded by 2 and 3 (in place:
    // a forwarder's frames are the ones it received), nothing for them to deliver.
    EXPECT_EQ(c.app(4).bad, 0u);
    EXPECT_GT(f.node(1).engine->counters(4)->msgs_retransmitted, 0u);
    for (rel::NodeId hop : {2u, 3u}) {
      const dp::CircuitStats& s = f.node(hop).circ->stats();
      EXPECT_GT(s.node.data_forwarded, kMsgs / 64) << hop;
      EXPECT_EQ(s.node.data_local, 0u) << hop;
      EXPECT_EQ(s.sink.frames_in, 0u) << hop;
      EXPECT_EQ(s.link.links_down, 0u) << hop;
    }
    EXPECT_EQ(f.node(4).circ->stats().sink.wrong_peer, 0u);
    // Expect: once quiet, the mbufs back but for a few hellos on their way (a forwarded one
    // never freed would leave thousands out; one freed twice, the pool's count below).
    f.run([&] { return false; }, 0.05);
    EXPECT_LT(f.mbufs_in_use(), base + 64);
    EXPECT_GE(f.mbufs_in_use(), base);
  }
}

TEST(CircuitLink, AForwarderThatStopsTakesTheCircuitDownAndOnARingItComesBackTheOtherWay) {
  Checked c(rel::circ::make_ring(4), dp::FaultConfig{});  // 1 - 2 - 3 - 4 - 1
  Fabric& f = c.f;
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(dp::node_engine_add_peer(f.node(1), 3, dp::kBroadcastMac, 0), 0);
  ASSERT_EQ(dp::node_engine_add_peer(f.node(3), 1, dp::kBroadcastMac, 0), 0);
  ASSERT_TRUE(f.run([&] { return f.node(1).engine->state(3) == rel::PeerState::kEstablished; }));
  // The circuit 1 -> 3 leaves by node 1's lowest port: through node 2.
  constexpr uint64_t kMsgs = 30000;
  uint64_t sent = 0;
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(f.run([&] {
    pump(f, 1, 3, kMsgs, &sent, buf);
    return c.app(3).next >= kMsgs / 3;
  }));
  EXPECT_GT(f.node(2).circ->stats().node.data_forwarded, 0u);
  EXPECT_EQ(f.node(4).circ->stats().node.data_forwarded, 0u);
  // Do: node 2 stops (its lcore is gone: no frame, no hello) mid-stream.
  ASSERT_TRUE(f.run(
      [&] {
        pump(f, 1, 3, kMsgs, &sent, buf);
        return c.app(3).next == kMsgs && f.node(1).engine->unconfirmed_messages(3) == 0;
      },
      30, /*dead=*/2))
      << f.node(1).engine->debug_state(3);
  // Expect: both ends saw the circuit go down, 1 set it up again through 4, and the stream
  // went on: every message once, whole, in order, the peer never declared dead.
  EXPECT_EQ(c.app(3).bad, 0u);
  for (rel::NodeId end : {1u, 3u}) {
    const dp::CircuitStats& s = f.node(end).circ->stats();
    EXPECT_GE(s.link.circuits_down, 1u) << end;
    EXPECT_GE(s.link.circuits_up, 2u) << end;
    EXPECT_GE(s.link.links_down, 1u) << end;
  }
  EXPECT_GT(f.node(4).circ->stats().node.data_forwarded, 0u);
  EXPECT_EQ(f.node(1).engine->counters(3)->deaths, 0u);
}

}  // namespace
}  // namespace imago::test
