// SPDX-License-Identifier: BSD-3-Clause
// The table of perf modes (testpmd's fwd_engines[]): a mode joins by adding its entry here.
#include <rte_lcore.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "apps/common/output_file.h"
#include "apps/perf/perf.h"

namespace imago::perf {

extern const Mode kRawMode;
extern const Mode kRawPingPongMode;
extern const Mode kStreamMode;
extern const Mode kPingPongMode;
extern const Mode kRateMode;
extern const Mode kEchoMode;

const Mode* modes() {
  static const Mode table[] = {kRawMode, kRawPingPongMode, kStreamMode, kPingPongMode, kRateMode, kEchoMode, Mode{}};
  return table;
}

const Mode* find_mode(const std::string& name) {
  for (const Mode* m = modes(); m->name; ++m) {
    if (name == m->name) return m;
  }
  return nullptr;
}

std::string rtt_percentiles(const app::Histogram& h) {
  char b[160];
  std::snprintf(b, sizeof b, "p50 %.2f us  p90 %.2f us  p99 %.2f us  p99.9 %.2f us  max %.2f us",
                h.percentile(50) / 1e3, h.percentile(90) / 1e3, h.percentile(99) / 1e3,
                h.percentile(99.9) / 1e3, h.max() / 1e3);
  return b;
}

app::Json rtt_json(const app::Histogram& h) {
  app::Json j;
  j.num("p50", h.percentile(50) / 1e3).num("p90", h.percentile(90) / 1e3)
      .num("p99", h.percentile(99) / 1e3).num("p999", h.percentile(99.9) / 1e3)
      .num("max", h.max() / 1e3).num("min", h.min() / 1e3).num("mean", h.mean() / 1e3);
  return j;
}

bool write_hist_csv(const Options& o, const app::Histogram& ns) {
  if (o.hist_csv.empty()) return true;
  const std::string why = app::write_output(o.hist_csv, [&](FILE* f) { std::fputs(ns.csv().c_str(), f); });
  if (!why.empty()) std::fprintf(stderr, "imago-perf: --hist-csv %s: not written: %s\n", o.hist_csv.c_str(), why.c_str());
  return why.empty();
}

int print_result(const app::Json& result, bool output_failed) {
  errno = 0;
  std::printf("RESULT %s\n", result.text().c_str());
  int e = errno;  // the line's own write, when it failed there
  if (std::fflush(stdout) != 0) e = errno;
  else if (!std::ferror(stdout)) return output_failed ? 1 : 0;
  std::fprintf(stderr, "imago-perf: standard output cannot be written (%s): the RESULT line is lost\n",
               e ? std::strerror(e) : "write error");
  return 1;
}

size_t max_frame_bytes(const Options& o) {
  const Mode* m = find_mode(o.mode);
  size_t hdr = dp::encap_header_len(o.encap.kind);
  return m && m->message_is_frame ? hdr + o.size + dp::encap_trailer_len(o.encap) : o.protocol.mtu + sizeof(dp::EthHdr);
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
