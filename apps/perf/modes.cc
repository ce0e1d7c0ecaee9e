// SPDX-License-Identifier: BSD-3-Clause
// The table of perf modes (testpmd's fwd_engines[]): a mode joins by adding its entry here.
#include <rte_lcore.h>

#include "apps/perf/perf.h"

namespace imago::perf {

extern const Mode kRawMode;
extern const Mode kRawPingPongMode;
extern const Mode kStreamMode;
extern const Mode kPingPongMode;

const Mode* modes() {
  static const Mode table[] = {kRawMode, kRawPingPongMode, kStreamMode, kPingPongMode, Mode{}};
  return table;
}

const Mode* find_mode(const std::string& name) {
  for (const Mode* m = modes(); m->name; ++m) {
    if (name == m->name) return m;
  }
  return nullptr;
}

size_t max_frame_bytes(const Options& o) {
  const Mode* m = find_mode(o.mode);
  size_t hdr = dp::encap_header_len(o.encap.kind);
  return m && m->message_is_frame ? hdr + o.size : o.mtu + sizeof(dp::EthHdr);
}

void pick_lcores(const Context& ctx, unsigned& tx_lcore, unsigned& rx_lcore) {
  // With three lcores or more the main lcore only runs control work (stats, completion) and
  // sleeps; with two, the receiver shares it; with one, everything does.
  unsigned main = rte_get_main_lcore();
  unsigned w1 = rte_get_next_lcore(-1, 1, 0);
  unsigned w2 = w1 < RTE_MAX_LCORE ? rte_get_next_lcore(w1, 1, 0) : RTE_MAX_LCORE;
  tx_lcore = w1 < RTE_MAX_LCORE ? w1 : main;
  rx_lcore = w2 < RTE_MAX_LCORE ? w2 : (ctx.keep_main_free ? tx_lcore : main);
}

unsigned single_lcore(const Context& ctx) {
  unsigned w1 = rte_get_next_lcore(-1, 1, 0);
  return ctx.keep_main_free && w1 < RTE_MAX_LCORE ? w1 : rte_get_main_lcore();
}

}  // namespace imago::perf
