// SPDX-License-Identifier: BSD-3-Clause
// Restarts on the simulated network (docs/PROTOCOL.md 3.3): a node killed and started again
// with the same, a higher or a lower epoch reconnects within one second of simulated time,
// whichever side restarts and whenever; the survivor is told (on_peer_reset) and nothing of
// the old incarnation is delivered to the new one or the other way round (the cluster's
// exactly-once-in-order-or-excused property).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

#include "tests/reliability/sim_cluster.h"

namespace imago::sim {
namespace {

// What real nodes run with (rel::fast_link_preset), with smaller buffers for the simulator.
rel::Config fast_link_config() {
  rel::Config c;
  c.send_window = 1024;
  c.max_message_size = 64 * 1024;
  c.send_buffer_bytes = 256 * 1024;
  return rel::fast_link_preset(c);
}

// Two nodes streaming both ways for about 1.6 s, so every restart time hits live traffic.
Scenario two_streams(NodeId who, uint64_t at, uint64_t down, int32_t epoch_step) {
  Scenario sc;
  sc.nodes = 2;
  sc.msgs = 8000;
  sc.cfg = fast_link_config();
  sc.app_gap_ns = 1 * rel::kMs;
  sc.max_burst = 4;
  sc.restarts.push_back({who, at, down, epoch_step});
  return sc;
}

struct Reconnect {
  uint64_t up_ns = ~uint64_t{0};  ///< both sides up again, counted from the new start
  int resets = 0;                 ///< on_peer_reset at the survivor
  uint64_t discarded = 0;
};

Reconnect reconnect_after(const Cluster& c, NodeId who, uint64_t started) {
  Reconnect r;
  uint64_t up_new = 0, up_survivor = 0;
  for (const PeerEvent& e : c.events()) {
    if (e.t < started) continue;
    if (e.kind == PeerEvent::kUp && e.node == who && up_new == 0) up_new = e.t;
    if (e.kind == PeerEvent::kUp && e.node != who && up_survivor == 0) up_survivor = e.t;
    if (e.kind == PeerEvent::kReset && e.node != who) ++r.resets, r.discarded += e.discarded;
  }
  if (up_new && up_survivor) r.up_ns = std::max(up_new, up_survivor) - started;
  return r;
}

// (who restarts, when in ms after the start, epoch step)
class RestartSim : public ::testing::TestWithParam<std::tuple<NodeId, uint64_t, int32_t>> {};

TEST_P(RestartSim, ReconnectsWithinOneSecondAndDeliversNothingStale) {
  const auto [who, at_ms, step] = GetParam();
  const uint64_t at = at_ms * rel::kMs;
  // Do: stream both ways; kill one node and start it again at once with the given epoch.
  Cluster c(11 + at_ms, two_streams(who, at, 0, step));
  // Expect: the property held (nothing stale, nothing lost without the sender being told).
  ASSERT_EQ(c.run(), "");
  // Expect: both sides up again within 1 s of the new start.
  const Reconnect r = reconnect_after(c, who, at);
  EXPECT_LT(r.up_ns, 1 * rel::kSec) << "reconnect took " << r.up_ns << " ns";
  // Expect: a survivor that knew the old incarnation was told once, with what it dropped.
  if (at > 0) {
    EXPECT_EQ(r.resets, 1);
    EXPECT_EQ(c.counters().resets, 1u);
  }
  EXPECT_EQ(c.counters().deaths, 0u);
  std::printf("restart of node %u at %llu ms, epoch step %d: up after %llu us, %llu discarded, "
              "run ended at %llu ms\n",
              who, (unsigned long long)at_ms, step, (unsigned long long)(r.up_ns / 1000),
              (unsigned long long)r.discarded, (unsigned long long)(c.now() / rel::kMs));
}

INSTANTIATE_TEST_SUITE_P(
    SameEpochAnyTiming, RestartSim,
    ::testing::Combine(::testing::Values(NodeId{0}, NodeId{1}),
                       ::testing::Values(uint64_t{0}, uint64_t{300}, uint64_t{600}, uint64_t{999}),
                       ::testing::Values(int32_t{0})));
INSTANTIATE_TEST_SUITE_P(LowerEpoch, RestartSim,
                         ::testing::Combine(::testing::Values(NodeId{0}, NodeId{1}),
                                            ::testing::Values(uint64_t{300}, uint64_t{999}),
                                            ::testing::Values(int32_t{-1}, int32_t{-100000})));
INSTANTIATE_TEST_SUITE_P(HigherEpoch, RestartSim,
                         ::testing::Combine(::testing::Values(NodeId{0}, NodeId{1}),
                                            ::testing::Values(uint64_t{600}),
                                            ::testing::Values(int32_t{1})));

TEST(RestartSimLossy, SameEpochRestartReconnectsWithinOneSecondUnderLoss) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    // Do: as above, over a link losing, reordering and duplicating 2 % of frames.
    const NodeId who = static_cast<NodeId>(seed % 2);
    const uint64_t at = (seed * 97 % 1000) * rel::kMs;
    Scenario sc = two_streams(who, at, 0, 0);
    sc.faults.loss = sc.faults.reorder = sc.faults.dup = 0.02;
    sc.faults.jitter_ns = 20'000;
    Cluster c(seed, sc);
    // Expect: the property held, and both sides up again within 1 s.
    ASSERT_EQ(c.run(), "") << "seed " << seed;
    EXPECT_LT(reconnect_after(c, who, at).up_ns, 1 * rel::kSec) << "seed " << seed;
  }
}

TEST(RestartSimBoth, BothSidesRestartingWhileHandshakesAreInFlightReconnectWithinOneSecond) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    // Do: both nodes restart during the first handshake, a few ms apart, over links slow
    // enough (0..6 ms, jitter) that each new incarnation may first learn the other's
    // previous one; same, higher or lower epochs; every other seed with loss.
    const int32_t step = static_cast<int32_t>(seed % 3) - 1;
    const uint64_t at = (seed % 13) * 700 * rel::kUs, apart = (seed % 11) * 500 * rel::kUs;
    Scenario sc = two_streams(0, at, (seed % 3) * rel::kMs, step);
    sc.restarts.push_back({1, at + apart, (seed % 4) * rel::kMs, step});
    sc.faults.delay_ns = (seed % 7) * rel::kMs;
    sc.faults.jitter_ns = (seed % 5) * rel::kMs;
    if (seed % 2) sc.faults.loss = sc.faults.reorder = sc.faults.dup = 0.02;
    Cluster c(seed, sc);
    // Expect: the property held; both up again within 1 s of the later start; no deaths.
    ASSERT_EQ(c.run(), "") << "seed " << seed;
    const uint64_t later =
        std::max(at + (seed % 3) * rel::kMs, at + apart + (seed % 4) * rel::kMs);
    EXPECT_LT(reconnect_after(c, 1, later).up_ns, 1 * rel::kSec) << "seed " << seed;
    EXPECT_EQ(c.counters().deaths, 0u) << "seed " << seed;
  }
}

TEST(RestartSimDead, RestartAfterThePeerWasDeclaredDeadRevivesItAtOnce) {
  // Do: node 1 is down for longer than dead_after_ns, then comes back with the same epoch.
  const uint64_t at = 200 * rel::kMs, down = 3500 * rel::kMs;
  Scenario sc = two_streams(1, at, down, 0);
  sc.msgs = 4000;
  Cluster c(5, sc);
  ASSERT_EQ(c.run(), "");
  // Expect: node 0 declared it dead, then took the proven new incarnation within 1 s.
  EXPECT_EQ(c.counters().deaths, 1u);
  const Reconnect r = reconnect_after(c, 1, at + down);
  EXPECT_LT(r.up_ns, 1 * rel::kSec);
  EXPECT_EQ(r.resets, 1);
}

}  // namespace
}  // namespace imago::sim
