// SPDX-License-Identifier: BSD-3-Clause
// The handlers of imago-perf's prompt. Control path only: they run on the main lcore while
// the pollers run on workers, and reach them only through the session (start/stop).
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "apps/perf/cli.h"
#include "apps/perf/options.h"
#include "apps/perf/session.h"
#include "dataplane/eal.h"

namespace imago::perf {
namespace {

Session* g_session = nullptr;

bool running() { return g_session->ctx.runner.active(); }

void show_peers() {
  for (const NodePort* n : g_session->ctx.nodes) {
    dp::LinkStatus l;
    n->port.link(l);
    dp::MacAddr m = n->port.mac();
    std::printf("node %s: port %u (%s) mac %02x:%02x:%02x:%02x:%02x:%02x link %s\n", n->name,
                n->port.id(), n->port.driver().c_str(), m.b[0], m.b[1], m.b[2], m.b[3], m.b[4],
                m.b[5], l.up ? "up" : "down");
  }
}

void show_stats() {
  const char* state = running() ? "running" : g_session->prepared ? "finished (stop prints RESULT)" : "idle";
  std::printf("run: %s, mode %s\n", state, g_session->ctx.opt.mode.c_str());
  if (std::string line = session_stats_line(*g_session); !line.empty()) std::printf("%s\n", line.c_str());
  for (const NodePort* n : g_session->ctx.nodes) {
    rte_eth_stats st{};
    rte_eth_stats_get(n->port.id(), &st);
    std::printf("port %u (node %s): rx %" PRIu64 " tx %" PRIu64 " missed %" PRIu64 " errors %" PRIu64 "\n",
                n->port.id(), n->name, st.ipackets, st.opackets, st.imissed, st.ierrors + st.oerrors);
  }
}

}  // namespace

void cli_attach(Session* s) { g_session = s; }

}  // namespace imago::perf

using imago::perf::g_session;

void perf_cli_start(void) {
  using namespace imago::perf;
  if (running() || g_session->prepared) {
    std::printf("a run exists: stop it first\n");
    return;
  }
  int rc = session_prepare(*g_session);
  if (rc == 0) rc = session_launch(*g_session);
  if (rc < 0) {
    std::printf("start failed: %s\n", strerror(-rc));
    if (g_session->prepared) session_halt(*g_session);
    return;
  }
  std::printf("started %s: %" PRIu64 " messages of %u bytes\n", g_session->ctx.opt.mode.c_str(),
              g_session->ctx.opt.msgs, g_session->ctx.opt.size);
}

void perf_cli_stop(void) {
  using namespace imago::perf;
  if (!g_session->prepared) return;
  g_session->stopped = running();  // RESULT's ended: stopped, not done
  session_halt(*g_session);
  imago::app::Json result;
  session_report(*g_session, result);
  std::printf("RESULT %s\n", result.text().c_str());
}

void perf_cli_wait(void) {
  using namespace imago::perf;
  // Every run is bounded by --msgs or --duration; SIGINT, SIGTERM or SIGHUP end the wait too.
  while (running() && !imago::dp::stop_requested()) rte_delay_us_sleep(1000);
  std::printf("run: %s\n", running() ? "interrupted" : "finished");
}

void perf_cli_show(const char* what) {
  using namespace imago::perf;
  if (std::strcmp(what, "peers") == 0) {
    show_peers();
  } else if (std::strcmp(what, "config") == 0) {
    for (const auto& [k, v] : option_values(g_session->ctx.opt)) std::printf("  %-18s %s\n", k.c_str(), v.c_str());
  } else {
    show_stats();
  }
}

void perf_cli_set(const char* key, const char* value) {
  using namespace imago::perf;
  if (running() || g_session->prepared) {
    std::printf("stop the run before changing settings\n");
    return;
  }
  std::string err;
  Options changed = g_session->ctx.opt;
  if (parse_options({std::string("--") + key, value}, changed, err) < 0) {
    std::printf("%s\n", err.c_str());
    return;
  }
  size_t room = rte_pktmbuf_data_room_size(g_session->ctx.nodes.front()->pool) - size_t{RTE_PKTMBUF_HEADROOM};
  const size_t frame = changed.size + imago::dp::encap_header_len(changed.encap.kind) +
                       imago::dp::encap_trailer_len(changed.encap);
  if (frame > room) {
    std::printf("--size %u does not fit this session's mbufs; restart with it\n", changed.size);
    return;
  }
  g_session->ctx.opt = changed;
  std::printf("%s = %s\n", key, value);
}

void perf_cli_clear_stats(void) {
  for (const auto* n : g_session->ctx.nodes) rte_eth_stats_reset(n->port.id());
  std::printf("port counters cleared\n");
}

void perf_cli_help(void) {
  std::printf(
      "  start                 begin a run with the current settings\n"
      "  stop                  end the run; print its summary and RESULT line\n"
      "  wait                  return when the run has finished\n"
      "  show stats            run state, the mode's counters, port counters\n"
      "  show peers            the nodes: port, driver, MAC, link\n"
      "  show config           every setting\n"
      "  set KEY VALUE         change a setting while stopped: size burst rate mode msgs loss\n"
      "                        burst-loss dup reorder corrupt delay-us seed fault-tx fault-rx\n"
      "                        duration ping-timeout-us (same meaning as the options)\n"
      "  clear stats           zero the port counters\n"
      "  quit                  stop any run and exit\n");
}
