// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/xdp_umem.h"

#include <rte_eal.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace imago::dp {

bool xdp_pool_packed() { return rte_eal_has_hugepages() == 0; }

// As net_af_xdp's xdp_umem_configure(): the UMEM starts at the page of the first chunk and
// holds populated_size frames of the whole object size; the kernel refuses a frame that
// starts before it or ends past it.
bool in_xdp_umem(const rte_mempool* mp, const void* obj) {
  const rte_mempool_memhdr* first = STAILQ_FIRST(&mp->mem_list);
  if (first == nullptr) return false;
  const auto page = static_cast<uintptr_t>(getpagesize());
  const auto start = reinterpret_cast<uintptr_t>(first->addr);
  const uintptr_t base = start & ~(page - 1);
  const uint64_t frame = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, nullptr);
  const uint64_t size = uint64_t{mp->populated_size} * frame + (start - base);
  const uintptr_t head = reinterpret_cast<uintptr_t>(obj) - mp->header_size;  // the PMD's address
  return head >= base && head - base + frame <= size;
}

unsigned fence_outside_xdp_umem(rte_mempool* mp) {
  std::vector<void*> all(rte_mempool_avail_count(mp));
  if (all.empty() || rte_mempool_get_bulk(mp, all.data(), static_cast<unsigned>(all.size())) < 0) return 0;
  size_t kept = 0;
  for (void* obj : all)
    if (in_xdp_umem(mp, obj)) all[kept++] = obj;
  rte_mempool_put_bulk(mp, all.data(), static_cast<unsigned>(kept));
  return static_cast<unsigned>(all.size() - kept);  // the rest stay taken: never handed out
}

}  // namespace imago::dp
