/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An application's return of a loaned buffer, written down in the shared slot before it
 * starts, so that a process killed half-way through can be finished by the primary's reclaim
 * instead of leaking the buffer (or, worse, leaving its mempool cache holding a stale
 * pointer: DPDK's cache put raises the cache's length before it writes the pointer).
 *
 * A return is: claim the loan (LoanTable::claim(), a compare-and-swap that marks the loan's
 * word), put the buffer (into the application's cache of its pool; onto the endpoint's
 * return ring, for the engine to free, if it is a received mbuf or the cache is full), then
 * finish the loan. The journal says which loan (stage
 * 1, before the claim), then where the put goes and the cache's length or the ring's head
 * before it (stage 2; stage 3 for a put straight to a pool's ring), and is cleared last.
 *
 * The reclaim, once the application is dead, settles a journal left behind. A loan not
 * claimed was never taken (the loans' reclaim frees it), or was finished, or was a stale or
 * forged descriptor's (refused): nothing to do. A claimed one is this return's: at stage 1
 * it is put; at stage 2 a put not begun is done, a cache put that raised the length is
 * completed (its pointer written), a ring put not published is undone and done. Only a put
 * straight to a pool's shared ring (the big pool has no caches) cannot be told: it is left,
 * and logged. The journal is the application's memory: the reclaim writes only into a cache
 * of the endpoint's own (EndpointSlot::app_caches), and leaves a return naming any other.
 *
 * One journal per slot: each endpoint is used by one application thread at a time.
 */
#pragma once

#include <rte_mempool.h>

#include <atomic>
#include <cstdint>

namespace imago::api {

struct ReturnJournal {
  std::atomic<uint32_t> stage{0};  ///< 0: no return under way; 1: loan named; 2: claimed, put starting; 3: put to a pool's ring
  uint32_t loan = 0;               ///< the loan's id
  uint32_t table = 0;              ///< 0: the slot's rx_loans, 1: its tx_loans
  uint32_t len = 0;                ///< stage 2: the cache's length, or the return ring's head, before the put
  void* obj = nullptr;             ///< the buffer (as the loan table records it)
  rte_mempool_cache* cache = nullptr;  ///< stage 2: where it goes (nullptr: the return ring)
};

}  // namespace imago::api
