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

TEST(SendWindowTest, FitsChecksUnitsFramesAndSlotsTheSinkStillUses) {
  BusySink sink;
  SendWindow w;
  w.init(4, 2, kMtu, 0, FrameRoom{64, 16, 8}, &sink);
  w.reset(0);
  ASSERT_TRUE(w.sink_memory());
  EXPECT_TRUE(w.fits(1, 14));
  EXPECT_TRUE(w.fits(2, 40));   // two fragments, a frame each
  EXPECT_FALSE(w.fits(3, 60));  // three frames: only two
  EXPECT_FALSE(w.fits(5, 5));   // five units: only four
  // Expect: the sink's priv bytes start zeroed, the frame's records after its room.
  EXPECT_EQ(sink.mem[0], 0);
  w.push(bytes(14, 1), 0, 0);
  EXPECT_TRUE(w.fits(1, 14));   // joins the open frame
  EXPECT_TRUE(w.fits(1, 30));   // needs the second frame
  sink.busy.insert(w.slot(1));
  EXPECT_TRUE(w.fits(1, 14));   // still joins the open frame
  EXPECT_FALSE(w.fits(1, 30));  // the second slot is in use beyond the window
  sink.busy.clear();
  EXPECT_TRUE(w.fits(1, 30));
}

}  // namespace
}  // namespace imago::rel
