// SPDX-License-Identifier: BSD-3-Clause
// Protocol tests of the SACK block (reliability/engine_sack.cc): ranges while they fit, a
// bitmap when there are more runs, SACK_MORE when units are left out, a new hole reported at
// once, and ACK requests spaced in ACK-required state. Steps written as // Do and // Expect.
#include <gtest/gtest.h>

#include <vector>

#include "reliability/engine.h"
#include "tests/reliability/harness.h"

namespace imago::rel::test {
namespace {

class SackTest : public Pair {
 protected:
  /** Windows large enough for hundreds of one-unit frames in flight. */
  void SetUp() override {
    for (Config* c : {&ca, &cb}) {
      c->send_window = 4096;
      c->recv_window = 1024;
      c->send_buffer_bytes = 8u << 20;
    }
    Pair::SetUp();
    connect();
  }
  /** A sends @p n fast messages (one frame each); those @p lost says are dropped, B gets the
   *  rest. Messages are numbered across calls. @return the seq of the first. */
  Seq send_and_lose(uint32_t n, bool (*lost)(uint32_t)) {
    const size_t before = a.out.size();
    for (uint32_t i = 0; i < n; ++i, ++sent_)
      EXPECT_EQ(a.e->send(2, msg(8, static_cast<uint8_t>(sent_)), send_flag::kFastpath, now), 0);
    EXPECT_EQ(a.out.size(), before + n);
    const Seq first = header_of(a.out[before].second).seq;
    for (uint32_t i = 0; i < n; ++i) {
      Bytes f = std::move(a.out[before].second);
      a.out.erase(a.out.begin() + static_cast<ptrdiff_t>(before));
      if (!lost(i)) b.e->on_frame(f, now);
    }
    return first;
  }
  /** Units A put in the frames it emitted since @p from. */
  size_t units_sent(size_t from = 0) const {
    size_t n = 0;
    for (size_t i = from; i < a.out.size(); ++i) n += records_of(a.out[i].second).size();
    return n;
  }
  void expect_all_delivered(uint32_t n) {
    for (int i = 0; i < 100 && b.got.size() < n; ++i) tick();
    ASSERT_EQ(b.got.size(), n);
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(b.got[i], msg(8, static_cast<uint8_t>(i)));
  }
  uint32_t sent_ = 0;
};

TEST_F(SackTest, ManyHolesGoOutAsABitmapAndOnlyTheHolesAreResent) {
  // Do: 400 one-unit frames, every other one lost: 200 runs, more than an ACK's 128 entries.
  const Seq first = send_and_lose(400, [](uint32_t i) { return i % 2 == 0; });
  // Expect: B's latest ACK is a bitmap of exactly what it holds, complete (no SACK_MORE).
  ASSERT_FALSE(b.out.empty());
  const Bytes& f = b.out.back().second;
  const Header h = header_of(f);
  EXPECT_EQ(h.type, FrameType::kAck);
  EXPECT_EQ(h.ack, first);
  ASSERT_TRUE(h.flags & frame_flag::kSackBitmap);
  EXPECT_FALSE(h.flags & frame_flag::kSackMore);
  const Seq base = first & ~Seq{63};
  EXPECT_EQ(h.sack_count, (first + 400 - base + 63) / 64);
  for (uint32_t k = 0; k < h.sack_count; ++k) {
    const uint64_t w = decode_sack_word(f, k);
    for (uint32_t j = 0; j < 64; ++j) {
      const uint32_t i = base + 64 * k + j - first;  // message index (wraps below first)
      EXPECT_EQ((w >> j) & 1, i < 400 && i % 2 == 1 ? 1u : 0u) << "unit " << i;
    }
  }
  // Do: A takes B's ACKs (one per new hole) and flushes.
  const size_t from = a.out.size();
  move(b);
  a.e->poll(now);
  // Expect: the 200 lost units go again, none of the 200 B holds; all 400 arrive in order.
  EXPECT_EQ(units_sent(from), 200u);
  EXPECT_EQ(a.e->counters(2)->msgs_retransmitted, 200u);
  EXPECT_EQ(b.e->counters(1)->dup_received, 0u);
  expect_all_delivered(400);
}

TEST_F(SackTest, AnOriginalOvertakenByItsRepairMakesNoFrameSentBeforeTheRepairLookLost) {
  // Do: 40 one-unit frames; #1 is lost, #4 is held back (reordered), B gets #0, #2, #3, #5;
  // #6..#39 are still on the wire.
  for (uint32_t i = 0; i < 40; ++i, ++sent_)
    ASSERT_EQ(a.e->send(2, msg(8, static_cast<uint8_t>(i)), send_flag::kFastpath, now), 0);
  std::vector<Bytes> wire;
  for (auto& f : a.out) wire.push_back(std::move(f.second));
  a.out.clear();
  for (uint32_t i : {0u, 2u, 3u, 5u}) b.e->on_frame(wire[i], now);
  // Do: A takes B's SACK: #1 and #4 look lost (something sent after them arrived).
  move(b);
  a.e->poll(now);
  // Expect: those two repaired, nothing else.
  ASSERT_EQ(units_sent(), 2u);
  std::vector<Bytes> repairs;
  for (auto& f : a.out) repairs.push_back(std::move(f.second));
  a.out.clear();
  // Do: #4's original arrives before either repair; B's next frame (a message to A) SACKs it.
  b.e->on_frame(wire[4], now);
  ASSERT_EQ(b.e->send(1, msg(8, 99), send_flag::kFastpath, now), 0);
  move(b);
  // Expect: no frame goes again. That #4 arrived proves only that its original or its repair
  // did: #6..#39 (sent before the repair, still on the wire) and #1's repair are not lost.
  EXPECT_EQ(units_sent(), 0u);
  EXPECT_EQ(a.e->counters(2)->msgs_retransmitted, 2u);
  // Do: the rest arrives. Expect: all 40, once each; #4's repair is B's one duplicate.
  for (size_t i = 6; i < wire.size(); ++i) b.e->on_frame(wire[i], now);
  for (const Bytes& f : repairs) b.e->on_frame(f, now);
  expect_all_delivered(40);
  EXPECT_EQ(b.e->counters(1)->dup_received, 1u);
  EXPECT_EQ(a.e->counters(2)->msgs_retransmitted, 2u);
}

TEST_F(SackTest, ADataFrameSaysWhenItsSackLeavesUnitsOut) {
  // Do: 300 frames, 6 of them lost: 6 runs held, more than a DATA frame's 4 ranges.
  send_and_lose(300, [](uint32_t i) {
    return i == 0 || i == 100 || i == 200 || i == 250 || i == 280 || i == 290;
  });
  b.out.clear();
  // Do: B sends A a message: a DATA frame carries the SACK.
  ASSERT_EQ(b.e->send(1, msg(8, 99), send_flag::kFastpath, now), 0);
  ASSERT_EQ(b.out.size(), 1u);
  const Header h = header_of(b.out.front().second);
  // Expect: 4 ranges (they reach further than 4 bitmap words would), and SACK_MORE.
  EXPECT_EQ(h.type, FrameType::kData);
  EXPECT_FALSE(h.flags & frame_flag::kSackBitmap);
  EXPECT_EQ(h.sack_count, 4u);
  EXPECT_TRUE(h.flags & frame_flag::kSackMore);
  // Do: A takes it and flushes.
  const size_t from = a.out.size();
  move(b);
  a.e->poll(now);
  // Expect: only the 4 holes below the last range go again: A cannot know about the rest.
  EXPECT_EQ(units_sent(from), 4u);
  expect_all_delivered(300);
}

TEST_F(SackTest, ANewHoleIsReportedAtOnceEvenWithinTheNackInterval) {
  // Do: lose the first of 3; B NACKs at once.
  send_and_lose(3, [](uint32_t i) { return i == 0; });
  ASSERT_EQ(b.out.size(), 1u);
  b.out.clear();
  // Do: at the same instant, 3 more, the first of them lost.
  send_and_lose(3, [](uint32_t i) { return i == 0; });
  // Expect: B reported the second hole at once: two runs.
  ASSERT_EQ(b.out.size(), 1u);
  const Header h = header_of(b.out.front().second);
  EXPECT_TRUE(h.flags & frame_flag::kNack);
  EXPECT_EQ(h.sack_count, 2u);
  b.out.clear();
  // Do: one more, in order after the highest held.
  send_and_lose(1, [](uint32_t) { return false; });
  // Expect: no new hole, no new ACK (the NACK interval has not passed).
  EXPECT_TRUE(b.out.empty());
  expect_all_delivered(7);
}

TEST_F(SackTest, AckRequiredStateAsksOncePerSpacingNotEveryFrame) {
  // Do: 3500 one-unit frames that B never sees: the window passes its low water mark (25 %
  // free of 4096 units) at unit 3073.
  for (uint32_t i = 0; i < 3500; ++i)
    ASSERT_EQ(a.e->send(2, msg(8, static_cast<uint8_t>(i)), send_flag::kFastpath, now), 0);
  // Expect: ACK requests from the first frame past the mark on, one per 4096 / 256 = 16
  // units, not one per frame.
  std::vector<uint32_t> asks;
  for (uint32_t i = 0; i < a.out.size(); ++i)
    if (header_of(a.out[i].second).flags & frame_flag::kAckReq) asks.push_back(i);
  ASSERT_GE(asks.size(), 2u);
  EXPECT_GE(asks.front(), 3000u);
  for (size_t k = 1; k < asks.size(); ++k) EXPECT_EQ(asks[k] - asks[k - 1], 16u);
  EXPECT_EQ(asks.size(), (3500 - asks.front() + 15) / 16);
}

}  // namespace
}  // namespace imago::rel::test
