// SPDX-License-Identifier: BSD-3-Clause
// The small parts under the circuits' data path: the forwarding table (FlatMap) against
// std::unordered_map through long random churn, the links' health (HELLOs unanswered, not
// time), and the header CRC's two-instruction path against crc32c().
#include <gtest/gtest.h>

#include <unordered_map>

#include "reliability/circuits/flat_map.h"
#include "reliability/circuits/link_health.h"
#include "reliability/circuits/wire.h"
#include "reliability/rng.h"

namespace imago::rel::circ {
namespace {

TEST(FlatMap, AgreesWithAnUnorderedMapThroughChurnAndNeverTakesMoreThanItsRoom) {
  constexpr size_t kMax = 300;
  FlatMap m(kMax);
  std::unordered_map<uint64_t, uint32_t> truth;
  Rng rng(7);
  // Keys from a small space so that runs collide, grow and are cut by erases.
  for (int step = 0; step < 200000; ++step) {
    const uint64_t k = 1 + rng.next() % 600;
    switch (rng.next() % 3) {
      case 0: {
        const uint32_t v = static_cast<uint32_t>(rng.next());
        const bool fits = truth.count(k) != 0 || truth.size() < kMax;
        ASSERT_EQ(m.put(k, v), fits) << step;
        if (fits) truth[k] = v;
        break;
      }
      case 1: ASSERT_EQ(m.erase(k), truth.erase(k) == 1) << step; break;
      default: {
        const uint32_t* v = m.find(k);
        auto it = truth.find(k);
        ASSERT_EQ(v != nullptr, it != truth.end()) << step;
        if (v != nullptr) {
          ASSERT_EQ(*v, it->second) << step;
        }
      }
    }
    ASSERT_EQ(m.size(), truth.size());
  }
  for (const auto& [k, v] : truth) ASSERT_TRUE(m.find(k) != nullptr && *m.find(k) == v);
}

TEST(FlatMap, KeyZeroIsNeverAKey) {
  FlatMap m(4);
  EXPECT_FALSE(m.put(0, 1));
  EXPECT_EQ(m.find(0), nullptr);  // an empty slot is not a hit
  EXPECT_FALSE(m.erase(0));
  EXPECT_EQ(m.size(), 0u);
}

TEST(LinkHealth, ALinkIsDownAfterMissHellosUnansweredAndUpAtTheNextFrame) {
  LinkHealth h;
  h.init({.hello_ns = 1000, .miss = 3}, 2, 0);
  uint64_t now = 0;
  int sent = 0;
  // Port 1 hears back after each HELLO; port 0 hears nothing.
  for (; sent < 3; ++sent, now += 1000) {
    EXPECT_TRUE(h.hello_due(0, now));
    EXPECT_TRUE(h.hello_due(1, now));
    EXPECT_FALSE(h.heard(1));
    EXPECT_FALSE(h.went_down(1));
    if (sent < 2) {
      EXPECT_FALSE(h.went_down(0)) << sent;
    }
  }
  EXPECT_TRUE(h.went_down(0));
  EXPECT_FALSE(h.went_down(0));  // once
  EXPECT_FALSE(h.up(0));
  EXPECT_TRUE(h.up(1));
  EXPECT_TRUE(h.heard(0));  // back up
  EXPECT_TRUE(h.up(0));
}

TEST(LinkHealth, AStallOfOurOwnCountsOneHelloNotTheTimeItLasted) {
  LinkHealth h;
  h.init({.hello_ns = 1000, .miss = 3}, 1, 0);
  EXPECT_TRUE(h.hello_due(0, 0));
  // We were off the core for a million intervals: one HELLO is due, no more.
  EXPECT_TRUE(h.hello_due(0, 1'000'000'000));
  EXPECT_FALSE(h.hello_due(0, 1'000'000'000));
  EXPECT_FALSE(h.went_down(0));
}

// A link failed one way: the neighbour hears nothing of us, we still hear it. It routed round
// the link; we went on using it (an outside tester: a ring's circuit set up over it again and
// again, both ends declared dead, 16,384 messages dropped). Its HELLOs say it is deaf: the
// link is down here too, frames from it do not bring it up, and it is up once it hears us.
TEST(LinkHealth, ALinkWhoseNeighbourHearsNothingOfUsIsDown) {
  LinkHealth h;
  h.init({.hello_ns = 1000, .miss = 3}, 1, 0);
  EXPECT_TRUE(h.hears(0));
  EXPECT_FALSE(h.peer_hears(0, false)) << "we sent it no HELLO yet: it cannot have heard us";
  uint64_t now = 0;
  for (; now < 3000; now += 1000) {
    EXPECT_TRUE(h.hello_due(0, now));
    EXPECT_FALSE(h.heard(0));
  }
  EXPECT_FALSE(h.peer_hears(0, true));  // up already
  EXPECT_TRUE(h.peer_hears(0, false));  // goes down
  EXPECT_FALSE(h.up(0));
  EXPECT_FALSE(h.heard(0)) << "its frames still come: the link stays down while it is deaf";
  EXPECT_FALSE(h.up(0));
  EXPECT_TRUE(h.hears(0)) << "our HELLOs say we hear it";
  EXPECT_TRUE(h.peer_hears(0, true));  // it hears us again: up
  EXPECT_TRUE(h.up(0));
  // We hear nothing (miss HELLOs unanswered): our HELLOs say so, and its word cannot bring
  // the link up.
  for (const uint64_t end = now + 3000; now < end; now += 1000) EXPECT_TRUE(h.hello_due(0, now));
  EXPECT_FALSE(h.hears(0));
  EXPECT_TRUE(h.went_down(0));
  EXPECT_FALSE(h.peer_hears(0, true));
  EXPECT_FALSE(h.up(0));
  EXPECT_TRUE(h.heard(0));  // a frame of it: both ways again
  EXPECT_TRUE(h.up(0));
}

TEST(LinkHealth, ALinkWhoseNeighbourLeftIsDownAtOnceUntilItHearsUsAgain) {
  LinkHealth h;
  h.init({.hello_ns = 1000, .miss = 3}, 1, 0);
  EXPECT_TRUE(h.peer_left(0)) << "its last HELLO: down at once, whatever we have sent";
  EXPECT_FALSE(h.up(0));
  EXPECT_FALSE(h.peer_left(0)) << "down already";
  EXPECT_FALSE(h.heard(0)) << "a frame still on its way brings it back no more";
  uint64_t now = 0;
  for (; now < 3000; now += 1000) EXPECT_TRUE(h.hello_due(0, now));
  // Restarted, its HELLOs say first that it hears nothing of us: still down; then that it
  // does: up.
  EXPECT_FALSE(h.heard(0));
  EXPECT_FALSE(h.peer_hears(0, false));
  EXPECT_FALSE(h.up(0));
  EXPECT_FALSE(h.heard(0));
  EXPECT_TRUE(h.peer_hears(0, true));
  EXPECT_TRUE(h.up(0));
}

TEST(CircuitWire, TheHeaderCrcsShortPathIsCrc32c) {
  Rng rng(3);
  for (int i = 0; i < 10000; ++i) {
    uint8_t f[sizeof(CircuitHeader)];
    for (uint8_t& b : f) b = static_cast<uint8_t>(rng.next());
    std::memset(f + offsetof(CircuitHeader, crc), 0, 4);
    ASSERT_EQ(circ_header_crc(f), crc32c(0, f, sizeof f));
  }
  // A sealed DATA frame reads back; one flipped header bit does not.
  uint8_t d[sizeof(CircuitHeader) + 5] = {};
  circ_header(d, CircKind::kData, 0x12345678);
  circ_seal(d, 0);
  CircuitHeader h;
  EXPECT_TRUE(circ_read(d, &h));
  // A hop's rewrite is a header sealed anew with the other VCI.
  circ_rewrite_vci(d, 0xCAFEF00D);
  ASSERT_TRUE(circ_read(d, &h));
  EXPECT_EQ(h.vci.get(), 0xCAFEF00Du);
  d[5] ^= 1;
  EXPECT_FALSE(circ_read(d, &h));
}

}  // namespace
}  // namespace imago::rel::circ
