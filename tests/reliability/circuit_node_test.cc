// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/circuits/circuit_node: set-up hop by hop, forwarding both ways,
// tear-down (closed, a dead hop, idle), lost control frames, and hostile input (forged VCIs,
// junk frames, set-up floods) dropped, counted and bounded.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/reliability/circuit_sim.h"

namespace imago::rel::circ::test {
namespace {

/** The last event node @p n's ends heard. */
const EndLog::Event* last(CircuitSim& s, NodeId n) {
  const auto& e = s.node(n).log.events;
  return e.empty() ? nullptr : &e.back();
}

/** Open 1 -> @p dst and run until it settles. @return the origin's id. */
CircuitId open_and_run(CircuitSim& s, NodeId dst, uint64_t ms = 5) {
  CircuitId id = 0;
  EXPECT_EQ(s.cn(1).open(dst, s.now(), &id), 0);
  s.run(ms * kMs);
  return id;
}

/** @return the node a frame on circuit @p id of node @p from ends at (0, the walk's failure
 *  reported, when it ends nowhere). */
NodeId reached(CircuitSim& s, NodeId from, CircuitId id) {
  NodeId at = 0;
  CircuitId local;
  const std::string err = s.walk(from, id, &at, &local);
  EXPECT_EQ(err, "");
  return err.empty() ? at : 0;
}

TEST(CircuitNode, ASetUpOverTwoHopsForwardsBothWaysAndOnlyThere) {
  // Do: a line 1-2-3-4; node 1 opens a circuit to 4.
  CircuitSim s(make_line(4), 1);
  const CircuitId id = open_and_run(s, 4);
  // Expect: up at both ends, each naming the other; both hops forward it.
  const EndLog::Event* a = last(s, 1);
  const EndLog::Event* d = last(s, 4);
  ASSERT_TRUE(a && a->up && a->origin && a->peer == 4u);
  ASSERT_TRUE(d && d->up && !d->origin && d->peer == 1u);
  NodeId at;
  CircuitId local;
  ASSERT_EQ(s.walk(1, id, &at, &local), "");
  EXPECT_EQ(at, 4u);
  EXPECT_EQ(local, d->id);
  ASSERT_EQ(s.walk(4, d->id, &at, &local), "");
  EXPECT_EQ(at, 1u);
  EXPECT_EQ(local, id);
  EXPECT_EQ(s.cn(2).counters().data_forwarded, 2u);
  EXPECT_EQ(s.cn(3).counters().data_forwarded, 2u);
  for (NodeId n = 1; n <= 4; ++n) EXPECT_EQ(s.cn(n).in_use(), 1u) << n;
  EXPECT_EQ(s.cn(1).peer_of(id), 4u);
}

TEST(CircuitNode, ForgedVcisAndJunkAreDroppedAndCounted) {
  CircuitSim s(make_line(3), 2);
  const CircuitId id = open_and_run(s, 3);
  ASSERT_TRUE(last(s, 3) && last(s, 3)->up);
  // Do: data frames with random VCIs at the hop, and random bytes as control frames.
  Rng r(9);
  PortId p;
  uint32_t v;
  CircuitId l;
  uint64_t dropped = 0;
  for (int i = 0; i < 10000; ++i)
    dropped += s.cn(2).route_data(static_cast<PortId>(r.below(2)), static_cast<uint32_t>(r.next()), s.now(), &p, &v, &l) ==
               CircuitNode::Verdict::kDrop;
  std::vector<uint8_t> junk;
  for (int i = 0; i < 10000; ++i) {
    junk.resize(r.below(40));
    for (auto& b : junk) b = static_cast<uint8_t>(r.below(256));
    if (!junk.empty() && r.chance(0.5)) junk[0] = kCircuitMagic;
    s.cn(2).on_frame(static_cast<PortId>(r.below(3)), junk, s.now());
  }
  // Expect: every forged VCI dropped and counted, the junk counted as bad frames, and the
  // circuit still forwards.
  EXPECT_EQ(dropped, 10000u);
  EXPECT_EQ(s.cn(2).counters().unknown_vci, 10000u);
  EXPECT_GE(s.cn(2).counters().bad_frame, 9900u);
  EXPECT_EQ(reached(s, 1, id), 3u);
}

/** A sealed control frame of kind @p k with @p vci and reply body (fwd, why). */
std::vector<uint8_t> control(CircKind k, uint32_t vci, uint32_t fwd, CircReason why) {
  std::vector<uint8_t> f(sizeof(CircuitHeader) + sizeof(ReplyBody), 0);
  circ_header(f.data(), k, vci);
  ReplyBody b{};
  b.fwd_vci.set(fwd);
  b.reason = static_cast<uint8_t>(why);
  std::memcpy(f.data() + sizeof(CircuitHeader), &b, sizeof b);
  circ_seal(f.data(), sizeof b);
  return f;
}

TEST(CircuitNode, ForgedTeardownsAndAnswersWithGuessedVcisChangeNothing) {
  CircuitSim s(make_line(3), 3);
  const CircuitId id = open_and_run(s, 3);
  // Do: well-formed TEARDOWN, SETUP_OK and SETUP_FAIL frames with VCIs the forger guessed.
  Rng r(11);
  for (int i = 0; i < 3000; ++i) {
    const auto k = static_cast<CircKind>(3 + r.below(3));
    s.cn(2).on_frame(static_cast<PortId>(r.below(2)), control(k, static_cast<uint32_t>(r.next()), 7, CircReason::kClosed), s.now());
  }
  // Expect: all counted as unknown, the circuit up and forwarding.
  EXPECT_EQ(s.cn(2).counters().unknown_vci, 3000u);
  ASSERT_NE(reached(s, 1, id), 0u);
  EXPECT_EQ(s.cn(2).in_use(), 1u);
}

TEST(CircuitNode, ClosingAnEndTearsDownEveryHopAndTellsTheOtherEnd) {
  CircuitSim s(make_line(4), 4);
  const CircuitId id = open_and_run(s, 4);
  // Do: the origin closes.
  ASSERT_EQ(s.cn(1).close(id, s.now()), 0);
  s.run(1 * kMs);
  // Expect: the far end told "closed"; no entry left anywhere; a second close is refused.
  ASSERT_TRUE(last(s, 4) && !last(s, 4)->up);
  EXPECT_EQ(last(s, 4)->why, CircReason::kClosed);
  for (NodeId n = 1; n <= 4; ++n) EXPECT_EQ(s.cn(n).in_use(), 0u) << n;
  EXPECT_EQ(s.cn(1).close(id, s.now()), -ENOENT);
}

TEST(CircuitNode, ADeadHopTellsBothEnds) {
  CircuitSim s(make_line(4), 5);
  open_and_run(s, 4);
  // Do: the link between 2 and 3 dies.
  size_t mid = 0;
  for (size_t i = 0; i < s.topology().links().size(); ++i)
    if (s.topology().links()[i].a + s.topology().links()[i].b == 5) mid = i;
  s.kill_link(mid);
  s.run(1 * kMs);
  // Expect: both ends down with "hop-dead", nothing left.
  ASSERT_TRUE(last(s, 1) && !last(s, 1)->up);
  ASSERT_TRUE(last(s, 4) && !last(s, 4)->up);
  EXPECT_EQ(last(s, 1)->why, CircReason::kHopDead);
  EXPECT_EQ(last(s, 4)->why, CircReason::kHopDead);
  for (NodeId n = 1; n <= 4; ++n) EXPECT_EQ(s.cn(n).in_use(), 0u) << n;
  // Expect: a new circuit cannot be had. Node 1 knows only its own links: its set-up goes
  // out, node 2 refuses it (no-route); with no other way, the next goes the same way (that
  // link may be back by then) and is refused again; nothing is held anywhere.
  CircuitId id;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(s.cn(1).open(4, s.now(), &id), 0);
    s.run(1 * kMs);
    EXPECT_EQ(last(s, 1)->why, CircReason::kNoRoute);
  }
  for (NodeId n = 1; n <= 4; ++n) EXPECT_EQ(s.cn(n).in_use(), 0u) << n;
}

/** Kill the link between nodes @p a and @p b of @p s. */
/** Kill (or, with @p alive, revive) the links between @p a and @p b. */
void kill_between(CircuitSim& s, NodeId a, NodeId b, bool alive = false) {
  for (size_t i = 0; i < s.topology().links().size(); ++i) {
    const Link& l = s.topology().links()[i];
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) alive ? s.revive_link(i) : s.kill_link(i);
  }
}

TEST(CircuitNode, ARingSetsTheCircuitUpAgainTheOtherWay) {
  // Do: a ring of 6; 1 opens to 3 (via 2); the link 1-2 dies; 1 opens again.
  CircuitSim s(make_ring(6), 6);
  const CircuitId first = open_and_run(s, 3);
  EXPECT_EQ(s.cn(2).counters().data_forwarded + s.cn(2).counters().setups_received, 1u);
  kill_between(s, 1, 2);
  s.run(1 * kMs);
  ASSERT_TRUE(last(s, 1) && !last(s, 1)->up && last(s, 1)->id == first);
  const CircuitId again = open_and_run(s, 3);
  // Expect: up the other way round, through 6, 5 and 4.
  EXPECT_EQ(reached(s, 1, again), 3u);
  EXPECT_EQ(s.cn(5).counters().data_forwarded, 1u);
}

TEST(CircuitNode, ALinkThatDiedBeyondTheFirstHopIsGoneRoundAfterTheHopRefusesTheSetUp) {
  // Do: a ring of 6; 1 opens to 3 (via 2); the link 2-3 dies, which node 1's table cannot
  // know; 1 opens again (via 2, refused: no-route), and again.
  CircuitSim s(make_ring(6), 6);
  const CircuitId first = open_and_run(s, 3);
  kill_between(s, 2, 3);
  s.run(1 * kMs);
  ASSERT_TRUE(last(s, 1) && !last(s, 1)->up && last(s, 1)->id == first);
  open_and_run(s, 3);
  ASSERT_TRUE(last(s, 1) && !last(s, 1)->up);
  EXPECT_EQ(last(s, 1)->why, CircReason::kNoRoute);
  const CircuitId again = open_and_run(s, 3);
  // Expect: up the other way round, through 6, 5 and 4 (before: refused by 2 for ever, as on
  // a ring of 4 an outside tester saw: the peer declared dead, messages lost).
  ASSERT_TRUE(last(s, 1) && last(s, 1)->up);
  EXPECT_EQ(reached(s, 1, again), 3u);
  EXPECT_EQ(s.cn(5).counters().data_forwarded, 1u);
  // Expect: once up, the entry is gone: the next set-up takes the table's route again.
  s.cn(1).close(again, s.now());
  s.run(1 * kMs);
  open_and_run(s, 3);
  EXPECT_EQ(last(s, 1)->why, CircReason::kNoRoute);
}

TEST(CircuitNode, ASetUpRefusedWhereThereIsNoOtherWayIsTriedTheSameWayAgain) {
  // Do: a line 1-2-3 whose far end is not up yet (link 2-3 down); 1 opens to 3, refused by
  // 2 (no-route); the link comes up; 1 opens again.
  CircuitSim s(make_line(3), 3);
  kill_between(s, 2, 3);
  open_and_run(s, 3);
  ASSERT_TRUE(last(s, 1) && !last(s, 1)->up);
  EXPECT_EQ(last(s, 1)->why, CircReason::kNoRoute);
  kill_between(s, 2, 3, true);
  const CircuitId again = open_and_run(s, 3);
  // Expect: up through 2, the only way (before: the refusal barred it, and every later open
  // was -EHOSTUNREACH: an outside tester's end node, started last as USER.md does, never
  // reached).
  ASSERT_TRUE(last(s, 1) && last(s, 1)->up);
  EXPECT_EQ(reached(s, 1, again), 3u);
}

TEST(CircuitNode, LostControlFramesAreRepeatedUntilTheCircuitIsUp) {
  CircuitSim s(make_line(4), 7);
  // Do: lose the first SETUP between 2 and 3, and the first SETUP_OK between 3 and 2.
  int setups = 0, oks = 0;
  s.drop = [&](NodeId from, PortId, std::span<const uint8_t> f) {
    const uint8_t kind = f.size() > 1 ? f[1] : 0;
    if (from == 2 && kind == static_cast<uint8_t>(CircKind::kSetup)) return setups++ == 0;
    if (from == 3 && kind == static_cast<uint8_t>(CircKind::kSetupOk)) return oks++ == 0;
    return false;
  };
  const CircuitId id = open_and_run(s, 4, 100);
  // Expect: up once at each end, forwarding, after the origin repeated its SETUP.
  ASSERT_NE(reached(s, 1, id), 0u);
  EXPECT_EQ(s.node(1).log.events.size(), 1u);
  EXPECT_EQ(s.node(4).log.events.size(), 1u);
  EXPECT_GE(s.cn(1).counters().setups_sent, 3u);
}

/** A sealed SETUP from @p origin to @p dst. */
std::vector<uint8_t> setup(NodeId origin, NodeId dst, uint32_t nonce, uint32_t back, uint8_t hops = 16) {
  std::vector<uint8_t> f(sizeof(CircuitHeader) + sizeof(SetupBody), 0);
  circ_header(f.data(), CircKind::kSetup, 0, hops);
  SetupBody b;
  b.origin.set(origin), b.dst.set(dst), b.nonce.set(nonce), b.back_vci.set(back);
  std::memcpy(f.data() + sizeof(CircuitHeader), &b, sizeof b);
  circ_seal(f.data(), sizeof b);
  return f;
}

// A set-up from a node to itself names no circuit: it was passed on toward its origin and
// answered no-route there (an outside tester).
TEST(CircuitNode, ASetUpFromANodeToItselfIsBad) {
  CircuitSim s(make_line(3), 4);
  s.cn(2).on_frame(0, setup(1, 1, 77, 99), s.now());
  s.cn(2).on_frame(1, setup(3, 3, 78, 98), s.now());
  s.run(1 * kMs);
  EXPECT_EQ(s.cn(2).counters().bad_setup, 2u);
  EXPECT_EQ(s.cn(2).counters().setups_sent, 0u);
  EXPECT_EQ(s.cn(2).in_use(), 0u);
}

TEST(CircuitNode, AFloodOfSetUpsIsRefusedAndLeavesNothingBehind) {
  CircuitConfig c;
  c.max_pending = 8;
  c.max_circuits = 32;
  CircuitSim s(make_line(3), 8, c);
  s.drop = [](NodeId from, PortId, std::span<const uint8_t>) { return from == 2; };  // 2 hears no answer
  // Do: 1000 SETUPs through node 2 toward 3 in node 1's name with made-up nonces, and 100
  // for node 2 itself.
  Rng r(12);
  for (int i = 0; i < 1000; ++i)
    s.cn(2).on_frame(0, setup(1, 3, static_cast<uint32_t>(r.next()) | 1, static_cast<uint32_t>(r.next()) | 1), s.now());
  for (int i = 0; i < 100; ++i)
    s.cn(2).on_frame(0, setup(1, 2, static_cast<uint32_t>(r.next()) | 1, static_cast<uint32_t>(r.next()) | 1), s.now());
  // Expect: 8 set-ups held, the rest refused and counted; accepted ends within the table.
  EXPECT_EQ(s.cn(2).pending(), 8u);
  EXPECT_EQ(s.cn(2).counters().refused_full, 992u + 76u);
  EXPECT_EQ(s.cn(2).in_use(), 32u);
  // Do: a SETUP from ourselves, for no one, without a hop left. Expect: bad, counted.
  s.cn(2).on_frame(0, setup(2, 3, 5, 5), s.now());
  s.cn(2).on_frame(0, setup(9, 0, 5, 5), s.now());
  s.cn(2).on_frame(0, setup(1, 3, 5, 5, 0), s.now());
  EXPECT_EQ(s.cn(2).counters().bad_setup, 3u);
  // Do: 1000 SETUPs from a node outside the topology, and 1000 to one. Expect: bad, counted,
  // unanswered (a flood of forgeries earns nothing back), nothing held.
  const uint64_t failed = s.cn(2).counters().no_route + s.cn(2).counters().refused_full;
  for (int i = 0; i < 1000; ++i) {
    s.cn(2).on_frame(0, setup(1000 + i, 3, static_cast<uint32_t>(r.next()) | 1, 7), s.now());
    s.cn(2).on_frame(0, setup(1, 5000 + i, static_cast<uint32_t>(r.next()) | 1, 7), s.now());
  }
  EXPECT_EQ(s.cn(2).counters().bad_setup, 2003u);
  EXPECT_EQ(s.cn(2).counters().no_route + s.cn(2).counters().refused_full, failed);
  EXPECT_EQ(s.cn(2).pending(), 8u);
  // Expect: once the set-ups time out and the accepted ends idle out, every entry is free.
  s.run(c.setup_retry_ns * (c.setup_tries + 2) + c.idle_ns);
  EXPECT_EQ(s.cn(2).in_use(), 0u);
  EXPECT_EQ(s.cn(2).counters().expired_setup, 8u);
}

TEST(CircuitNode, SetUpsThatCannotBeHadFailBackToTheOrigin) {
  CircuitConfig c;
  c.max_hops = 3;
  CircuitSim s(make_line(5), 9, c);
  // Do: 1 opens to 5, four hops away, with a hop limit of 3.
  open_and_run(s, 5);
  // Expect: failed back with "hops", nothing held.
  ASSERT_TRUE(last(s, 1) && !last(s, 1)->up);
  EXPECT_EQ(last(s, 1)->why, CircReason::kHops);
  for (NodeId n = 1; n <= 5; ++n) EXPECT_EQ(s.cn(n).in_use(), 0u) << n;
  CircuitId id;
  EXPECT_EQ(s.cn(1).open(1, s.now(), &id), -EINVAL);
  EXPECT_EQ(s.cn(1).open(77, s.now(), &id), -EHOSTUNREACH);
}

TEST(CircuitNode, EntriesNothingCrossesAreLetGo) {
  CircuitConfig c;
  c.idle_ns = 50 * kMs;
  CircuitSim s(make_line(3), 10, c);
  const CircuitId id = open_and_run(s, 3);
  // Do: the TEARDOWN of a close is lost; then time passes.
  s.drop = [](NodeId, PortId, std::span<const uint8_t>) { return true; };
  ASSERT_EQ(s.cn(1).close(id, s.now()), 0);
  s.run(100 * kMs);
  // Expect: the hop and the far end let it go (the far end told "idle").
  EXPECT_EQ(s.cn(2).in_use(), 0u);
  EXPECT_EQ(s.cn(3).in_use(), 0u);
  ASSERT_TRUE(last(s, 3) && !last(s, 3)->up);
  EXPECT_EQ(last(s, 3)->why, CircReason::kIdle);
}

}  // namespace
}  // namespace imago::rel::circ::test
