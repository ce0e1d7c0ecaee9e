// SPDX-License-Identifier: BSD-3-Clause
// The frames a stream keeps in flight while it repairs losses (reliability/delay_cap.h):
// the cap's rules one by one, then a stream in the simulator whose link queue would hold
// its whole window.
#include <gtest/gtest.h>

#include <cstdint>

#include "reliability/config.h"
#include "reliability/delay_cap.h"
#include "tests/reliability/sim_cluster.h"

namespace imago::rel {
namespace {

constexpr uint64_t kUsNs = 1000;

/** Time one probe sent at @p sent_ns as transmission @p number, answered at @p at_ns. */
bool sample(DelayCap& d, uint64_t number, uint64_t sent_ns, uint64_t at_ns, uint32_t flight,
            uint64_t frames_sent = 0) {
  EXPECT_TRUE(d.want_probe(sent_ns));
  d.asked(number, sent_ns, true);
  return d.delivered(number, frames_sent != 0 ? frames_sent : number, at_ns, flight, 16384, ~uint64_t{0});
}

TEST(DelayCap, DoesNothingWithoutALoss) {
  DelayCap d;
  // Expect: no probe, no cap, whatever is in flight.
  EXPECT_FALSE(d.want_probe(1000));
  EXPECT_TRUE(d.allows(1'000'000, 1000));
  EXPECT_FALSE(d.want_clock(5, 1000));
}

TEST(DelayCap, CutsTheFlightToTheQueueAllowedOnceARound) {
  DelayCap d;
  const uint64_t t0 = 1'000'000;
  d.lost(t0);
  // Do: a 10 us round trip with no queue, then one of 610 us with 1000 frames in flight.
  EXPECT_FALSE(sample(d, 1, t0, t0 + 10 * kUsNs, 100));
  EXPECT_EQ(d.base(), 10 * kUsNs);
  EXPECT_TRUE(sample(d, 2, t0 + 20 * kUsNs, t0 + 630 * kUsNs, 1000, 1500));
  // Expect: the flight cut to what takes base + 50 us: 1000 x 60 / 610 = 98 frames.
  EXPECT_EQ(d.cap(), 98u);
  EXPECT_FALSE(d.allows(98, t0 + 631 * kUsNs));
  EXPECT_TRUE(d.allows(97, t0 + 631 * kUsNs));
  // Do: a probe sent before the cut's frames left (number 1500 or less) finds the queue too.
  // Expect: no second cut in the same round.
  EXPECT_FALSE(sample(d, 1400, t0 + 640 * kUsNs, t0 + 1200 * kUsNs, 90, 1600));
  EXPECT_EQ(d.cap(), 98u);
  // Do: one sent after it does. Expect: cut again, from what is in flight.
  EXPECT_TRUE(sample(d, 1601, t0 + 1300 * kUsNs, t0 + 1900 * kUsNs, 90, 1700));
  EXPECT_EQ(d.cap(), 32u);  // 90 x 60 / 600 = 9: at least a receive burst
}

TEST(DelayCap, GrowsByAnEighthARoundWithinTheTargetAndIsGoneAtTheWindow) {
  DelayCap d;
  const uint64_t t0 = 1'000'000;
  d.lost(t0);
  sample(d, 1, t0, t0 + 10 * kUsNs, 100);
  sample(d, 2, t0, t0 + 1010 * kUsNs, 1000);  // 1000 x 60 / 1010: 59
  ASSERT_EQ(d.cap(), 59u);
  // Expect: a sample within base + 50 us grows the cap by an eighth (7), and asks for an
  // ACK every quarter of a cap while it holds frames back.
  EXPECT_FALSE(sample(d, 10'000, t0 + 2 * kMs, t0 + 2 * kMs + 40 * kUsNs, 59));
  EXPECT_EQ(d.cap(), 66u);
  EXPECT_FALSE(d.want_clock(10'010, t0 + 3 * kMs));
  EXPECT_TRUE(d.want_clock(10'016, t0 + 3 * kMs));
  uint64_t n = 20'000;
  while (d.cap() != 0) {
    ASSERT_LT(n, 30'000u);
    sample(d, ++n, t0 + 3 * kMs, t0 + 3 * kMs + 10 * kUsNs, d.cap());
  }
  EXPECT_TRUE(d.allows(1'000'000, t0 + 3 * kMs));
}

TEST(DelayCap, ForgetsTheCapAfterAQuietSpellAndAProbeFoundLost) {
  DelayCap d;
  const uint64_t t0 = 1'000'000;
  d.lost(t0);
  sample(d, 1, t0, t0 + 10 * kUsNs, 100);
  sample(d, 2, t0, t0 + 1010 * kUsNs, 1000);
  ASSERT_NE(d.cap(), 0u);
  // Expect: kLossMemory after the last loss, nothing held back and nothing asked; the next
  // loss starts without the old cap.
  const uint64_t quiet = t0 + DelayCap::kLossMemory;
  EXPECT_TRUE(d.allows(1'000'000, quiet));
  EXPECT_FALSE(d.want_probe(quiet));
  d.lost(quiet + 1);
  EXPECT_EQ(d.cap(), 0u);
  // Do: a probe found lost, then a later frame delivered after the repair.
  // Expect: no sample from it (it would time the repair), and a new probe may go.
  d.asked(50, quiet + 2, true);
  d.forget(50);
  EXPECT_TRUE(d.want_probe(quiet + 3));
  EXPECT_FALSE(d.delivered(60, 60, quiet + 10 * kMs, 1000, 16384, ~uint64_t{0}));
  EXPECT_EQ(d.cap(), 0u);
}

/** A one-way stream of 1 KiB messages at 1 % loss onto a 10 Gb/s link whose queue holds
 *  20 ms. */
sim::Scenario lossy_stream(bool delay_cap) {
  sim::Scenario sc = sim::one_way_stream(30000, 1024);
  sc.cfg = fast_link_preset();
  sc.cfg.send_window = sc.cfg.recv_window = 16384;
  sc.cfg.max_message_size = 64 * 1024;
  sc.cfg.delay_cap = delay_cap;
  sc.faults.loss = 0.01;
  sc.faults.max_queue_ns = 20 * kMs;
  return sc;
}

class DelayCapStream : public ::testing::TestWithParam<uint64_t> {};

TEST_P(DelayCapStream, ASenderRepairingLossesKeepsTheQueueBeforeItShort) {
  // The queue fills before the first loss is found: only what follows counts.
  sim::Cluster capped(GetParam(), lossy_stream(true));
  capped.net().queue_stats_from(10 * kMs);
  ASSERT_EQ(capped.run(), "");
  sim::Cluster whole(GetParam(), lossy_stream(false));
  whole.net().queue_stats_from(10 * kMs);
  ASSERT_EQ(whole.run(), "");
  // Expect: both deliver everything. Keeping the whole window in flight, a frame waits
  // milliseconds in the link's queue (and each repair behind it); with the cap, about the
  // 50 us of queue it allows.
  EXPECT_EQ(capped.delivered(), 30000u);
  EXPECT_EQ(whole.delivered(), 30000u);
  const uint64_t q_capped = capped.net().mean_queue_ns(0, 1), q_whole = whole.net().mean_queue_ns(0, 1);
  EXPECT_GT(q_whole, 2 * kMs) << "queue without the cap";
  EXPECT_LT(q_capped, 200 * kUsNs) << "queue with the cap";
  EXPECT_GT(capped.counters().delay_cuts, 0u);
  EXPECT_EQ(whole.counters().delay_cuts, 0u);
  // ...and the stream ends sooner: repairs no longer wait behind the queue, nor the window
  // for them.
  EXPECT_LT(capped.now(), whole.now());
}

INSTANTIATE_TEST_SUITE_P(Seeds, DelayCapStream, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace imago::rel
