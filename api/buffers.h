/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Message buffers of the pool and zero-copy tiers, and how either process frees them.
 *
 * Secondary processes share lcore ids with the primary and with each other, so a mempool's
 * per-lcore cache could be used by two processes at once: everything here bypasses the
 * caches (a NULL cache goes straight to the mempool's own MP/MC-safe ring).
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

/** @return a buffer object from @p mp, or nullptr when it is empty. */
inline void* buffer_get(rte_mempool* mp) {
  void* o;
  return rte_mempool_generic_get(mp, &o, 1, nullptr) == 0 ? o : nullptr;
}

inline void buffer_put(void* obj) { rte_mempool_generic_put(rte_mempool_from_obj(obj), &obj, 1, nullptr); }

/** Drop one reference to every segment of @p m, returning freed segments without a cache. */
inline void mbuf_put(rte_mbuf* m) {
  while (m != nullptr) {
    rte_mbuf* next = m->next;
    if (rte_mbuf* f = rte_pktmbuf_prefree_seg(m)) rte_mempool_generic_put(f->pool, reinterpret_cast<void**>(&f), 1, nullptr);
    m = next;
  }
}

/** Free what a loan held: an mbuf reference or a pool buffer. */
inline void put_loaned(void* tagged) {
  if (is_mbuf_tag(tagged)) {
    mbuf_put(untag_mbuf(tagged));
  } else {
    buffer_put(tagged);
  }
}

}  // namespace imago::api
