/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The mbuf pool of a net_af_xdp port and the UMEM the PMD makes of it. DPDK 22.11's
 * net_af_xdp registers as UMEM the pages from the pool's first memory chunk on, for
 * populated_size objects back to back; an mbuf lying past that end goes to the kernel as an
 * invalid descriptor, which the kernel drops without a word: a fill-ring slot gone for good
 * (the port receives nothing once all 2048 are), or a frame never sent and its mbuf never
 * completed. A pool in several chunks, or with gaps (objects kept off page boundaries: one
 * 2.3 KiB mbuf per 4 KiB page without hugepages), has such mbufs. So the pool of a
 * net_af_xdp port is packed (no gaps) without hugepages, and whatever still lies outside is
 * fenced off before the port takes its first mbuf. Control path.
 */
#pragma once

#include <rte_mempool.h>

namespace imago::dp {

/** @return whether a net_af_xdp port's pool must be packed to lie in its UMEM: no hugepages. */
bool xdp_pool_packed();

/** @return whether net_af_xdp can hand the mbuf @p obj of @p mp to the kernel (in the UMEM). */
bool in_xdp_umem(const rte_mempool* mp, const void* obj);

/**
 * Take every free mbuf of @p mp that lies outside its UMEM out of circulation, for the pool's
 * life (call before the port's queues take mbufs). @return how many.
 */
unsigned fence_outside_xdp_umem(rte_mempool* mp);

}  // namespace imago::dp
