// SPDX-License-Identifier: BSD-3-Clause
// The table of perf modes (testpmd's fwd_engines[]): a mode joins by adding its entry here.
#include <rte_lcore.h>

#include "apps/perf/perf.h"

namespace imago::perf {

extern const Mode kRawMode;

const Mode* modes() {
  static const Mode table[] = {kRawMode, Mode{}};
  return table;
}

const Mode* find_mode(const std::string& name) {
  for (const Mode* m = modes(); m->name; ++m) {
    if (name == m->name) return m;
  }
  return nullptr;
}

void pick_lcores(unsigned& tx_lcore, unsigned& rx_lcore) {
  rx_lcore = rte_get_main_lcore();
  unsigned worker = rte_get_next_lcore(-1, 1, 0);
  tx_lcore = worker < RTE_MAX_LCORE ? worker : rx_lcore;
}

}  // namespace imago::perf
