// SPDX-License-Identifier: BSD-3-Clause
// The engine -> application hand-off: descriptors by tier, rings in bursts, bulk release.
#include "api/handoff.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/eal/eal_env.h"

namespace imago::test {
namespace {

struct HandoffFixture : testing::Test {
  void SetUp() override {
    bufs = rte_mempool_create(unique_name("bufs").c_str(), 255, 2048, 0, 0, nullptr, nullptr,
                              nullptr, nullptr, SOCKET_ID_ANY, 0);
    ASSERT_NE(bufs, nullptr);
    ring = api::handoff_create(unique_name("ring").c_str(), 512, SOCKET_ID_ANY);
    ASSERT_NE(ring, nullptr);
  }
  void TearDown() override {
    rte_ring_free(ring);
    rte_mempool_free(bufs);
  }
  std::vector<uint8_t> bytes(uint32_t len, uint8_t seed) {
    std::vector<uint8_t> v(len);
    for (uint32_t i = 0; i < len; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
    return v;
  }

  ScopedPool mbufs{1023, 9000};
  rte_mempool* bufs = nullptr;
  rte_ring* ring = nullptr;
};

TEST_F(HandoffFixture, EachSizeTakesItsTierAndReadsBackIntact) {
  rte_mbuf* mb = rte_pktmbuf_alloc(mbufs.get());
  ASSERT_NE(mb, nullptr);
  auto big = bytes(5000, 3);
  std::memcpy(rte_pktmbuf_mtod(mb, void*), big.data(), big.size());
  struct Case {
    uint32_t len;
    uint8_t tier;
  } cases[] = {{1, IMAGO_TIER_INLINE}, {48, IMAGO_TIER_INLINE}, {49, IMAGO_TIER_POOL},
               {2048, IMAGO_TIER_POOL}, {5000, IMAGO_TIER_MBUF}};
  for (const Case& c : cases) {
    // Do: describe a message of c.len bytes (the big one from inside the mbuf).
    auto src = c.len == 5000 ? big : bytes(c.len, static_cast<uint8_t>(c.len));
    const void* at = c.len == 5000 ? rte_pktmbuf_mtod(mb, void*) : src.data();
    imago_msg m{};
    ASSERT_EQ(api::describe_message(m, 7, at, c.len, IMAGO_MSG_F_FASTPATH, bufs, mb), 0) << c.len;
    // Expect: the tier the size calls for, and the same bytes through imago_msg_data().
    EXPECT_EQ(m.tier, c.tier) << c.len;
    EXPECT_EQ(m.len, c.len);
    EXPECT_EQ(m.src, 7u);
    EXPECT_EQ(std::memcmp(imago_msg_data(&m), src.data(), c.len), 0) << c.len;
    api::release_messages(&m, 1);
  }
  // Expect: every pool buffer back, and the mbuf's extra reference dropped.
  EXPECT_EQ(rte_mempool_in_use_count(bufs), 0u);
  EXPECT_EQ(rte_mbuf_refcnt_read(mb), 1);
  rte_pktmbuf_free(mb);
  EXPECT_EQ(mbufs.in_use(), 0u);
}

TEST_F(HandoffFixture, RefusesWhatItCannotHold) {
  imago_msg m{};
  auto big = bytes(4000, 1);
  // Do / Expect: too big for the pool and no mbuf: -EMSGSIZE; bytes outside the mbuf: -EINVAL.
  EXPECT_EQ(api::describe_message(m, 1, big.data(), 4000, 0, bufs, nullptr), -EMSGSIZE);
  rte_mbuf* mb = rte_pktmbuf_alloc(mbufs.get());
  EXPECT_EQ(api::describe_message(m, 1, big.data(), 4000, 0, bufs, mb), -EINVAL);
  EXPECT_EQ(rte_mbuf_refcnt_read(mb), 1);
  rte_pktmbuf_free(mb);
  // Do / Expect: an empty pool is -ENOBUFS, not a crash.
  std::vector<void*> all(255);
  ASSERT_EQ(rte_mempool_get_bulk(bufs, all.data(), 255), 0);
  EXPECT_EQ(api::describe_message(m, 1, big.data(), 100, 0, bufs, nullptr), -ENOBUFS);
  rte_mempool_put_bulk(bufs, all.data(), 255);
}

TEST_F(HandoffFixture, RingKeepsOrderAndPushesBackWhenFull) {
  // Do: put 600 descriptors in bursts of 32 into a 512-slot ring nobody drains.
  std::vector<imago_msg> in(600);
  for (uint32_t i = 0; i < 600; ++i) {
    in[i] = imago_msg{};
    in[i].len = 4;
    std::memcpy(in[i].u.inline_data, &i, 4);
  }
  unsigned put = 0;
  for (unsigned at = 0; at < 600;) {
    unsigned n = api::handoff_put(ring, in.data() + at, std::min(32u, 600 - at));
    put += n;
    if (n == 0) break;
    at += n;
  }
  // Expect: a short count at the ring's capacity (the producer keeps the rest).
  EXPECT_EQ(put, rte_ring_get_capacity(ring));
  // Do: drain in bursts of 8. Expect: the same descriptors in the same order.
  imago_msg out[8];
  uint32_t next = 0;
  for (unsigned n; (n = api::handoff_get(ring, out, 8)) > 0;) {
    for (unsigned i = 0; i < n; ++i, ++next) {
      uint32_t v;
      std::memcpy(&v, imago_msg_data(&out[i]), 4);
      ASSERT_EQ(v, next);
    }
  }
  EXPECT_EQ(next, put);
}

}  // namespace
}  // namespace imago::test
