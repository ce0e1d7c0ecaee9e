/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Shared set-up of the EAL suite: EAL starts once per process (it cannot restart), with the
 * same embedded defaults the apps use, and tests get unique names for pools and rings.
 */
#pragma once

#include <rte_mempool.h>

#include <string>

namespace imago::test {

/** @return a name unique in this process, e.g. "t3_pool". */
std::string unique_name(const char* what);

/** A packet pool of @p n mbufs freed at scope exit. */
class ScopedPool {
 public:
  explicit ScopedPool(unsigned n, uint16_t data_room = 2048, bool packed = false);
  ~ScopedPool();
  rte_mempool* get() const { return mp_; }
  /** @return mbufs currently taken from the pool (not counting the per-lcore caches). */
  unsigned in_use() const;

 private:
  rte_mempool* mp_;
};

}  // namespace imago::test
