// SPDX-License-Identifier: BSD-3-Clause
// The pool of a net_af_xdp port against the UMEM DPDK 22.11's PMD makes of it (xdp_umem.h):
// without hugepages (this suite's EAL) a pool laid out the usual way has mbufs past the
// UMEM's end, each a fill-ring slot lost in the kernel; packed, it has none; fenced, none of
// those is ever handed out.
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <cstring>
#include <vector>

#include "dataplane/port.h"
#include "dataplane/xdp_umem.h"
#include "tests/eal/eal_env.h"

namespace imago::dp {
namespace {

// imago-perf's receiver over net_af_xdp: 7584 mbufs for 1514-byte frames.
constexpr unsigned kMbufs = 7584;

unsigned outside(rte_mempool* mp) {
  unsigned n = 0;
  rte_mempool_obj_iter(
      mp, [](rte_mempool* m, void* count, void* obj, unsigned) { *static_cast<unsigned*>(count) += !in_xdp_umem(m, obj); },
      &n);
  return n;
}

TEST(XdpUmemTest, WithoutHugepagesAPoolWithGapsHasMbufsPastTheUmemAndFencingKeepsThemOut) {
  ASSERT_TRUE(xdp_pool_packed()) << "this suite's EAL runs without hugepages";
  test::ScopedPool pool(kMbufs, mbuf_room_for(1514));
  ASSERT_NE(pool.get(), nullptr);
  const unsigned bad = outside(pool.get());
  EXPECT_GT(bad, kMbufs / 4) << "one mbuf per 4 KiB page: the UMEM covers little more than half";

  EXPECT_EQ(fence_outside_xdp_umem(pool.get()), bad);
  std::vector<rte_mbuf*> all(kMbufs - bad);
  ASSERT_EQ(rte_pktmbuf_alloc_bulk(pool.get(), all.data(), static_cast<unsigned>(all.size())), 0);
  for (rte_mbuf* m : all) EXPECT_TRUE(in_xdp_umem(pool.get(), m));
  EXPECT_EQ(rte_pktmbuf_alloc(pool.get()), nullptr) << "a fenced mbuf was handed out";
  rte_pktmbuf_free_bulk(all.data(), static_cast<unsigned>(all.size()));
}

TEST(XdpUmemTest, APackedPoolLiesWhollyInTheUmemAndItsMbufsCarryFrames) {
  test::ScopedPool pool(kMbufs, mbuf_room_for(1514), /*packed=*/true);
  ASSERT_NE(pool.get(), nullptr);
  EXPECT_EQ(outside(pool.get()), 0u);
  EXPECT_EQ(fence_outside_xdp_umem(pool.get()), 0u);
  EXPECT_EQ(rte_pktmbuf_data_room_size(pool.get()), mbuf_room_for(1514) + RTE_PKTMBUF_HEADROOM);

  std::vector<rte_mbuf*> all(kMbufs);
  ASSERT_EQ(rte_pktmbuf_alloc_bulk(pool.get(), all.data(), kMbufs), 0);
  for (rte_mbuf* m : all) {
    char* p = rte_pktmbuf_append(m, 1514);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0xA5, 1514);  // the whole frame is writable memory of the mbuf's own
    EXPECT_EQ(m->pool, pool.get());
    EXPECT_EQ(rte_mbuf_refcnt_read(m), 1);
  }
  rte_pktmbuf_free_bulk(all.data(), kMbufs);
  EXPECT_EQ(pool.in_use(), 0u);
}

}  // namespace
}  // namespace imago::dp
