// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/send_window.h: the per-peer send buffer (descriptor ring + byte ring).
#include "reliability/send_window.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace imago::rel {
namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

TEST(SendWindowTest, KeepsPayloadsContiguousAcrossTheByteRingWrap) {
  SendWindow w;
  w.init(8, 100);
  w.reset(0xFFFFFFFEu);  // sequence wrap too
  // Do: fill, release, and push a unit that would straddle the end of the byte ring.
  for (int i = 0; i < 3; ++i) w.push(bytes(25, static_cast<uint8_t>(i)), 0, 0);
  for (int i = 0; i < 3; ++i) w.advance_nxt();
  w.release_to(0xFFFFFFFEu + 2);
  Seq s = w.push(bytes(40, 9), 0, 0);
  // Expect: the unit starts at the ring's beginning and reads back whole.
  auto p = w.payload(w.at(s));
  ASSERT_EQ(p.size(), 40u);
  EXPECT_EQ(p[39], 9);
  EXPECT_EQ(w.used(), 2u);
  EXPECT_EQ(w.messages_held(), 2u);
}

TEST(SendWindowTest, FitsChecksSlotsAndBytes) {
  SendWindow w;
  w.init(4, 1000);
  w.reset(0);
  EXPECT_TRUE(w.fits(4, 100, 100));
  EXPECT_FALSE(w.fits(5, 100, 100));
  EXPECT_FALSE(w.fits(1, 950, 100));
}

}  // namespace
}  // namespace imago::rel
