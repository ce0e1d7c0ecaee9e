// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/send_window.h: the per-peer send buffer (unit descriptors and
// the ring of held frames).
#include "reliability/send_window.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace imago::rel {
namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

// 64-byte frames: a 32-byte header, no SACK room, 32 bytes of records (two 14-byte units).
constexpr uint32_t kMtu = sizeof(FrameHeader) + 32;

/** A sink whose slots stay busy while listed. */
struct BusySink : FrameSink {
  bool send_frame(NodeId, std::span<const uint8_t>) override { return true; }
  uint8_t* frame_memory_alloc(size_t n) override {
    mem.assign(n, 0xEE);
    return mem.data();
  }
  bool slot_busy(const uint8_t* slot) const override { return busy.count(slot) != 0; }
  std::vector<uint8_t> mem;
  std::set<const uint8_t*> busy;
};

/** Send every unsent frame. */
void send_all(SendWindow& w) {
  uint32_t pos;
  while (w.next_unsent(&pos)) w.mark_sent();
}

TEST(SendWindowTest, CoalescesUnitsIntoFramesAndFreesFramesOnlyWhenAllTheirUnitsAreAcked) {
  SendWindow w;
  w.init(8, 3, kMtu, 0, FrameRoom{}, nullptr);
  w.reset(0xFFFFFFFEu);  // sequence wrap too
  // Do: four 14-byte units (16 bytes as records): two frames of two.
  for (uint8_t i = 0; i < 4; ++i) w.push(bytes(14, i), 0, 0);
  EXPECT_EQ(w.free_frames(), 1u);
  EXPECT_EQ(w.at(0xFFFFFFFEu).fpos, w.at(0xFFFFFFFFu).fpos);
  EXPECT_NE(w.at(0xFFFFFFFFu).fpos, w.at(0u).fpos);
  send_all(w);
  EXPECT_EQ(w.nxt(), 2u);
  // Expect: an ACK inside the first frame frees no frame; one past it frees it.
  w.release_to(0xFFFFFFFFu);
  EXPECT_EQ(w.free_frames(), 1u);
  w.release_to(0u);
  EXPECT_EQ(w.free_frames(), 2u);
  // Do: wrap the frame ring; each unit reads back whole.
  for (uint8_t i = 4; i < 8; ++i) w.push(bytes(14, i), 0, 0);
  EXPECT_EQ(w.free_frames(), 0u);
  for (Seq s = 0; s != 6; ++s) {
    auto p = w.payload(w.at(s));
    ASSERT_EQ(p.size(), 14u);
    EXPECT_EQ(p[13], static_cast<uint8_t>(s + 2));
  }
  EXPECT_EQ(w.messages_held(), 6u);
}

TEST(SendWindowTest, TransmissionStateIsPerFrame) {
  SendWindow w;
  w.init(8, 4, kMtu, 0, FrameRoom{}, nullptr);
  w.reset(10);
  // Do: six units, three frames of two (10-11, 12-13, 14-15), sent and put in flight in
  // that order.
  for (uint8_t i = 0; i < 6; ++i) w.push(bytes(14, i), 0, 0);
  uint32_t pos[3];
  for (uint32_t& p : pos) {
    ASSERT_TRUE(w.next_unsent(&p));
    w.mark_sent();
    w.flight_push(p);
  }
  EXPECT_EQ(w.fpos(12), pos[1]);
  EXPECT_EQ(w.fpos(13), pos[1]);
  EXPECT_EQ(w.frame_end(pos[1]), 14u);
  uint32_t oldest;
  ASSERT_TRUE(w.flight_oldest(&oldest));
  EXPECT_EQ(oldest, pos[0]);
  // Expect: half a frame SACKed is not delivered; all of it is.
  w.set_sacked(12);
  EXPECT_FALSE(w.frame_delivered(pos[1]));
  EXPECT_EQ(w.frame_missing(pos[1]), 1u);
  w.set_sacked(13);
  EXPECT_TRUE(w.frame_delivered(pos[1]));
  // Expect: a lost frame leaves flight; retransmitted, it is the newest in flight.
  w.set_retx(pos[0]);
  EXPECT_EQ(w.retx_frames(), 1u);
  ASSERT_TRUE(w.flight_oldest(&oldest));
  EXPECT_EQ(oldest, pos[1]);
  w.clear_retx(pos[0]);
  w.flight_push(pos[0]);
  w.flight_remove(pos[1]);
  ASSERT_TRUE(w.flight_oldest(&oldest));
  EXPECT_EQ(oldest, pos[2]);
  // Expect: an ACK inside a frame keeps it; its unacknowledged part is what is missing.
  w.set_retx(pos[2]);
  w.release_to(15);
  EXPECT_EQ(w.frame_first(pos[2]), 15u);
  EXPECT_EQ(w.frame_missing(pos[2]), 1u);
  EXPECT_EQ(w.retx_frames(), 1u);
  // Expect: the ACK past it releases it, its repair and its place in flight.
  w.release_to(16);
  EXPECT_EQ(w.retx_frames(), 0u);
  EXPECT_FALSE(w.flight_oldest(&oldest));
  EXPECT_EQ(w.free_frames(), 4u);
}

TEST(SendWindowTest, FitsChecksUnitsAndFrames) {
  SendWindow w;
  w.init(4, 2, kMtu, 0, FrameRoom{}, nullptr);
  w.reset(0);
  EXPECT_TRUE(w.fits(1, 14));
  EXPECT_TRUE(w.fits(2, 40));   // two fragments, a frame each
  EXPECT_FALSE(w.fits(3, 60));  // three frames: only two
  EXPECT_FALSE(w.fits(5, 5));   // five units: only four
  w.push(bytes(14, 1), 0, 0);
  EXPECT_TRUE(w.fits(1, 14));   // joins the open frame
  EXPECT_TRUE(w.fits(1, 30));   // needs the second frame
  EXPECT_FALSE(w.fits(2, 40));  // needs two more
}

TEST(SendWindowTest, ASlotTheSinkStillUsesIsParkedAndSparesStandIn) {
  BusySink sink;
  SendWindow w;
  w.init(4, 2, kMtu, 0, FrameRoom{64, 16, 8}, &sink);
  w.reset(0);
  ASSERT_TRUE(w.sink_memory());
  EXPECT_EQ(sink.mem[0], 0);  // the sink's priv bytes start zeroed
  // Do: one unit a frame; the sink keeps each slot after its frame was sent and acknowledged.
  Seq acked = 0;
  int sent = 0;
  while (w.fits(1, 30) && sent < 1000) {
    w.push(bytes(30, 1), 0, 0);
    uint32_t pos;
    ASSERT_TRUE(w.next_unsent(&pos));
    EXPECT_EQ(sink.busy.count(w.slot_of(pos)), 0u) << "a busy slot reused";
    sink.busy.insert(w.slot_of(pos));
    w.mark_sent();
    w.release_to(++acked);
    ++sent;
  }
  // Expect: the 2 frames' slots and 64 spares, each used once, then parked; none freed.
  EXPECT_EQ(sent, 66);
  EXPECT_EQ(w.parked(), 66u);
  EXPECT_EQ(sink.busy.size(), 66u);
  // Expect: let go, they are free again.
  sink.busy.clear();
  EXPECT_TRUE(w.fits(1, 30));
  EXPECT_EQ(w.parked(), 0u);
}

}  // namespace
}  // namespace imago::rel
