// SPDX-License-Identifier: BSD-3-Clause
// The engine -> application hand-off: descriptors by tier, rings in bursts, bulk release.
#include "api/handoff.h"
#include "api/tiers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "tests/eal/eal_env.h"

namespace imago::test {
namespace {

struct HandoffFixture : testing::Test {
  void SetUp() override {
    // The tiers as an endpoint sees them: the three pools of a shared table, one slot.
    shm = std::make_unique<api::ShmRoot>();
    shm->pool_max = 512;
    shm->msg_pool = pool("msgs", 255, 512);
    shm->frame_pool = pool("frames", 255, api::kFrameClass);
    shm->big_pool = pool("big", 15, 8192);
    for (rte_mempool* mp : {shm->msg_pool, shm->frame_pool, shm->big_pool})
      rte_mempool_mem_iter(mp, [](rte_mempool*, void* arg, rte_mempool_memhdr* m, unsigned) {
        auto* root = static_cast<api::ShmRoot*>(arg);
        const auto lo = reinterpret_cast<uintptr_t>(m->addr);
        root->pool_mem[root->n_pool_mem++] = {lo, lo + m->len};
      }, shm.get());
    slot = std::make_unique<api::EndpointSlot>();
    slot->peer = 7;
    ring = api::handoff_create(unique_name("ring").c_str(), 512, SOCKET_ID_ANY);
    ASSERT_NE(ring, nullptr);
  }
  void TearDown() override {
    rte_ring_free(ring);
    for (rte_mempool* mp : {shm->msg_pool, shm->frame_pool, shm->big_pool}) rte_mempool_free(mp);
  }
  rte_mempool* pool(const char* what, unsigned n, unsigned bytes) {
    rte_mempool* mp = rte_mempool_create(unique_name(what).c_str(), n, bytes + api::kHeadroom, 0, 0, nullptr,
                                         nullptr, nullptr, nullptr, SOCKET_ID_ANY, 0);
    EXPECT_NE(mp, nullptr);
    return mp;
  }
  unsigned in_use() const {
    return rte_mempool_in_use_count(shm->msg_pool) + rte_mempool_in_use_count(shm->frame_pool) +
           rte_mempool_in_use_count(shm->big_pool);
  }
  std::vector<uint8_t> bytes(uint32_t len, uint8_t seed) {
    std::vector<uint8_t> v(len);
    for (uint32_t i = 0; i < len; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
    return v;
  }
  api::TierSide side() { return {shm.get(), slot.get(), nullptr}; }

  ScopedPool mbufs{1023, 9000};
  std::unique_ptr<api::ShmRoot> shm;
  std::unique_ptr<api::EndpointSlot> slot;
  rte_ring* ring = nullptr;
};

TEST_F(HandoffFixture, EachReceivedSizeTakesItsTierAndReadsBackIntact) {
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
    const auto* at = c.len == 5000 ? rte_pktmbuf_mtod(mb, const uint8_t*) : src.data();
    imago_msg m{};
    ASSERT_EQ(api::describe_received(side(), 7, {at, c.len}, mb, 512, m), 0) << c.len;
    // Expect: the tier the size calls for, and the same bytes through imago_msg_data().
    EXPECT_EQ(m.tier, c.tier) << c.len;
    EXPECT_EQ(m.len, c.len);
    EXPECT_EQ(m.src, 7u);
    EXPECT_EQ(m.flags, 0u);
    EXPECT_EQ(std::memcmp(imago_msg_data(&m), src.data(), c.len), 0) << c.len;
    // Expect: released once; a second release of a copy is refused.
    imago_msg copy = m;
    EXPECT_EQ(api::release_received(side(), &m, 1), 0u);
    EXPECT_EQ(api::release_received(side(), &copy, 1), c.tier == IMAGO_TIER_INLINE ? 0u : 1u);
  }
  // Expect: every pool buffer back, and the mbuf's extra reference dropped.
  EXPECT_EQ(in_use(), 0u);
  EXPECT_EQ(rte_mbuf_refcnt_read(mb), 1);
  rte_pktmbuf_free(mb);
  EXPECT_EQ(mbufs.in_use(), 0u);
}

TEST_F(HandoffFixture, ReceivingRefusesWhatItCannotHold) {
  imago_msg m{};
  auto big = bytes(9000, 1);
  // Do / Expect: too big for every pool and not in a frame: -EMSGSIZE.
  EXPECT_EQ(api::describe_received(side(), 1, {big.data(), 9000}, nullptr, 512, m), -EMSGSIZE);
  // Do / Expect: bytes outside the frame given are copied, never lent.
  rte_mbuf* mb = rte_pktmbuf_alloc(mbufs.get());
  ASSERT_EQ(api::describe_received(side(), 1, {big.data(), 4000}, mb, 512, m), 0);
  EXPECT_EQ(m.tier, IMAGO_TIER_POOL);
  EXPECT_EQ(rte_mbuf_refcnt_read(mb), 1);
  EXPECT_EQ(api::release_received(side(), &m, 1), 0u);
  rte_pktmbuf_free(mb);
  // Do / Expect: an empty pool is -ENOBUFS, not a crash.
  std::vector<void*> all(255);
  ASSERT_EQ(rte_mempool_get_bulk(shm->msg_pool, all.data(), 255), 0);
  EXPECT_EQ(api::describe_received(side(), 1, {big.data(), 100}, nullptr, 512, m), -ENOBUFS);
  rte_mempool_put_bulk(shm->msg_pool, all.data(), 255);
  EXPECT_EQ(in_use(), 0u);
}

TEST_F(HandoffFixture, SendDescriptorsAreCheckedBeforeTheEngineReadsThem) {
  // Do: a copy (pool tier) and a zero-copy send, as the application describes them.
  auto data = bytes(300, 5);
  imago_msg copy{}, zc{};
  ASSERT_EQ(api::describe_send_copy(side(), 7, data.data(), 300, 0, copy), 0);
  int err = 0;
  void* buf = api::alloc_send_buffer(side(), 300, &err);
  ASSERT_NE(buf, nullptr);
  std::memcpy(buf, data.data(), 300);
  ASSERT_EQ(api::describe_send_zc(side(), buf, 300, 0, zc), 0);
  // Expect: the engine reads both, intact; zero-copy is flagged for the tier counters.
  for (const imago_msg* d : {&copy, &zc}) {
    auto b = api::send_bytes(*slot, *d);
    ASSERT_EQ(b.size(), 300u);
    EXPECT_EQ(std::memcmp(b.data(), data.data(), 300), 0);
  }
  EXPECT_EQ(zc.flags & IMAGO_MSG_F_ZERO_COPY, IMAGO_MSG_F_ZERO_COPY);
  EXPECT_EQ(copy.flags & IMAGO_MSG_F_ZERO_COPY, 0u);
  // Expect: a forged descriptor (other owner, bad length, bad tier) is refused.
  imago_msg bad = copy;
  bad.u.ext.owner = zc.u.ext.owner;
  EXPECT_TRUE(api::send_bytes(*slot, bad).empty());
  bad = copy;
  bad.len = 100000;
  EXPECT_TRUE(api::send_bytes(*slot, bad).empty());
  bad = copy;
  bad.tier = IMAGO_TIER_MBUF;
  EXPECT_TRUE(api::send_bytes(*slot, bad).empty());
  // Expect: a sent buffer cannot be freed or sent again by the application.
  EXPECT_EQ(api::free_send_buffer(side(), buf), -EINVAL);
  imago_msg again{};
  EXPECT_EQ(api::describe_send_zc(side(), buf, 300, 0, again), -EINVAL);
  // Do: the engine is done with both. Expect: every buffer back; they are stale after.
  api::release_sent(side(), copy);
  api::release_sent(side(), zc);
  EXPECT_TRUE(api::send_bytes(*slot, copy).empty());
  EXPECT_EQ(in_use(), 0u);
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
