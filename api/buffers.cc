// SPDX-License-Identifier: BSD-3-Clause
// Control path of the buffer tiers: owners' caches, and "in use" with cached buffers left out.
#include "api/buffers.h"

#include <rte_malloc.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "api/shm.h"

namespace imago::api {

uint32_t cache_size_for(const rte_mempool* mp) {
  const uint32_t s = std::min(PoolCaches::kSize, mp->size / (6 * PoolCaches::kOwners));
  return s >= PoolCaches::kMinSize ? s : 0;
}

namespace {
rte_mempool_cache* cache_for(const rte_mempool* mp) {
  const uint32_t s = cache_size_for(mp);
  return s ? rte_mempool_cache_create(s, SOCKET_ID_ANY) : nullptr;
}
}  // namespace

int pool_caches_create(PoolCaches& pc, rte_mempool* a, rte_mempool* b) {
  rte_mempool_cache* ca = cache_for(a);
  rte_mempool_cache* cb = cache_for(b);
  if ((ca == nullptr && cache_size_for(a)) || (cb == nullptr && cache_size_for(b))) {
    rte_mempool_cache_free(ca);
    rte_mempool_cache_free(cb);
    return -ENOMEM;
  }
  pc.pool[0] = a;
  pc.pool[1] = b;
  pc.cache[0] = ca;
  pc.cache[1] = cb;
  return 0;
}

void pool_caches_free(PoolCaches& pc) {
  for (int i = 0; i < 2; ++i) {
    // Unhook before flushing: whoever finds the pointer null has nothing to flush.
    rte_mempool_cache* c = std::atomic_ref(pc.cache[i]).exchange(nullptr, std::memory_order_acq_rel);
    if (c == nullptr) continue;
    rte_mempool_cache_flush(c, pc.pool[i]);
    rte_mempool_cache_free(c);
  }
}

unsigned pool_in_use(const ShmRoot& shm, const rte_mempool* mp) {
  unsigned cached = 0;
  for (const PoolCaches& pc : shm.engine_caches) cached += pc.held(mp);
  for (const EndpointSlot& s : shm.slots) cached += s.app_caches.held(mp);
  const unsigned out = rte_mempool_in_use_count(mp);
  return out > cached ? out - cached : 0;
}

}  // namespace imago::api
