// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/redundancy/: the shim, duplicate discard, network health and the
// link set's choice of network in each mode (the simulator runs them with engines).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "reliability/redundancy/link_set.h"
#include "reliability/rng.h"
#include "tests/reliability/sim_cluster.h"

namespace imago::rel::red {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint64_t kMs = 1'000'000;

TEST(Shim, RoundTripsAndRejectsDamage) {
  uint8_t b[sizeof(Shim)];
  shim_write(b, ShimKind::kHeartbeat, 1, 3, 42, 7, 99);
  Shim s;
  ASSERT_TRUE(shim_read({b, sizeof b}, &s));
  EXPECT_EQ(s.src_node.get(), 42u);
  EXPECT_EQ(s.epoch.get(), 7u);
  EXPECT_EQ(s.seq.get(), 99u);
  EXPECT_EQ(s.net, 1);
  EXPECT_EQ(s.heard, 3);
  for (size_t i = 0; i < sizeof b; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      uint8_t c[sizeof b];
      std::memcpy(c, b, sizeof b);
      c[i] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_FALSE(shim_read({c, sizeof c}, &s)) << "byte " << i << " bit " << bit;
    }
  EXPECT_FALSE(shim_read({b, sizeof b - 1}, &s));
  uint8_t longer[sizeof b + 1] = {};
  std::memcpy(longer, b, sizeof b);
  EXPECT_FALSE(shim_read({longer, sizeof longer}, &s)) << "a heartbeat carries nothing";
  shim_write(b, ShimKind::kFrame, 0, 0, 1, 1, 1);
  EXPECT_FALSE(shim_read({b, sizeof b}, &s)) << "a frame shim with no frame after it";
}

TEST(DedupWindow, KeepsTheFirstCopyDropsTheSecondAndTheStale) {
  DedupWindow w;
  EXPECT_EQ(w.check(1, 10), DedupWindow::kNew);
  EXPECT_EQ(w.check(1, 10), DedupWindow::kDuplicate);
  EXPECT_EQ(w.check(1, 12), DedupWindow::kNew);
  EXPECT_EQ(w.check(1, 11), DedupWindow::kNew) << "late but first";
  EXPECT_EQ(w.check(1, 11), DedupWindow::kDuplicate);
  EXPECT_EQ(w.check(1, 12 + DedupWindow::kBits), DedupWindow::kNew);
  EXPECT_EQ(w.check(1, 12), DedupWindow::kStale) << "older than the window: the engine judges it";
  EXPECT_EQ(w.check(2, 12), DedupWindow::kNew) << "a new epoch starts over";
  EXPECT_EQ(w.check(2, 12), DedupWindow::kDuplicate);
}

TEST(DedupWindow, OneNumberFarAheadDoesNotMakeTheRestStale) {
  DedupWindow w;
  for (uint32_t s = 0; s < 100; ++s) ASSERT_EQ(w.check(5, s), DedupWindow::kNew);
  EXPECT_EQ(w.check(5, 0x40000000u), DedupWindow::kNew);
  for (uint32_t s = 100; s < 200; ++s) ASSERT_EQ(w.check(5, s), DedupWindow::kNew) << s;
  EXPECT_EQ(w.check(5, 150), DedupWindow::kDuplicate);
  // A real jump (four in a row far ahead) moves the window there.
  for (uint32_t s = 0; s < DedupWindow::kFarRun; ++s) w.check(5, 0x20000000u + s);
  EXPECT_EQ(w.check(5, 0x20000000u + DedupWindow::kFarRun - 1), DedupWindow::kDuplicate);
  EXPECT_EQ(w.check(5, 199), DedupWindow::kStale);
  // Moved past the sender (a forged epoch or number): a run of stale copies brings it back.
  for (uint32_t s = 200; s < 200 + DedupWindow::kStaleRun - 2; ++s) ASSERT_EQ(w.check(5, s), DedupWindow::kStale);
  EXPECT_EQ(w.check(5, 300), DedupWindow::kNew) << "the window follows the sender again";
  EXPECT_EQ(w.check(5, 300), DedupWindow::kDuplicate);
}

TEST(NetHealth, DownWhenBehindDeafOrFailingUpAfterHealing) {
  HealthConfig c;
  c.heartbeat_ns = 1 * kMs, c.heartbeat_miss = 3, c.fail_threshold = 2, c.fail_window_ns = 10 * kMs;
  c.heal_ns = 5 * kMs;
  NetHealth h;
  h.start(0);
  const auto at = [&](uint64_t ms, uint32_t lag = 0) { h.heard(ms * kMs), h.update(c, ms * kMs, false, lag); };
  EXPECT_FALSE(h.update(c, 1 * kMs, false, 0));
  EXPECT_EQ(h.state(), NetState::kUp);
  EXPECT_TRUE(h.update(c, 2 * kMs, false, 2));
  EXPECT_EQ(h.state(), NetState::kSuspect) << "two of the peer's heartbeats on the other network and not here";
  h.update(c, 3 * kMs, false, 3);
  EXPECT_FALSE(h.down()) << "three, but it carried something three intervals ago: a backlog, maybe";
  h.update(c, 4 * kMs, false, 3);
  EXPECT_TRUE(h.down()) << "three, and quiet for three intervals";
  at(4);
  EXPECT_TRUE(h.down()) << "healing";
  for (uint64_t t = 5; t <= 10; ++t) at(t);
  EXPECT_EQ(h.state(), NetState::kUp) << "healthy for heal_ns";
  h.update(c, 20 * kMs, true, 0);
  EXPECT_EQ(h.state(), NetState::kSuspect) << "the peer silent on both networks: its silence, not this one's";
  at(21);
  EXPECT_EQ(h.state(), NetState::kUp);
  h.update(c, 30 * kMs, false, 0);
  EXPECT_EQ(h.state(), NetState::kUp) << "quiet, but no heartbeat of the peer came anywhere else";
  h.peer_hears(false);
  at(31);
  EXPECT_EQ(h.state(), NetState::kUp) << "a peer that never heard us yet is not deaf: it may be starting";
  h.peer_hears(true);
  h.peer_hears(false);
  at(31);
  EXPECT_TRUE(h.down()) << "the peer hears nothing from us on it";
  h.peer_hears(true);
  for (uint64_t t = 32; t <= 37; ++t) at(t);
  EXPECT_EQ(h.state(), NetState::kUp);
  h.failure(c, 38 * kMs);
  at(38);
  EXPECT_EQ(h.state(), NetState::kSuspect);
  h.failure(c, 39 * kMs);
  at(39);
  EXPECT_TRUE(h.down()) << "two failures within the window";
}

/** One network: what the link set put on it. */
struct Wire : FrameSink {
  std::deque<std::pair<NodeId, Bytes>> out;
  bool refuse = false;
  bool send_frame(NodeId peer, std::span<const uint8_t> f) override {
    if (refuse) return false;
    out.emplace_back(peer, Bytes(f.begin(), f.end()));
    return true;
  }
  size_t group_frames = 0;
  std::vector<Bytes> groups;  ///< the group frames, as sent
  bool multicast() const override { return true; }
  bool send_group(GroupId, std::span<const uint8_t> f) override {
    Shim s;
    EXPECT_TRUE(shim_read(f, &s) && s.kind == static_cast<uint8_t>(ShimKind::kGroup));
    ++group_frames;
    groups.emplace_back(f.begin(), f.end());
    return true;
  }
  /** Frames (not heartbeats) sent, and forget everything. */
  size_t frames() {
    size_t n = 0;
    for (auto& [p, b] : out) n += b.size() > sizeof(Shim);
    out.clear();
    return n;
  }
};

/** Two nodes, 1 and 2, each a link set over wires a and b; time moved by hand. */
struct Pair {
  Wire wa[2], wb[2];
  std::unique_ptr<LinkSet> s[2];
  uint64_t now = 0;
  explicit Pair(Mode m, uint64_t failback = 0, uint32_t run = 1, uint32_t fail_threshold = 10) {
    Config c;
    c.mode = m;
    c.pingpong_run = run;
    c.failback_ns = failback;
    c.health.fail_threshold = fail_threshold;
    c.health.heartbeat_ns = 1 * kMs;
    c.health.heal_ns = 5 * kMs;
    for (int i = 0; i < 2; ++i) {
      s[i] = std::make_unique<LinkSet>(c, i + 1, 100 + i, &wa[i], &wb[i]);
      s[i]->add_peer(2 - i, 0);
    }
  }
  /** Node 1 sends @p n GROUP_DATA frames to group 7 (they stay in wa[0] / wb[0].groups). */
  void send_groups(int n) {
    Bytes f(60, 0);
    f[0] = kWireVersion, f[1] = static_cast<uint8_t>(FrameType::kGroupData);
    for (int k = 0; k < n; ++k) ASSERT_TRUE(s[0]->send_group(7, f));
  }
  /** Node @p i sends a frame of type @p t to the other. */
  bool send(int i, FrameType t = FrameType::kData) {
    Bytes f(60, 0);
    f[0] = kWireVersion, f[1] = static_cast<uint8_t>(t);
    s[i]->set_now(now);
    return s[i]->send_frame(2 - i, f);
  }
  /** Carry what each node sent to the other, except on the networks in @p dead. */
  void carry(bool dead_a = false, bool dead_b = false) {
    for (int i = 0; i < 2; ++i)
      for (uint8_t n = 0; n < 2; ++n) {
        Wire& w = n == 0 ? wa[i] : wb[i];
        for (auto& [p, b] : w.out)
          if (!(n == 0 ? dead_a : dead_b)) s[1 - i]->on_frame(n, b, now);
        w.out.clear();
      }
  }
  /** Carry what node @p i sent on the networks asked for; the rest waits (not sent yet). */
  void carry_from(int i, bool on_a, bool on_b) {
    for (uint8_t n = 0; n < 2; ++n) {
      Wire& w = n == 0 ? wa[i] : wb[i];
      if (!(n == 0 ? on_a : on_b)) continue;
      for (auto& [peer, b] : w.out) s[1 - i]->on_frame(n, b, now);
      w.out.clear();
    }
  }
  /** A heartbeat each way lost on A, then on B, then 2 ms of both: with a failure
   *  threshold of 1, both networks down by their losses while both work. */
  void lose_a_heartbeat_on_each() {
    run(1, true, false);
    run(1, false, true);
    run(2);
  }
  /** Move time on by @p ms, polling and carrying every 100 us. */
  void run(uint64_t ms, bool dead_a = false, bool dead_b = false) {
    for (uint64_t t = 0; t < ms * 10; ++t) {
      now += kMs / 10;
      for (auto& x : s) x->poll(now);
      carry(dead_a, dead_b);
    }
  }
};

TEST(LinkSet, DuplicateSendsOnBothAndTheReceiverKeepsOne) {
  Pair p(Mode::kDuplicate);
  p.run(3);
  ASSERT_TRUE(p.send(0));
  ASSERT_EQ(p.wa[0].out.size(), 1u);
  ASSERT_EQ(p.wb[0].out.size(), 1u);
  EXPECT_EQ(p.wa[0].out[0].second, p.wb[0].out[0].second) << "the same copy on both";
  p.carry();
  EXPECT_EQ(p.s[1]->counters(0).frames_received + p.s[1]->counters(1).frames_received, 1u);
  EXPECT_EQ(p.s[1]->counters(0).duplicates_dropped + p.s[1]->counters(1).duplicates_dropped, 1u);
  // Network A dies: frames still go on both, and arrive once.
  p.run(10, true);
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kDown);
  ASSERT_TRUE(p.send(0));
  EXPECT_EQ(p.wa[0].frames() + p.wb[0].frames(), 2u);
  EXPECT_GE(p.s[0]->counters(0).failovers, 1u);
}

TEST(LinkSet, ActiveStandbyFailsOverWhenAGoesQuietAndBackAfterFailback) {
  Pair p(Mode::kActiveStandby, 20 * kMs);
  p.run(3);
  ASSERT_TRUE(p.send(0));
  EXPECT_EQ(p.wa[0].frames(), 1u);
  EXPECT_EQ(p.wb[0].frames(), 0u) << "standby carries heartbeats only";
  EXPECT_GT(p.s[0]->counters(1).heartbeats_sent, 0u);
  p.run(5, true);
  EXPECT_EQ(p.s[0]->active(2), 1) << "failed over";
  ASSERT_TRUE(p.send(0));
  EXPECT_EQ(p.wa[0].frames(), 0u);
  EXPECT_EQ(p.wb[0].frames(), 1u);
  EXPECT_EQ(p.s[0]->counters(0).failovers, 1u);
  p.run(10);  // A heals (5 ms) but fail-back waits 20 ms of health
  EXPECT_EQ(p.s[0]->active(2), 1);
  p.run(30);
  EXPECT_EQ(p.s[0]->active(2), 0) << "failed back";
  EXPECT_EQ(p.s[0]->counters(0).failbacks, 1u);
}

// Both networks down, each with a sign of life in turn (a frame heard on one, then the other,
// never long enough to heal): traffic goes where usable() says, but the active network, and
// its FAILOVER events, do not flip with every sign.
TEST(LinkSet, BothNetworksDownWithSignsOfLifeInTurnDoNotFlipTheActiveOne) {
  struct Events : Listener {
    int failovers = 0;
    void on_net_event(const NetEvent& e) override { failovers += e.kind == NetEvent::kFailover; }
  } ev;
  Pair p(Mode::kActiveStandby, 0, 1, 1);
  p.s[0]->set_listener(&ev);
  p.run(3);
  p.lose_a_heartbeat_on_each();
  ASSERT_TRUE(p.s[0]->state(2, 0) == NetState::kDown && p.s[0]->state(2, 1) == NetState::kDown);
  const int before = ev.failovers;
  for (int k = 0; k < 20; ++k) p.run(2, k % 2 == 1, k % 2 == 0);  // 2 ms of A alone, then of B alone
  EXPECT_LE(ev.failovers - before, 1) << "the active network flipped with every sign of life";
  p.run(150);  // both heal (past the failure window): at most one move, to a network that is up
  EXPECT_NE(p.s[0]->state(2, p.s[0]->active(2)), NetState::kDown);
}

// Both nodes off their core for 50 heartbeat intervals (one lcore, descheduled): the first
// polled after it saw both networks silent and took them down. The gap beyond a heartbeat
// interval is credited (node_engine_poll() does it), and only then does the node poll.
TEST(LinkSet, AStallOfOurOwnTakesNoNetworkDown) {
  Pair p(Mode::kActiveStandby);
  p.run(3);
  const uint64_t gap = 50 * kMs;
  p.now += gap;
  for (auto& x : p.s) x->credit_absence(p.now, gap - x->absence_tolerance_ns());
  p.s[0]->poll(p.now);
  EXPECT_NE(p.s[0]->state(2, 0), NetState::kDown);
  EXPECT_NE(p.s[0]->state(2, 1), NetState::kDown);
  EXPECT_EQ(p.s[0]->counters(0).failovers, 0u);
  p.run(3);
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kUp);
  EXPECT_EQ(p.s[0]->active(2), 0);
  // The same gap not credited: both networks silent alike, which is the peer's silence (or
  // ours), not theirs: suspect, neither down (both went down before, and healed only after
  // --net-heal-ms: a loaded machine's stalls, recurring, kept both down for good).
  p.now += gap;
  p.s[0]->poll(p.now);
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kSuspect);
  EXPECT_EQ(p.s[0]->state(2, 1), NetState::kSuspect);
  p.run(3);
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kUp);
  EXPECT_EQ(p.s[0]->counters(0).failovers, 0u);
}

// The peer silent on both networks (off its core, or both networks dead alike) takes neither
// down; heard again, a network that stays silent while the other carries frames is down
// after its own silence (counted from the peer's return), the other stays up.
TEST(LinkSet, APeersSilenceOnBothNetworksTakesNeitherDownOneThatStaysSilentIs) {
  Pair p(Mode::kPingPong);
  p.run(3);
  p.run(20, true, true);  // 20 heartbeat intervals of nothing from the peer
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kSuspect);
  EXPECT_EQ(p.s[0]->state(2, 1), NetState::kSuspect);
  p.run(2, false, true);  // back, on A only: B's silence counts from here
  EXPECT_NE(p.s[0]->state(2, 1), NetState::kDown);
  p.run(3, false, true);
  EXPECT_EQ(p.s[0]->state(2, 1), NetState::kDown);
  EXPECT_NE(p.s[0]->state(2, 0), NetState::kDown);
}

// The peer off its core between its heartbeat on A and its heartbeat on B (two busy-polling
// processes sharing a core: an outside tester, 5 runs of 5, idle): B went quiet for three
// intervals while A had just carried one, and went down, though no heartbeat was lost; the
// stalls recurring within --net-heal-ms kept it down. Heartbeats go on both together, so a
// network is behind only when the peer's heartbeats keep coming on the other without it.
TEST(LinkSet, APeerOffItsCoreBetweenItsTwoHeartbeatsTakesNeitherNetworkDown) {
  for (Mode m : {Mode::kActiveStandby, Mode::kDuplicate, Mode::kPingPong}) {
    Pair p(m);
    p.run(3);
    for (int cycle = 0; cycle < 20; ++cycle) {
      p.now += kMs;
      p.s[1]->poll(p.now);  // node 2's heartbeats: A's leaves, then node 2 is off its core
      p.carry_from(1, true, false);
      const uint64_t stall = 5 * kMs;
      for (uint64_t t = 0; t < stall; t += kMs / 10) p.now += kMs / 10, p.s[0]->poll(p.now);
      p.carry_from(1, false, true);  // back: B's leaves, then what waited for it comes in
      p.s[1]->credit_absence(p.now, stall - p.s[1]->absence_tolerance_ns());
      p.carry_from(0, true, true);
      p.run(3);
    }
    for (int i = 0; i < 2; ++i)
      for (uint8_t n = 0; n < 2; ++n) {
        EXPECT_EQ(p.s[i]->counters(n).failovers, 0u) << mode_name(m) << " node " << i + 1 << " net " << int(n);
        EXPECT_EQ(p.s[i]->counters(n).heartbeats_lost, 0u);
        EXPECT_EQ(p.s[i]->state(2 - i, n), NetState::kUp) << mode_name(m) << " node " << i + 1 << " net " << int(n);
      }
  }
}

// A node that starts late finds its receive rings full of the peer's heartbeats, A's from
// further back (its port opened first), and drains them a burst per poll: A lags B by a few
// heartbeats while it delivers, which is no loss.
TEST(LinkSet, ABacklogOnOneNetworkAtStartIsNoLoss) {
  Pair p(Mode::kActiveStandby);
  for (uint64_t t = 0; t < 200; ++t) p.now += kMs / 10, p.s[0]->poll(p.now);  // node 2 not started
  p.wb[0].out.erase(p.wb[0].out.begin(), p.wb[0].out.begin() + 6);  // B's port opened 0.6 ms later
  for (int step = 0; step < 300; ++step) {
    p.now += kMs / 10;
    for (auto* w : {&p.wa[0], &p.wb[0]})  // a burst of 2 a poll
      for (int k = 0; k < 2 && !w->out.empty(); ++k) {
        p.s[1]->on_frame(w == &p.wb[0], w->out.front().second, p.now);
        w->out.pop_front();
      }
    p.s[0]->poll(p.now), p.s[1]->poll(p.now);
    p.carry_from(1, true, true);
  }
  for (uint8_t n = 0; n < 2; ++n) {
    EXPECT_EQ(p.s[1]->counters(n).failovers, 0u) << "net " << int(n);
    EXPECT_EQ(p.s[1]->state(1, n), NetState::kUp) << "net " << int(n);
  }
}

// An outside tester: a network down 3 to 10 s counted no heartbeat lost (a gap of more than a
// second's worth was taken for a restart of the peer, which is a new epoch).
TEST(LinkSet, AnOutageOfSecondsCountsEveryHeartbeatItLost) {
  Pair p(Mode::kActiveStandby);
  p.run(3);
  p.run(1500, true);
  p.run(3);
  EXPECT_GE(p.s[0]->counters(0).heartbeats_lost, 1490u);
  EXPECT_LE(p.s[0]->counters(0).heartbeats_lost, 1502u);
  EXPECT_EQ(p.s[0]->counters(1).heartbeats_lost, 0u);
}

// Network A loses node 1's frames only (one way), and node 2 is off its core 5 ms in every 10:
// node 1 hears node 2 on both and learns from its heard bits that A does not carry its
// frames. It flapped: each of node 2's stalls made A level with B again at node 2, whose
// heard bit then said A for --net-miss heartbeats (an outside tester: fail-overs 0 to 27).
TEST(LinkSet, ANetworkThatFailsOneWayStaysDownThroughThePeersStalls) {
  Pair p(Mode::kActiveStandby);
  p.run(3);
  for (int cycle = 0; cycle < 30; ++cycle) {
    for (int t = 0; t < 100; ++t) {
      p.now += kMs / 10;
      const bool stalled = t >= 50;
      p.s[0]->poll(p.now);
      if (!stalled) p.s[1]->poll(p.now);
      p.wa[0].out.clear();  // node 1's frames on A never arrive
      if (!stalled) p.carry_from(0, false, true), p.carry_from(1, true, true);
    }
    if (cycle == 0) continue;
    EXPECT_EQ(p.s[0]->state(2, 0), NetState::kDown) << "cycle " << cycle;
    EXPECT_EQ(p.s[1]->state(1, 0), NetState::kDown) << "cycle " << cycle;
  }
  EXPECT_EQ(p.s[0]->counters(0).failovers, 1u);
  EXPECT_EQ(p.s[1]->counters(0).failovers, 1u);
}

// In duplicate mode a frame lost went on both networks: the loss counts against neither
// (the peer off its core loses both copies alike); the heartbeats judge the networks.
TEST(LinkSet, DuplicateModeLossesTakeNoNetworkDown) {
  Pair p(Mode::kDuplicate, 0, 1, 1);
  p.run(3);
  std::vector<uint8_t> slot(16 + 64 + 100, 0);
  uint8_t* frame = slot.data() + 16 + 64;
  frame[0] = kWireVersion, frame[1] = static_cast<uint8_t>(FrameType::kData);
  std::span<uint8_t> f(frame, 60);
  for (int k = 0; k < 5; ++k) {
    ASSERT_TRUE(p.s[0]->send_held(2, slot.data(), f, send_why::kFirst));
    ASSERT_TRUE(p.s[0]->send_held(2, slot.data(), f, send_why::kLost));
  }
  p.run(1);
  for (uint8_t n = 0; n < 2; ++n) {
    EXPECT_EQ(p.s[0]->counters(n).resent, 5u);
    EXPECT_EQ(p.s[0]->state(2, n), NetState::kUp) << int(n);
    EXPECT_EQ(p.s[0]->counters(n).failovers, 0u);
  }
}

// A heartbeat in the peer's name and epoch numbered far beyond what either network carried
// (forged, or damaged past the CRC) counts as a second's worth beyond: believed whole,
// network A would never lag again, and would not be found down when it dies.
TEST(LinkSet, AHeartbeatNumberedFarAheadCountsAsASecondsWorth) {
  Pair p(Mode::kActiveStandby);
  p.run(3);
  uint8_t hb[sizeof(Shim)];
  shim_write(hb, ShimKind::kHeartbeat, 0, 3, 2, 101, 0x40000000);  // node 2, its epoch
  p.s[0]->on_frame(0, {hb, sizeof hb}, p.now);
  EXPECT_EQ(p.s[0]->bad_shim(), 0u);
  p.run(1100);  // B catches up with the second's worth
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kUp);
  p.run(10, true);  // network A dies
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kDown);
  EXPECT_LE(p.s[0]->counters(0).heartbeats_lost, 1002u) << "no gap of a billion counted";
}

// The peer's own heartbeats after more than a second of them lost on both networks, while
// its data frames still came, are taken (never dropped as implausible): A is found down
// when it dies.
TEST(LinkSet, HeartbeatsAfterASecondOfThemLostOnBothAreTaken) {
  Pair p(Mode::kDuplicate);
  p.run(3);
  auto step = [&](bool lose_heartbeats) {
    for (int t = 0; t < 10; ++t) {
      p.now += kMs / 10;
      for (auto& x : p.s) x->poll(p.now);
      if (t == 0) {
        ASSERT_TRUE(p.send(1));  // node 2's data keeps it heard
      }
      for (Wire* w : {&p.wa[1], &p.wb[1]})
        for (auto& [peer, b] : w->out)
          if (!lose_heartbeats || b.size() != sizeof(Shim)) p.s[0]->on_frame(w == &p.wa[1] ? 0 : 1, b, p.now);
      p.wa[1].out.clear(), p.wb[1].out.clear(), p.wa[0].out.clear(), p.wb[0].out.clear();
    }
  };
  for (int ms = 0; ms < 1500; ++ms) step(true);
  const uint64_t before = p.s[0]->counters(1).heartbeats_received;
  for (int ms = 0; ms < 20; ++ms) step(false);
  EXPECT_EQ(p.s[0]->bad_shim(), 0u);
  EXPECT_GE(p.s[0]->counters(1).heartbeats_received, before + 19);
  p.run(10, true);  // network A dies
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kDown);
}

TEST(LinkSet, PingPongAlternatesAcksFollowDataResendsTakeTheOtherNetwork) {
  Pair p(Mode::kPingPong);
  p.run(3);
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(p.send(0));
  EXPECT_EQ(p.wa[0].frames(), 2u);
  EXPECT_EQ(p.wb[0].frames(), 2u);
  // Node 2's last data came in on B: its ACK goes back on B.
  ASSERT_TRUE(p.send(0));
  ASSERT_TRUE(p.send(0));
  p.wa[0].out.pop_back();  // the last data frame went on B: drop the A one before it
  p.carry();
  ASSERT_TRUE(p.send(1, FrameType::kAck));
  EXPECT_EQ(p.wb[1].frames(), 1u);
  EXPECT_EQ(p.wa[1].frames(), 0u);
  // A held frame sent on A and lost goes again on B, and counts against A; a probe counts
  // against none.
  std::vector<uint8_t> slot(16 + 64 + 100, 0);
  uint8_t* frame = slot.data() + 16 + 64;
  frame[0] = kWireVersion, frame[1] = static_cast<uint8_t>(FrameType::kData);
  std::span<uint8_t> f(frame, 60);
  for (int k = 0; k < 3; ++k) {
    p.wa[0].out.clear(), p.wb[0].out.clear();
    ASSERT_TRUE(p.s[0]->send_held(2, slot.data(), f, send_why::kFirst));
    if (p.wa[0].out.size() == 1) break;
  }
  ASSERT_EQ(p.wa[0].frames(), 1u);
  ASSERT_TRUE(p.s[0]->send_held(2, slot.data(), f, send_why::kLost));
  EXPECT_EQ(p.wb[0].frames(), 1u);
  EXPECT_EQ(p.wa[0].frames(), 0u);
  EXPECT_EQ(p.s[0]->counters(0).resent, 1u);
  ASSERT_TRUE(p.s[0]->send_held(2, slot.data(), f, send_why::kProbe));
  EXPECT_EQ(p.wa[0].frames(), 1u) << "the other one again";
  EXPECT_EQ(p.s[0]->counters(1).resent, 0u) << "a probe is no failure";
}

// Found by the simulator (seed 20002588): network A down 5 ms in every 10, node 2's
// keep-alives 50 ms apart, each 2 ms into a down time (not yet found down): every one went on
// A, was lost, and node 1 declared node 2 dead while B worked. An answer after a silence of a
// down-detection time goes on both networks; the next ones as the mode says.
TEST(LinkSet, AnAnswerAfterASilenceGoesOnBothNetworks) {
  for (const Mode m : {Mode::kPingPong, Mode::kActiveStandby}) {
    Pair p(m);
    p.run(3);
    ASSERT_TRUE(p.send(1, FrameType::kAck));
    EXPECT_EQ(p.wa[1].frames() + p.wb[1].frames(), 1u) << "the first answer: one network";
    p.run(3);  // heartbeats only: a silence of 3 heartbeat intervals
    ASSERT_TRUE(p.send(1, FrameType::kAck));
    EXPECT_EQ(p.wa[1].frames(), 1u) << mode_name(m);
    EXPECT_EQ(p.wb[1].frames(), 1u) << mode_name(m);
    ASSERT_TRUE(p.send(1, FrameType::kAck));
    EXPECT_EQ(p.wa[1].frames() + p.wb[1].frames(), 1u) << "right after it: one network";
    // Node 1 keeps the first copy.
    const uint64_t dup = p.s[0]->counters(0).duplicates_dropped + p.s[0]->counters(1).duplicates_dropped;
    p.run(3);
    p.send(1, FrameType::kAck);
    p.carry();
    EXPECT_EQ(p.s[0]->counters(0).duplicates_dropped + p.s[0]->counters(1).duplicates_dropped, dup + 1);
  }
}

// Both networks found down by their losses (a heartbeat missed on each, a failure threshold
// of 1) while both still work: the group simulator (seed 90002458, A down a few ms in every
// few, in phase with the keep-alives) had each keep-alive answer go where the source's last
// data came in, A, lost every time, and the member expired while B carried the rest. An
// answer after a silence goes on both whenever both are usable, down or not.
TEST(LinkSet, AnAnswerAfterASilenceGoesOnBothNetworksWhenBothAreDownButWork) {
  for (const Mode m : {Mode::kPingPong, Mode::kActiveStandby}) {
    Pair p(m, 0, 1, 1);
    p.run(3);
    ASSERT_TRUE(p.send(1, FrameType::kAck));
    p.lose_a_heartbeat_on_each();
    ASSERT_EQ(p.s[1]->state(1, 0), NetState::kDown) << mode_name(m);
    ASSERT_EQ(p.s[1]->state(1, 1), NetState::kDown) << mode_name(m);
    p.wa[1].out.clear(), p.wb[1].out.clear();
    ASSERT_TRUE(p.send(1, FrameType::kAck));
    EXPECT_EQ(p.wa[1].frames(), 1u) << mode_name(m);
    EXPECT_EQ(p.wb[1].frames(), 1u) << mode_name(m);
    ASSERT_TRUE(p.send(1, FrameType::kAck));
    EXPECT_EQ(p.wa[1].frames() + p.wb[1].frames(), 1u) << "right after it: one network";
  }
}

TEST(LinkSet, GroupFramesFollowTheNetworksUsableTowardTheMembers) {
  Pair p(Mode::kActiveStandby);
  p.run(3);
  const std::vector<uint8_t> f(60, 0);
  ASSERT_TRUE(p.s[0]->multicast());
  ASSERT_TRUE(p.s[0]->send_group(7, f));
  EXPECT_EQ(p.wa[0].group_frames, 1u);
  EXPECT_EQ(p.wb[0].group_frames, 0u);
  p.run(5, true);  // A silent: down toward the only member
  ASSERT_TRUE(p.s[0]->send_group(7, f));
  EXPECT_EQ(p.wb[0].group_frames, 1u) << "B reaches the member";
  Pair d(Mode::kDuplicate);
  ASSERT_TRUE(d.s[0]->send_group(7, f));
  EXPECT_EQ(d.wa[0].group_frames + d.wb[0].group_frames, 2u);
}

TEST(LinkSet, PingPongGroupControlGoesBackWhereTheStreamArrives) {
  Pair p(Mode::kPingPong);
  p.run(3);
  // Node 1's group frames alternate; those on A are lost: node 2 got its last one on B, and
  // its NACK (group control) goes back on B, away from the network that lost them.
  p.send_groups(4);
  ASSERT_EQ(p.wa[0].groups.size(), 2u);
  ASSERT_EQ(p.wb[0].groups.size(), 2u);
  for (const Bytes& g : p.wb[0].groups) p.s[1]->on_frame(1, g, p.now);
  ASSERT_TRUE(p.send(1, FrameType::kGroupCtl));
  EXPECT_EQ(p.wb[1].frames(), 1u);
  EXPECT_EQ(p.wa[1].frames(), 0u);
  // A group frame that arrives on A last: the next answer goes on A.
  p.s[1]->on_frame(0, p.wa[0].groups.back(), p.now);
  ASSERT_TRUE(p.send(1, FrameType::kGroupCtl));
  EXPECT_EQ(p.wa[1].frames(), 1u);
}

TEST(LinkSet, PingPongAnswersIntoSilenceAlternate) {
  Pair p(Mode::kPingPong);
  p.run(3);
  // Node 2's last group frame from node 1 came in on A; then nothing but heartbeats (A down
  // at each of node 2's keep-alives, in phase with them): its answers alternate A, B, A.
  p.send_groups(2);
  ASSERT_EQ(p.wa[0].groups.size(), 1u);
  p.s[1]->on_frame(0, p.wa[0].groups.back(), p.now);
  std::vector<int> nets;
  for (int k = 0; k < 3; ++k) {
    p.wa[1].out.clear(), p.wb[1].out.clear();
    ASSERT_TRUE(p.send(1, FrameType::kGroupCtl));
    nets.push_back(p.wa[1].frames() == 1 ? 0 : p.wb[1].frames() == 1 ? 1 : -1);
  }
  EXPECT_EQ(nets, (std::vector<int>{0, 1, 0}));
  // A frame from node 1 (on B, not data: its last data stays A's): answered where data came.
  p.wa[0].out.clear(), p.wb[0].out.clear();
  for (int k = 0; k < 2 && p.wb[0].out.empty(); ++k) ASSERT_TRUE(p.send(0, FrameType::kGroupCtl));
  ASSERT_FALSE(p.wb[0].out.empty());
  p.s[1]->on_frame(1, p.wb[0].out.back().second, p.now);
  p.wa[1].out.clear(), p.wb[1].out.clear();
  ASSERT_TRUE(p.send(1, FrameType::kGroupCtl));
  EXPECT_EQ(p.wa[1].frames(), 1u);
}

TEST(LinkSet, PingPongRunsKeepBurstsOnOneNetwork) {
  Pair p(Mode::kPingPong, 0, 4);
  p.run(3);
  std::vector<int> nets;
  for (int k = 0; k < 12; ++k) {
    ASSERT_TRUE(p.send(0));
    nets.push_back(p.wa[0].frames() == 1 ? 0 : (p.wb[0].frames(), 1));
  }
  EXPECT_EQ(nets, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0}));
}

TEST(LinkSet, PingPongStopsUsingANetworkThatGoesDown) {
  Pair p(Mode::kPingPong);
  p.run(3);
  p.run(5, false, true);
  EXPECT_EQ(p.s[0]->state(2, 1), NetState::kDown);
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(p.send(0));
  EXPECT_EQ(p.wa[0].frames(), 4u);
  EXPECT_EQ(p.wb[0].frames(), 0u);
  p.run(10);
  EXPECT_NE(p.s[0]->state(2, 1), NetState::kDown) << "healed";
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(p.send(0));
  EXPECT_EQ(p.wb[0].frames(), 2u) << "in use again";
}

TEST(LinkSet, BothDownKeepsTheModesChoiceARefusingNetworkIsNotBackPressure) {
  Pair p(Mode::kActiveStandby, 0, 1, 1);
  p.run(3);
  p.lose_a_heartbeat_on_each();
  EXPECT_EQ(p.s[0]->state(2, 0), NetState::kDown);
  EXPECT_EQ(p.s[0]->state(2, 1), NetState::kDown);
  ASSERT_TRUE(p.send(0));
  Wire* on[2] = {&p.wa[0], &p.wb[0]};
  const uint8_t act = p.s[0]->active(2);  // B: A went down first
  EXPECT_EQ(on[act]->frames(), 1u) << "on the active one: not doubled";
  EXPECT_EQ(on[act ^ 1]->frames(), 0u);
  Pair d(Mode::kDuplicate);
  d.wa[0].refuse = true;
  EXPECT_TRUE(d.send(0)) << "B took it";
  EXPECT_EQ(d.s[0]->counters(0).tx_refused, 1u);
  d.wb[0].refuse = true;
  EXPECT_FALSE(d.send(0)) << "neither took it: back-pressure";
}

TEST(LinkSet, AFrameGoesOnTheOtherNetworkWhenTheChosenOneRefusesALossCountsOnce) {
  Pair p(Mode::kActiveStandby);
  p.run(3);
  p.wa[0].refuse = true;  // A's link is down: its queue takes nothing
  ASSERT_TRUE(p.send(0));
  EXPECT_EQ(p.wb[0].frames(), 1u) << "the standby took it at once";
  EXPECT_EQ(p.s[0]->counters(0).tx_refused, 1u);
  p.wb[0].refuse = true;
  EXPECT_FALSE(p.send(0)) << "neither: back-pressure";
  // A held frame lost on B, retried while both refuse: one failure, not one per retry.
  p.wb[0].refuse = false;
  std::vector<uint8_t> slot(16 + 64 + 100, 0);
  std::span<uint8_t> f(slot.data() + 16 + 64, 60);
  f[0] = kWireVersion, f[1] = static_cast<uint8_t>(FrameType::kData);
  ASSERT_TRUE(p.s[0]->send_held(2, slot.data(), f, send_why::kFirst));
  p.wb[0].refuse = true;
  for (int k = 0; k < 5; ++k) EXPECT_FALSE(p.s[0]->send_held(2, slot.data(), f, send_why::kLost));
  EXPECT_EQ(p.s[0]->counters(1).resent, 1u);
  p.wb[0].refuse = false;
  p.wb[0].out.clear();
  EXPECT_TRUE(p.s[0]->send_held(2, slot.data(), f, send_why::kLost));
  EXPECT_EQ(p.wb[0].frames(), 1u);
}

TEST(LinkSet, HostileFramesAreCountedNeverDelivered) {
  Pair p(Mode::kDuplicate);
  Rng r(7);
  Bytes b(200);
  for (int i = 0; i < 20000; ++i) {
    b.resize(r.below(200));
    for (auto& x : b) x = static_cast<uint8_t>(r.below(256));
    if (b.size() >= 1 && r.chance(0.5)) b[0] = kShimMagic;
    p.s[1]->on_frame(static_cast<uint8_t>(r.below(3)), b, 0);
  }
  EXPECT_EQ(p.s[1]->bad_shim(), 20000u);
  uint8_t hb[sizeof(Shim)];
  shim_write(hb, ShimKind::kHeartbeat, 0, 3, 77, 1, 1);
  p.s[1]->on_frame(0, {hb, sizeof hb}, 0);
  EXPECT_EQ(p.s[1]->not_peer(), 1u);
}

TEST(LinkSet, HeartbeatGapsCountAsTheNetworksLoss) {
  Pair p(Mode::kDuplicate);
  p.run(3);
  const uint64_t before = p.s[1]->counters(1).heartbeats_lost;
  for (int k = 0; k < 3; ++k) {
    p.now += kMs;
    p.s[0]->poll(p.now);
    p.wb[0].out.clear();  // B loses these heartbeats
    p.carry();
  }
  p.run(2);
  EXPECT_EQ(p.s[1]->counters(1).heartbeats_lost - before, 3u);
  EXPECT_EQ(p.s[1]->counters(0).heartbeats_lost, 0u);
}


/** A one-way stream between two engines on two networks in ping-pong, B @p b_delay_ns slower
 *  than A, in the simulator. */
sim::Scenario pingpong_stream(uint64_t b_delay_ns) {
  sim::Scenario sc;
  sc.nodes = 2;
  sc.msgs = 20000;
  sc.one_way = true;
  sc.app_gap_ns = 20'000;
  sc.cfg.max_message_size = 64 * 1024;
  sc.cfg.send_buffer_bytes = 256 * 1024;
  sc.cfg.send_window = 1024;
  sc.redundant = true;
  sc.red.mode = Mode::kPingPong;
  sc.red.pingpong_run = 4;
  sc.faults.delay_ns = sc.faults_b.delay_ns = 10'000;
  sc.faults_b.delay_ns += b_delay_ns;
  return sc;
}

TEST(LinkSetWithEngines, PingPongFramesOvertakenOnTheOtherNetworkAreNotResent) {
  // Do: stream over ping-pong with network B 3 ms slower than A: six reordering windows
  // (kPingPongReorderNs), so A's frames arrive long before B's sent earlier.
  const sim::Scenario sc = pingpong_stream(3'000'000);
  sim::Cluster cl(1, sc);
  ASSERT_EQ(cl.run(), "");
  // Expect: everything delivered on both networks, and nothing resent: a frame of A that got
  // through says nothing of B's (RACK per path), and nothing counts against B.
  EXPECT_EQ(cl.delivered(), sc.msgs);
  EXPECT_GT(cl.net_counters(0).frames_received, 100u);
  EXPECT_GT(cl.net_counters(1).frames_received, 100u);
  EXPECT_EQ(cl.counters().msgs_retransmitted, 0u);
  EXPECT_EQ(cl.net_counters(1).resent, 0u);
}

TEST(LinkSetWithEngines, PingPongRepairsTheFramesOfANetworkThatDiesWithinRtos) {
  // Do: the same stream, network A dropping everything silently from 5 ms on.
  sim::Scenario sc = pingpong_stream(0);
  sc.drops.push_back(sim::DropWindow{5 * kMs, ~uint64_t{0} / 2, 0, 0, false, true, false});
  sim::Cluster clean(1, pingpong_stream(0));
  ASSERT_EQ(clean.run(), "");
  sim::Cluster cl(1, sc);
  ASSERT_EQ(cl.run(), "");
  // Expect: everything delivered; the frames in flight on A are found lost by what B
  // delivered after an RTO, all at once, not one per retransmission timeout: the stream ends
  // within a few RTOs of the end on two healthy networks.
  EXPECT_EQ(cl.delivered(), sc.msgs);
  EXPECT_GT(cl.counters().msgs_retransmitted, 0u);
  EXPECT_LT(cl.now(), clean.now() + 3 * sc.cfg.rto_min_ns) << "clean run: " << clean.now() / kMs << " ms";
}

}  // namespace
}  // namespace imago::rel::red
