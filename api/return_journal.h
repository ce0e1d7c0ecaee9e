/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An application's return of a loaned buffer, written down in the shared slot before it
 * starts, so that a process killed half-way through can be finished by the primary's reclaim
 * instead of leaking the buffer (or, worse, leaving its mempool cache holding a stale
 * pointer: DPDK's cache put raises the cache's length before it writes the pointer).
 *
 * A return is: take the loan (LoanTable's compare-and-swap), then put the buffer into the
 * application's cache of its pool. The journal says which loan (stage 1, before the swap),
 * then which cache and its length before the put (stage 2), then is cleared. The reclaim,
 * once the application is dead, settles a journal left behind: a loan still recorded was
 * never taken (the table's reclaim frees it); taken but not put (stage 2, the cache's length
 * unchanged) is put; a put that raised the length is completed (its pointer written). A
 * buffer it cannot tell about is left, and logged: stage 1 with the loan gone (the swap lost,
 * for a stale or forged descriptor, or won in the few instructions before stage 2: freeing
 * could free another's buffer), or a put that goes straight to DPDK's rings (an mbuf
 * reference, a pool without caches).
 *
 * One journal per slot: each endpoint is used by one application thread at a time.
 */
#pragma once

#include <rte_mempool.h>

#include <atomic>
#include <cstdint>

namespace imago::api {

struct ReturnJournal {
  std::atomic<uint32_t> stage{0};  ///< 0: no return under way; 1: loan named; 2: taken, put starting
  uint32_t loan = 0;               ///< the loan's id
  uint32_t table = 0;              ///< 0: the slot's rx_loans, 1: its tx_loans
  uint32_t len = 0;                ///< stage 2: the cache's length before the put
  void* obj = nullptr;             ///< the buffer (as the loan table records it)
  rte_mempool_cache* cache = nullptr;  ///< stage 2: where it goes (nullptr: the pool's ring)
};

}  // namespace imago::api
