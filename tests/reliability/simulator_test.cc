// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of the simulator itself (sim.h, sim_cluster.h): one seed replays exactly, every
// fault knob does what it says, and the link pushes back when its queue is full.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/reliability/sim.h"
#include "tests/reliability/sim_cluster.h"

namespace imago::sim {
namespace {

std::vector<uint64_t> arrivals(uint64_t seed, const LinkFaults& f) {
  Network n(seed, 2);
  n.set_all(f);
  std::vector<uint8_t> frame(100, 0xAB);
  std::vector<uint64_t> out;
  for (uint64_t t = 0; t < 1000; ++t) {
    n.transmit(0, 1, frame, t * 1000);
    n.deliver_due(t * 1000, [&](NodeId, NodeId, std::span<const uint8_t> b) {
      out.push_back(t * 1000 + b[0]);
    });
  }
  n.deliver_due(~uint64_t{0} - 1,
                [&](NodeId, NodeId, std::span<const uint8_t> b) { out.push_back(b[0]); });
  return out;
}

TEST(SimTest, SameSeedReplaysExactly) {
  LinkFaults f;
  f.loss = 0.1, f.reorder = 0.1, f.dup = 0.1, f.corrupt = 0.1, f.jitter_ns = 5000;
  // Expect: identical arrival traces for one seed, different ones for another.
  EXPECT_EQ(arrivals(7, f), arrivals(7, f));
  EXPECT_NE(arrivals(7, f), arrivals(8, f));
}

TEST(SimTest, FaultKnobsLoseDuplicateAndCorrupt) {
  Network n(1, 2);
  LinkFaults f;
  f.loss = 0.2, f.dup = 0.1, f.corrupt = 0.1;
  n.set_all(f);
  std::vector<uint8_t> frame(64, 0);
  size_t got = 0, flipped = 0;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(n.transmit(0, 1, frame, uint64_t(i) * 10000));
    n.deliver_due(uint64_t(i) * 10000 + 5000, [&](NodeId, NodeId, std::span<const uint8_t> b) {
      ++got;
      for (uint8_t x : b) flipped += x != 0;
    });
  }
  n.deliver_due(~uint64_t{0} - 1, [&](NodeId, NodeId, std::span<const uint8_t>) { ++got; });
  // Expect: about 80 % arrive, plus 10 % duplicates; some bytes flipped.
  EXPECT_NEAR(static_cast<double>(n.lost()) / 10000, 0.2, 0.02);
  EXPECT_GT(n.dups(), 700u);
  EXPECT_GT(flipped, 0u);
  EXPECT_EQ(got, 10000 - n.lost() + n.dups());
}

TEST(SimTest, PartitionDropsBothWaysUntilItHeals) {
  Network n(1, 3);
  n.add_drop({100, 200, 0, 1, false, false});
  std::vector<uint8_t> frame(10, 0);
  n.transmit(0, 1, frame, 150);
  n.transmit(1, 0, frame, 150);
  n.transmit(0, 2, frame, 150);
  n.transmit(0, 1, frame, 250);
  // Expect: the two frames inside the window on the 0-1 link are lost, the rest arrive.
  EXPECT_EQ(n.lost(), 2u);
}

TEST(SimTest, FullLinkQueuePushesBack) {
  Network n(1, 2);
  LinkFaults f;
  f.max_queue_ns = 1000;
  f.ns_per_byte = 1;
  n.set_all(f);
  std::vector<uint8_t> frame(600, 0);
  // Expect: two frames fill 1200 ns of queue; the third is refused at the same instant.
  EXPECT_TRUE(n.transmit(0, 1, frame, 0));
  EXPECT_TRUE(n.transmit(0, 1, frame, 0));
  EXPECT_FALSE(n.transmit(0, 1, frame, 0));
}

TEST(SimTest, ClusterRunIsCleanOnAPerfectNetwork) {
  Scenario sc;
  sc.nodes = 3;
  sc.msgs = 600;
  sc.cfg.max_message_size = 64 * 1024;
  sc.cfg.send_buffer_bytes = 256 * 1024;
  sc.cfg.send_window = 1024;
  Cluster c(3, sc);
  // Expect: no error, everything delivered, nothing excused.
  EXPECT_EQ(c.run(), "");
  EXPECT_EQ(c.delivered(), 600u);
  EXPECT_EQ(c.excused(), 0u);
}

}  // namespace
}  // namespace imago::sim
