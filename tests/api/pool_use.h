/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What is out of every pool imago owns (the three message pools and the ports' mbuf pools),
 * for API tests that check buffers come back: read from the shared root in this process.
 */
#pragma once

#include <rte_mempool.h>
#include <rte_memzone.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "api/shm.h"

namespace imago::test {

inline const api::ShmRoot* shm() {
  const rte_memzone* mz = rte_memzone_lookup(api::kShmName);
  return mz ? static_cast<const api::ShmRoot*>(mz->addr) : nullptr;
}

struct PoolUse {
  unsigned msg = 0, frame = 0, big = 0, mbuf = 0;
  bool operator==(const PoolUse&) const = default;
};

inline PoolUse pool_use() {
  PoolUse u;
  // Out of the pools and out of every owner's cache (engines', applications').
  u.msg = api::pool_in_use(*shm(), shm()->msg_pool);
  u.frame = api::pool_in_use(*shm(), shm()->frame_pool);
  u.big = api::pool_in_use(*shm(), shm()->big_pool);
  rte_mempool_walk(
      [](rte_mempool* mp, void* arg) {
        if (std::strncmp(mp->name, "imago_mbuf_", 11) == 0)
          *static_cast<unsigned*>(arg) += rte_mempool_in_use_count(mp);
      },
      &u.mbuf);
  return u;
}

inline std::string show(const PoolUse& u) {
  return "msg=" + std::to_string(u.msg) + " frame=" + std::to_string(u.frame) +
         " big=" + std::to_string(u.big) + " mbuf=" + std::to_string(u.mbuf);
}

/** @return the use once frames in flight are left out: the least of 20 reads 1 ms apart.
 *  Frames in flight (heartbeats, ACKs) only add to it, for microseconds (more on a loaded
 *  machine); a baseline that caught one would never be settled back to. */
inline PoolUse quiet_use() {
  auto total = [](const PoolUse& u) { return u.msg + u.frame + u.big + u.mbuf; };
  PoolUse least = pool_use();
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (const PoolUse u = pool_use(); total(u) < total(least)) least = u;
  }
  return least;
}

/** Frames in flight (heartbeats, ACKs) hold mbufs for microseconds: wait for @p want. */
inline bool settles_to(const PoolUse& want,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pool_use() == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pool_use() == want;
}

}  // namespace imago::test
