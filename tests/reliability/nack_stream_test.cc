// SPDX-License-Identifier: BSD-3-Clause
// NACK-based group streams (docs/PROTOCOL.md 3.7.6): members report gaps only; the source
// frees frames by age and room without ACKs, never waits for a member, and a gap older than
// its buffer reaches the member's application as a LOST event in its place, never skipped
// silently.
#include <gtest/gtest.h>

#include "tests/reliability/group_harness.h"
#include "tests/reliability/harness.h"

namespace imago::rel::test {
namespace {

constexpr uint64_t kHold = 5 * kMs;

class NackStreamTest : public GroupStreamTest {
 protected:
  NackStreamTest() {
    tune = [](Config& c) { c.group_nack_hold_ns = kHold; };
  }
  /** @return the units node @p id was told are lost, over all its LOST events. */
  uint64_t lost_units(NodeId id) const {
    uint64_t n = 0;
    for (const GroupEvent& e : w.nodes[id]->events) n += e.kind == GroupEvent::kLost ? e.count : 0;
    return n;
  }
  /** Every message node @p id got is one of gmsg(size, 0 .. count), in increasing order. */
  void expect_in_order(NodeId id, uint32_t count, size_t size) const {
    uint32_t next = 0;
    for (const GNode::Got& g : w.nodes[id]->got) {
      while (next < count && g.msg != gmsg(size, next)) ++next;
      ASSERT_LT(next, count) << "node " << id << ": a message out of order, twice or corrupt";
      ++next;
    }
  }
  /** Cut node @p id off: the group frames to it and everything it sends (its NACKs). */
  void cut_off(NodeId id) {
    w.drop = [id](const GWire::Frame& f) { return (f.group && f.to == id) || (!f.group && f.from == id); };
  }
  void heal() {
    w.drop = [](const GWire::Frame&) { return false; };
  }
  /** Start a stream (NACK-based with @p nack) to node 2 and keep a control frame of the
   *  source's session to it (a STATUS) to forge LOST entries from. */
  void start_keeping_ctl(bool nack) {
    start(2, true, nack);
    w.drop = [this](const GWire::Frame& f) {
      if (f.from == 1 && f.to == 2 && !f.group && f.bytes.size() == 64 && f.bytes[1] == 6) ctl = f.bytes;
      return false;
    };
    send(10, 100);
    run_for(5 * kMs);
    heal();
    ASSERT_EQ(ctl.size(), 64u);
  }
  /** Give node 2 a LOST [a, a + n) in the source's name. */
  void forge_lost(uint32_t a, uint32_t n) { forge(group_op::kLost, a, n); }
  /** Give node 2 a control entry @p op (a, b) in the source's name. */
  void forge(uint8_t op, uint32_t a, uint32_t n) {
    std::vector<uint8_t> f = ctl;
    f[48] = op;
    for (int k = 0; k < 4; ++k) f[56 + k] = static_cast<uint8_t>(a >> (24 - 8 * k)), f[60 + k] = static_cast<uint8_t>(n >> (24 - 8 * k));
    renumber_ctl(f, ctl_number(ctl) + 128 + forged++);  // fresh, within the replay window
    node(2).e->on_frame(f, now);
  }
  /** Nodes 2 and 3 join a NACK stream; node 3 loses every fifth group frame; @p count
   *  messages of 200 bytes go out one each 20 us; then 20 ms pass. */
  void paced_losing_every_fifth_at_3(uint32_t count) {
    start(3, true, true);
    auto n = std::make_shared<int>(0);
    w.drop = [n](const GWire::Frame& f) { return f.group && f.to == 3 && (++*n % 5) == 0; };
    for (uint32_t i = 0; i < count; ++i) {
      send(1, 200, i);
      tick(20 * kUs);
    }
    run_for(20 * kMs);
  }
  /** Node @p id's stream ended once, for @p why. */
  void expect_ended_once(NodeId id, GroupEvent::Why why) const {
    ASSERT_EQ(w.nodes[id]->count(GroupEvent::kEnded), 1u) << "node " << id;
    for (const GroupEvent& e : w.nodes[id]->events)
      if (e.kind == GroupEvent::kEnded) {
        EXPECT_EQ(e.why, why) << "node " << id;
      }
  }
  uint64_t bad_ctl() { return node(2).e->total_counters().reject[static_cast<size_t>(Reject::kBadGroupCtl)]; }
  std::vector<uint8_t> ctl;
  uint32_t forged = 0;
  Seq started_at(NodeId id) const {
    for (const GroupEvent& e : w.nodes[id]->events)
      if (e.kind == GroupEvent::kStarted) return e.position;
    ADD_FAILURE() << "node " << id << " never started";
    return 0;
  }
};

TEST_F(NackStreamTest, WithoutLossEveryMessageArrivesAndMembersAcknowledgeOnlyTheirJoin) {
  start(3, true, true);
  send(500, 100);
  send(10, 5000, 500);
  run_for(20 * kMs);
  for (NodeId i = 2; i <= 3; ++i) {
    ASSERT_EQ(node(i).got.size(), 510u);
    EXPECT_EQ(node(i).e->group_counters().acks_sent, 1u) << "node " << i;
    EXPECT_EQ(node(i).count(GroupEvent::kLost), 0u);
  }
  const GroupCounters& c = node(1).e->group_counters();
  EXPECT_GT(c.nack_freed, 0u) << "frames are freed by age, without ACKs";
  EXPECT_EQ(c.repair_frames, 0u);
  Engine::GroupTxView v;
  ASSERT_TRUE(node(1).e->group_tx_view(kG, &v));
  EXPECT_TRUE(v.nack);
  EXPECT_EQ(v.pending, 0u) << "older than the hold time: all freed";
}

TEST_F(NackStreamTest, ALossWithinTheBufferIsRepairedOnTheMembersNack) {
  // Paced: a burst of more than the window frees its oldest frames before a NACK comes.
  paced_losing_every_fifth_at_3(300);
  expect_all(2, 300, 200);
  expect_all(3, 300, 200);
  EXPECT_GT(node(3).e->group_counters().nacks_sent, 0u);
  EXPECT_GT(node(1).e->group_counters().repair_frames, 0u);
  EXPECT_EQ(node(3).count(GroupEvent::kLost), 0u);
}

TEST_F(NackStreamTest, LossesLongAfterTheFirstFramesAgedOutAreRepairedNotLost) {
  // Do: 20 ms of paced messages, four times the hold: frames age out and are freed all along
  // (the members' one ACK, at their start, falls behind what was freed).
  paced_losing_every_fifth_at_3(1000);
  // Expect: every loss was asked for within the hold and repaired; none reported lost.
  expect_all(3, 1000, 200);
  EXPECT_EQ(node(3).count(GroupEvent::kLost), 0u);
  EXPECT_GT(node(1).e->group_counters().nack_freed, 0u);
}

TEST_F(NackStreamTest, AJoinerFromTheOldestGetsWhatTheSourceHeldBeforeAnyMember) {
  make(2);
  run_for(20 * kMs);
  ASSERT_EQ(node(1).e->group_open(kG, now, true), 0);
  // Do: 40 messages with no member, within the hold; then node 2 joins from the oldest.
  for (uint32_t i = 0; i < 40; ++i) {
    send(1, 100, i);
    tick(20 * kUs);
  }
  ASSERT_EQ(node(2).e->group_join(kG, true, now), 0);
  run_for(3 * kMs);
  // Expect: it gets all 40: a NACK stream holds what it sent for the hold, members or none.
  expect_all(2, 40, 100);
}

TEST_F(NackStreamTest, AGapOlderThanTheBufferIsReportedLostInItsPlace) {
  start(3, true, true);
  const Seq at = started_at(2);
  send(100, 100);
  settle();
  // Do: node 2 is cut off while messages 100..149 go out, for four hold times: the source
  // frees them; then the link heals and 150..199 follow.
  cut_off(2);
  send(50, 100, 100);
  run_for(4 * kHold);
  heal();
  send(50, 100, 150);
  run_for(30 * kMs);
  // Expect: node 2 delivered 0..99 and 150..199 in order, and one LOST event, in place,
  // for the 50 units between; node 3 everything.
  const GNode& m = node(2);
  ASSERT_EQ(m.got.size(), 150u);
  for (uint32_t i = 0; i < 150; ++i) ASSERT_EQ(m.got[i].msg, gmsg(100, i < 100 ? i : i + 50)) << i;
  ASSERT_EQ(m.count(GroupEvent::kLost), 1u);
  for (const GroupEvent& e : m.events)
    if (e.kind == GroupEvent::kLost) {
      EXPECT_EQ(e.position, at + m.count(GroupEvent::kJoined) + 100);  // after the view records
      EXPECT_EQ(e.count, 50u);
    }
  EXPECT_EQ(m.e->group_counters().units_lost, 50u);
  EXPECT_GT(node(1).e->group_counters().lost_told, 0u);
  expect_all(3, 200, 100);
  EXPECT_EQ(m.e->total_counters().rejects(), 0u);
}

TEST_F(NackStreamTest, TheSourceNeverWaitsForAMemberThatDoesNotTake) {
  start(3, true, true);
  // Do: node 3's application takes nothing while 2,000 messages (8 windows) go out.
  node(3).accept = false;
  int again = 0;
  for (uint32_t i = 0; i < 2000; ++i) {
    const int rc = node(1).e->group_send(kG, gmsg(64, i), send_flag::kFastpath, now);
    again += rc == -EAGAIN;
    ASSERT_TRUE(rc == 0 || rc == -EAGAIN);
    if (rc != 0) --i;
    tick(20 * kUs);
  }
  node(3).accept = true;
  run_for(50 * kMs);
  // Expect: the source was never held back; node 2 got all; node 3 got what its window held,
  // and every message it did not get was reported lost (the reports, refused as messages
  // were while it took nothing, offered again): nothing is skipped silently.
  EXPECT_EQ(again, 0);
  expect_all(2, 2000, 64);
  EXPECT_GT(lost_units(3), 0u);
  EXPECT_EQ(node(3).got.size() + lost_units(3), 2000u);
  expect_in_order(3, 2000, 64);
  EXPECT_EQ(node(3).e->total_counters().rejects(), 0u);
  // Expect: while its window was full it did not ask again at every LOST (each answered at
  // once): a handful of NACKs, backing off.
  EXPECT_LT(node(3).e->group_counters().nacks_sent, 100u) << node(3).e->group_counters().nacks_sent;
}

TEST_F(NackStreamTest, AHoleWhoseRepairWasLostIsAskedAgainWhileLaterBlocksAskForTheirs) {
  // Node 3's parity holds and first-hole timer outlast a block's frames: its NACK floor is
  // 3 ms, as an SRTT or a repair round trip of a few ms on a loaded machine makes it.
  tune = [](Config& c) {
    c.group_nack_hold_ns = kHold;
    if (c.node_id == 3) c.nack_interval_ns = 3 * kMs;
  };
  start(3, true, true);
  // Do: node 3 loses one frame in 20 of all it gets (repairs, LOSTs and STATUSes too) while
  // 8,000 messages go out, one each 20 us (160 ms, 32 hold times).
  auto n = std::make_shared<int>(0);
  w.drop = [n](const GWire::Frame& f) { return f.to == 3 && (++*n % 20) == 0; };
  uint64_t before = 0;
  for (uint32_t i = 0; i < 8000; ++i) {
    send(1, 200, i);
    tick(20 * kUs);
    // Expect: it goes on (delivered or told lost) every 20 ms: a hole whose repair was lost
    // is asked again while later blocks ask for theirs and STATUSes say the stream moved on
    // (their asks and holds once held its timer: the member asked only after the stream).
    if (i % 1000 == 999) {
      const uint64_t done = node(3).got.size() + lost_units(3);
      ASSERT_GT(done, before) << "at message " << i;
      before = done;
    }
  }
  run_for(30 * kMs);
  EXPECT_EQ(node(3).got.size() + lost_units(3), 8000u);
  expect_in_order(3, 8000, 200);
  expect_all(2, 8000, 200);
}

TEST_F(NackStreamTest, AMessageThatLostOneFragmentIsDroppedWholeAndTheRestGoOn) {
  start(2, true, true);
  send(10, 5000);
  settle();
  // Do: one group frame of message 10 (a fragment in the middle) never arrives, and node 2's
  // NACKs are lost until it is freed.
  int n = 0;
  w.drop = [&](const GWire::Frame& f) { return (f.group && f.to == 2 && ++n == 2) || (!f.group && f.from == 2); };
  send(10, 5000, 10);
  run_for(4 * kHold);
  heal();
  run_for(20 * kMs);
  // Expect: 19 messages, 10 missing; one LOST event of one unit; no fragment counted as bad.
  const GNode& m = node(2);
  ASSERT_EQ(m.got.size(), 19u);
  for (uint32_t i = 0; i < 19; ++i) ASSERT_EQ(m.got[i].msg, gmsg(5000, i < 10 ? i : i + 1)) << i;
  EXPECT_EQ(m.count(GroupEvent::kLost), 1u);
  EXPECT_EQ(lost_units(2), 1u);
  EXPECT_EQ(m.e->total_counters().rejects(), 0u);
}

TEST_F(NackStreamTest, AClosedStreamEndsOnlyOnceTheMemberHeldOrWasToldOfItsTail) {
  start(2, true, true);
  send(20, 100);
  settle();
  // Do: the last frame is lost by multicast, then the source closes at once.
  w.drop = [](const GWire::Frame& f) { return f.group; };
  send(1, 100, 20);
  settle();
  heal();
  ASSERT_EQ(node(1).e->group_close(kG, now), 0);
  run_for(30 * kMs);
  // Expect: the END found a hole; it was asked for and repaired; then the stream ended CLOSED.
  expect_all(2, 21, 100);
  ASSERT_EQ(node(2).count(GroupEvent::kEnded), 1u);
  for (const GroupEvent& e : node(2).events)
    if (e.kind == GroupEvent::kEnded) {
      EXPECT_EQ(e.why, GroupEvent::kClosed);
    }
}

TEST_F(NackStreamTest, AMemberMoreThanAWindowBehindAtCloseEndsClosedWithEveryGapReportedLost) {
  start(3, true, true);
  send(20, 100);
  settle();
  // Do: node 2 hears nothing of 600 messages (over two windows) and its NACKs are lost; the
  // link heals as the source closes.
  cut_off(2);
  send(600, 100, 20);
  settle();
  heal();
  ASSERT_EQ(node(1).e->group_close(kG, now), 0);
  run_for(40 * kMs);
  // Expect: node 2, never expired, ends CLOSED: what it lacks was reported LOST in its place
  // (the source freed it), and the counter says as much; node 3 got everything.
  const GNode& m = node(2);
  expect_ended_once(2, GroupEvent::kClosed);
  EXPECT_GT(lost_units(2), 0u);
  EXPECT_EQ(m.got.size() + lost_units(2), 620u);
  expect_in_order(2, 620, 100);
  EXPECT_EQ(m.e->group_counters().units_lost, lost_units(2));
  expect_all(3, 620, 100);
  EXPECT_EQ(node(1).e->group_counters().expiries, 0u);
}

TEST_F(NackStreamTest, AMemberStillAskingLongAfterTheCloseIsKeptAndEndsClosed) {
  start(3, true, true);
  send(20, 100);
  settle();
  // Do: node 2 misses messages 20..29 and gets 30..119; the source closes, and nothing of it
  // reaches node 2 for longer than group_expire_ns (50 ms) while node 2 asks for its hole.
  w.drop = [](const GWire::Frame& f) { return f.group && f.to == 2; };
  send(10, 100, 20);
  settle();
  heal();
  send(90, 100, 30);
  settle();
  ASSERT_EQ(node(1).e->group_close(kG, now), 0);
  w.drop = [](const GWire::Frame& f) { return f.from == 1 && f.to == 2; };
  run_for(80 * kMs);
  heal();
  run_for(40 * kMs);
  // Expect: it was kept (it asked), told its hole is lost (and node 3's LEAVE view record,
  // sent after the close), and ended CLOSED; no expiry.
  const GNode& m = node(2);
  expect_ended_once(2, GroupEvent::kClosed);
  EXPECT_EQ(lost_units(2), 11u);
  EXPECT_EQ(m.got.size(), 110u);
  expect_in_order(2, 120, 100);
  EXPECT_EQ(node(1).e->group_counters().expiries, 0u);
}

TEST_F(NackStreamTest, UnitsLostCountsOnlyWhatLostEventsReported) {
  start_keeping_ctl(true);
  const Seq at = started_at(2) + node(2).count(GroupEvent::kJoined) + 10;
  // Do: node 2 misses messages 10..19 (its NACKs lost) and gets 20..29; it is told 15..19
  // are lost (behind the hole at 10), then expired before the hole is repaired.
  cut_off(2);
  send(10, 100, 10);
  settle();
  w.drop = [](const GWire::Frame& f) { return !f.group && f.from == 2; };
  send(10, 100, 20);
  settle();
  forge_lost(at + 5, 5);
  forge(group_op::kExpired, at, 0);
  run_for(5 * kMs);
  // Expect: the stream ended DROPPED at the hole; no LOST event came before it, and the
  // counter of units reported lost says 0 (the ENDED event covers the rest).
  const GNode& m = node(2);
  expect_ended_once(2, GroupEvent::kDropped);
  EXPECT_EQ(m.count(GroupEvent::kLost), 0u);
  EXPECT_EQ(m.e->group_counters().units_lost, lost_units(2));
}

TEST_F(NackStreamTest, ForgedLostEntriesAreDroppedAndCounted) {
  start_keeping_ctl(true);
  // Do: LOST entries with a count above the window, far outside the stream, and one of units
  // node 2 holds already.
  const uint64_t before = bad_ctl();
  const Seq at = started_at(2);
  forge_lost(at, 1u << 30);
  forge_lost(at + (1u << 31), 4);
  forge_lost(at, 5);
  // Expect: the first two counted as bad, the old one harmless; nothing lost, the stream goes on.
  EXPECT_EQ(bad_ctl(), before + 2);
  EXPECT_EQ(node(2).count(GroupEvent::kLost), 0u);
  send(10, 100, 10);
  run_for(5 * kMs);
  expect_all(2, 20, 100);
}

TEST_F(NackStreamTest, ALostEntryOnAnAckStreamIsDroppedAndCounted) {
  start_keeping_ctl(false);
  // Do: a LOST for units node 2 has not got yet, on a stream whose source frees nothing
  // unacknowledged. Expect: counted as bad; the units still arrive, none reported lost.
  const uint64_t before = bad_ctl();
  forge_lost(started_at(2) + 12, 8);
  EXPECT_EQ(bad_ctl(), before + 1);
  send(20, 100, 10);
  run_for(5 * kMs);
  expect_all(2, 30, 100);
  EXPECT_EQ(node(2).count(GroupEvent::kLost), 0u);
}

}  // namespace
}  // namespace imago::rel::test
