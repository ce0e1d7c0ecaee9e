// SPDX-License-Identifier: BSD-3-Clause
// The fault layer on real mbufs: what each knob does to frames, and that it never leaks one.
#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dataplane/fault.h"
#include "tests/eal/eal_env.h"

namespace imago::test {
namespace {

constexpr uint32_t kOffset = 18;  // bit flips land past the L2 headers
constexpr uint16_t kLen = 100;

struct ShimFixture : testing::Test {
  // Allocate @p n frames whose bytes are all their index.
  std::vector<rte_mbuf*> frames(unsigned n) {
    std::vector<rte_mbuf*> v(n);
    EXPECT_EQ(rte_pktmbuf_alloc_bulk(pool.get(), v.data(), n), 0);
    for (unsigned i = 0; i < n; ++i) {
      v[i]->data_len = v[i]->pkt_len = kLen;
      std::memset(rte_pktmbuf_mtod(v[i], void*), static_cast<int>(i), kLen);
    }
    return v;
  }
  // Take every ready frame out of the stage.
  std::vector<rte_mbuf*> drain() {
    std::vector<rte_mbuf*> out;
    rte_mbuf** head;
    while (uint16_t n = stage.ready(head)) {
      out.insert(out.end(), head, head + n);
      stage.consume(n);
    }
    return out;
  }
  static uint8_t first_byte(rte_mbuf* m) { return rte_pktmbuf_mtod(m, uint8_t*)[0]; }

  ScopedPool pool{4095};
  dp::FaultStage stage;
  uint64_t hz = rte_get_tsc_hz();
};

TEST_F(ShimFixture, DropEverythingFreesEveryFrame) {
  // Do: push 100 frames through loss=1.
  ASSERT_EQ(stage.init(dp::FaultConfig{.drop = 1}, 256, pool.get(), kOffset, hz), 0);
  auto in = frames(100);
  EXPECT_EQ(stage.push(in.data(), 100, 0), 100);
  // Expect: nothing comes out and no mbuf is left in use.
  EXPECT_TRUE(drain().empty());
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(stage.counters().model.dropped, 100u);
}

TEST_F(ShimFixture, DuplicateComesOutTwiceAsSeparateIdenticalFrames) {
  // Do: push 10 frames with dup=1.
  ASSERT_EQ(stage.init(dp::FaultConfig{.dup = 1}, 256, pool.get(), kOffset, hz), 0);
  auto in = frames(10);
  stage.push(in.data(), 10, 0);
  auto out = drain();
  // Expect: 20 frames, in pairs of equal content and different mbufs, in order.
  ASSERT_EQ(out.size(), 20u);
  for (unsigned i = 0; i < 10; ++i) {
    EXPECT_NE(out[2 * i], out[2 * i + 1]);
    EXPECT_EQ(first_byte(out[2 * i]), i);
    EXPECT_EQ(std::memcmp(rte_pktmbuf_mtod(out[2 * i], void*),
                          rte_pktmbuf_mtod(out[2 * i + 1], void*), kLen), 0);
  }
  rte_pktmbuf_free_bulk(out.data(), static_cast<unsigned>(out.size()));
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST_F(ShimFixture, CorruptFlipsExactlyOneBitPastTheHeaders) {
  // Do: push 50 frames with corrupt=1.
  ASSERT_EQ(stage.init(dp::FaultConfig{.corrupt = 1, .seed = 3}, 256, pool.get(), kOffset, hz), 0);
  auto in = frames(50);
  stage.push(in.data(), 50, 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 50u);
  // Expect: each frame differs from its original in exactly one bit, at or after kOffset.
  for (unsigned i = 0; i < 50; ++i) {
    const auto* p = rte_pktmbuf_mtod(out[i], const uint8_t*);
    int bits = 0;
    for (unsigned j = 0; j < kLen; ++j) {
      int diff = __builtin_popcount(p[j] ^ static_cast<uint8_t>(i));
      if (diff) {
        EXPECT_GE(j, kOffset);
      }
      bits += diff;
    }
    EXPECT_EQ(bits, 1) << "frame " << i;
  }
  rte_pktmbuf_free_bulk(out.data(), 50);
}

TEST_F(ShimFixture, DelayHoldsFramesUntilTheirTime) {
  // Do: push 5 frames with a 100 us delay at t=0.
  ASSERT_EQ(stage.init(dp::FaultConfig{.delay_us = 100}, 256, pool.get(), kOffset, hz), 0);
  auto in = frames(5);
  stage.push(in.data(), 5, 0);
  // Expect: none at 99 us, all five in order at 101 us.
  stage.release_due(hz * 99 / 1'000'000);
  EXPECT_TRUE(drain().empty());
  stage.release_due(hz * 101 / 1'000'000);
  auto out = drain();
  ASSERT_EQ(out.size(), 5u);
  for (unsigned i = 0; i < 5; ++i) EXPECT_EQ(first_byte(out[i]), i);
  rte_pktmbuf_free_bulk(out.data(), 5);
}

TEST_F(ShimFixture, ReorderedFramesAreOvertakenByLaterOnes) {
  // Do: push 40 frames at t=0 with reorder=0.5 (hold 50 us).
  ASSERT_EQ(stage.init(dp::FaultConfig{.reorder = 0.5, .reorder_us = 50, .seed = 9}, 256,
                       pool.get(), kOffset, hz), 0);
  auto in = frames(40);
  stage.push(in.data(), 40, 0);
  // Expect: the frames not held come out at once; the held ones only after 50 us, so
  // every frame appears exactly once but not in order.
  auto early = drain();
  stage.release_due(hz * 60 / 1'000'000);
  auto late = drain();
  EXPECT_EQ(late.size(), stage.counters().model.reordered);
  EXPECT_GT(late.size(), 0u);
  EXPECT_GT(early.size(), 0u);
  std::vector<int> seen(40, 0);
  for (auto* m : early) ++seen[first_byte(m)];
  for (auto* m : late) ++seen[first_byte(m)];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 40);
  EXPECT_LT(first_byte(late.front()), first_byte(early.back()));
  rte_pktmbuf_free_bulk(early.data(), static_cast<unsigned>(early.size()));
  rte_pktmbuf_free_bulk(late.data(), static_cast<unsigned>(late.size()));
}

TEST_F(ShimFixture, FullStageRefusesFramesInsteadOfDroppingThem) {
  // Do: push 100 frames into a stage with room for 16 and a long delay.
  ASSERT_EQ(stage.init(dp::FaultConfig{.delay_us = 1000}, 16, pool.get(), kOffset, hz), 0);
  auto in = frames(100);
  uint16_t taken = stage.push(in.data(), 100, 0);
  // Expect: a short count; the refused frames are still the caller's (not freed).
  EXPECT_LT(taken, 100);
  EXPECT_EQ(stage.held(), taken);
  EXPECT_EQ(pool.in_use(), 100u);
  rte_pktmbuf_free_bulk(in.data() + taken, 100u - taken);
  stage.fini();
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST_F(ShimFixture, SameSeedSameFate) {
  // Do: run the same 1000 frames through two stages with one seed.
  dp::FaultConfig cfg{.drop = 0.2, .dup = 0.1, .seed = 42};
  std::vector<uint8_t> firsts[2];
  for (auto& f : firsts) {
    dp::FaultStage s;
    ASSERT_EQ(s.init(cfg, 4096, pool.get(), kOffset, hz), 0);
    auto in = frames(1000);
    ASSERT_EQ(s.push(in.data(), 1000, 0), 1000);
    rte_mbuf** head;
    while (uint16_t n = s.ready(head)) {
      for (uint16_t i = 0; i < n; ++i) f.push_back(first_byte(head[i]));
      rte_pktmbuf_free_bulk(head, n);
      s.consume(n);
    }
  }
  // Expect: the same frames survive, duplicated the same way.
  EXPECT_EQ(firsts[0], firsts[1]);
  EXPECT_GT(firsts[0].size(), 800u);
}

}  // namespace
}  // namespace imago::test
