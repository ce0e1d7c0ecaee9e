// SPDX-License-Identifier: BSD-3-Clause
// gtest main of the EAL suite: EAL comes up once with the apps' embedded default
// (--no-huge, --no-pci, unique --file-prefix, 2 lcores when the machine has them).
#include <gtest/gtest.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <atomic>

#include "dataplane/eal.h"
#include "dataplane/port.h"
#include "tests/eal/eal_env.h"

namespace imago::test {

std::string unique_name(const char* what) {
  static std::atomic<unsigned> n{0};
  return "t" + std::to_string(n.fetch_add(1, std::memory_order_relaxed)) + "_" + what;
}

ScopedPool::ScopedPool(unsigned n, uint16_t data_room, bool packed)
    : mp_(dp::create_mbuf_pool(unique_name("pool"), n, data_room, SOCKET_ID_ANY, packed)) {}
ScopedPool::~ScopedPool() { rte_mempool_free(mp_); }
unsigned ScopedPool::in_use() const { return rte_mempool_in_use_count(mp_); }

}  // namespace imago::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  imago::dp::EalDefaults d;
  d.memory_mb = 512;
  d.lcores = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? "0-1" : "0";
  if (imago::dp::eal_start(argv[0], imago::dp::default_eal_args(d, getpid())) < 0) {
    std::fprintf(stderr, "EAL did not start: the EAL suite cannot run\n");
    return 1;
  }
  imago::dp::eal_own_runtime_dir();  // its unique prefix: leave nothing behind
  int rc = RUN_ALL_TESTS();
  imago::dp::eal_stop();
  return rc;
}
