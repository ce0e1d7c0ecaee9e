/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Message buffers of the pool and zero-copy tiers, and how either process frees them.
 *
 * Secondary processes share lcore ids with the primary and with each other, so a mempool's
 * per-lcore cache could be used by two processes at once: nothing here uses those. Instead
 * each owner (an endpoint's application side, a node's engine) has its own PoolCaches, so
 * buffers move to and from a pool's shared stack in bulk rather than one contended operation
 * each; a null PoolCaches goes straight to the ring (control path).
 *
 * A pool buffer keeps kHeadroom bytes in front of the message, where the engine writes the
 * endpoint tag when it sends the message, so the message is never copied to make room.
 */
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>

namespace imago::api {

inline constexpr uint32_t kHeadroom = 8;

/** A loan records which kind of buffer it is in bit 0 of the owner pointer (1: an mbuf). */
inline void* tag_mbuf(rte_mbuf* m) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(m) | 1); }
inline bool is_mbuf_tag(void* t) { return reinterpret_cast<uintptr_t>(t) & 1; }
inline rte_mbuf* untag_mbuf(void* t) {
  return reinterpret_cast<rte_mbuf*>(reinterpret_cast<uintptr_t>(t) & ~uintptr_t{1});
}

/**
 * One owner's caches in front of the two busy pools (the msg and frame tiers): DPDK's
 * user-owned rte_mempool_cache, one per pool, used by one thread at a time. They live in
 * shared memory (rte_zmalloc) and are reached from the shared table, so the primary can
 * flush the caches of an application that died, and "in use" can leave cached buffers out.
 */
struct PoolCaches {
  static constexpr uint32_t kSize = 32;    ///< the largest cache; flushed to the ring above 1.5 x
  static constexpr uint32_t kMinSize = 4;  ///< below this a pool gets no caches
  static constexpr uint32_t kOwners = 36;  ///< at most: every node's engine and every endpoint
  rte_mempool* pool[2] = {};
  rte_mempool_cache* cache[2] = {};

  /** @return the cache in front of @p mp, or nullptr (no cache for that pool). */
  rte_mempool_cache* of(const rte_mempool* mp) const {
    return mp == pool[0] ? cache[0] : mp == pool[1] ? cache[1] : nullptr;
  }
  /** @return true when @p c is one of these caches. */
  bool has(const rte_mempool_cache* c) const { return c != nullptr && (c == cache[0] || c == cache[1]); }
  /** @return buffers of @p mp sitting in this owner's cache (a racy read: statistics). */
  unsigned held(const rte_mempool* mp) const {
    const rte_mempool_cache* c = of(mp);
    return c ? c->len : 0;
  }
};

/**
 * @return the cache size for pool @p mp: caches together hold at most a quarter of a pool
 * (each up to 1.5 x its size, kOwners of them), so a pool never runs dry while its buffers
 * sit idle in the caches of owners that stopped; 0 (no caches) for a pool too small for it.
 */
uint32_t cache_size_for(const rte_mempool* mp);

/** Control path: caches for pools @p a and @p b, sized by cache_size_for() (a pool too
 *  small gets none). @return 0, or -ENOMEM (none made). */
int pool_caches_create(PoolCaches& pc, rte_mempool* a, rte_mempool* b);
/** Control path: detach the caches from @p pc first, then give back what they hold and free
 *  them: an owner killed half-way leaks its cached buffers rather than freeing any twice. */
void pool_caches_free(PoolCaches& pc);

/** @return a buffer object from @p mp (through @p pc's cache, if any), or nullptr when empty. */
inline void* buffer_get(rte_mempool* mp, const PoolCaches* pc) {
  void* o;
  return rte_mempool_generic_get(mp, &o, 1, pc ? pc->of(mp) : nullptr) == 0 ? o : nullptr;
}

inline void buffer_put(void* obj, const PoolCaches* pc) {
  rte_mempool* mp = rte_mempool_from_obj(obj);
  rte_mempool_generic_put(mp, &obj, 1, pc ? pc->of(mp) : nullptr);
}

/** Drop one reference to every segment of @p m, returning freed segments without a cache. */
inline void mbuf_put(rte_mbuf* m) {
  while (m != nullptr) {
    rte_mbuf* next = m->next;
    if (rte_mbuf* f = rte_pktmbuf_prefree_seg(m)) rte_mempool_generic_put(f->pool, reinterpret_cast<void**>(&f), 1, nullptr);
    m = next;
  }
}

/** Free what a loan held: an mbuf reference or a pool buffer (through @p pc, if any). */
inline void put_loaned(void* tagged, const PoolCaches* pc) {
  if (is_mbuf_tag(tagged)) {
    mbuf_put(untag_mbuf(tagged));
  } else {
    buffer_put(tagged, pc);
  }
}
/** Control path: put_loaned() straight to the pools (for LoanTable::reclaim()). */
inline void put_loaned_uncached(void* tagged) { put_loaned(tagged, nullptr); }

}  // namespace imago::api
