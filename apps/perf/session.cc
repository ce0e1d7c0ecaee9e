// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/session.h"


#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <unistd.h>

#include <cstdio>

#include "dataplane/eal.h"

namespace imago::perf {
namespace {

// net_memif tears its port down on DPDK's interrupt thread when the peer leaves, unmapping the
// rings under an lcore inside a burst (issue #9, item 14; dataplane/port.h, "Holding DPDK's
// interrupt thread"). Once a memif link is up, hold that thread while the lcores poll: a
// peer leaving then only stops the traffic. Asks without waiting (a later call sees it parked).
void hold_intr_thread_once_linked(const Context& ctx) {
  if (dp::intr_thread_held()) return;
  for (const NodePort* n : ctx.nodes) {
    dp::LinkStatus l;
    if (n->port.control_on_intr_thread() && n->port.link(l) == 0 && l.up) {
      dp::hold_intr_thread(0);
      return;
    }
  }
}

unsigned control_task(void* arg, uint64_t now) {
  auto* s = static_cast<Session*>(arg);
  hold_intr_thread_once_linked(s->ctx);
  if (s->mode->finished(s->ctx, now)) {
    s->ctx.runner.stop();
  } else if (now >= s->deadline_tsc) {
    s->timed_out = true;
    s->ctx.runner.stop();
  }
  return 0;
}

// On a terminal with no --stats-period, one line rewritten in place; otherwise a line each.
unsigned stats_task(void* arg, uint64_t now) {
  auto* s = static_cast<Session*>(arg);
  bool progress = s->ctx.opt.stats_period_s <= 0;
  std::printf(progress ? "\r%s\033[K" : "%s\n", s->mode->stats_line(s->ctx, now).c_str());
  std::fflush(stdout);
  return 0;
}

app::Json port_json(uint16_t port) {
  rte_eth_stats st{};
  rte_eth_stats_get(port, &st);
  app::Json j;
  j.num("ipackets", st.ipackets).num("opackets", st.opackets).num("imissed", st.imissed)
      .num("ierrors", st.ierrors).num("oerrors", st.oerrors).num("rx_nombuf", st.rx_nombuf);
  return j;
}

app::Json lcores_json(const Context& ctx) {
  app::Json j;
  for (unsigned l : ctx.runner.used_lcores()) {
    dp::LcoreStats st = ctx.runner.stats(l);
    uint64_t total = st.busy_cycles + st.idle_cycles;
    j.num("lcore" + std::to_string(l) + "_busy_pct",
          total ? 100.0 * static_cast<double>(st.busy_cycles) / static_cast<double>(total) : 0.0);
  }
  return j;
}

}  // namespace

int session_open(Session& s) {
  s.ctx.tsc_hz = rte_get_tsc_hz();
  s.ctx.tel.runner = &s.ctx.runner;
  if (dp::telemetry_register() < 0) std::fprintf(stderr, "imago-perf: telemetry commands not registered\n");
  dp::telemetry_set(s.ctx.tel);
  return open_topology(s.ctx, s.topo);
}

namespace {

// The run's state goes: telemetry stops reading its boards first.
void teardown_run(Session& s) {
  s.ctx.tel.boards.clear();
  dp::telemetry_set(s.ctx.tel);
  s.mode->teardown(s.ctx);
  s.prepared = false;
}

}  // namespace

int session_prepare(Session& s) {
  s.mode = find_mode(s.ctx.opt.mode);
  s.ctx.runner.clear();
  s.ctx.keep_main_free = s.interactive;
  if (int rc = apply_faults(s.ctx); rc < 0) return rc;
  if (int rc = s.mode->setup(s.ctx); rc < 0) return rc;
  s.prepared = true;
  s.stopped = false;
  // A run's RESULT counts its own frames: an interactive session's ports ran before.
  for (NodePort* n : s.ctx.nodes) rte_eth_stats_reset(n->port.id());
  // The control lcore: main in batch mode; in interactive mode the main lcore runs the
  // prompt, so completion checks ride on the first polling lcore.
  unsigned ctl = s.interactive ? s.ctx.runner.used_lcores().front() : rte_get_main_lcore();
  s.timed_out = false;
  s.deadline_tsc = tsc_after(rte_rdtsc(), s.ctx.opt.duration_s, s.ctx.tsc_hz);
  s.ctx.runner.add_periodic(ctl, "control", control_task, &s, 10'000);
  bool tty_progress = !s.interactive && isatty(STDOUT_FILENO) && s.ctx.opt.stats_period_s <= 0;
  if (!s.interactive && (s.ctx.opt.stats_period_s > 0 || tty_progress)) {
    double period = tty_progress ? 0.5 : s.ctx.opt.stats_period_s;  // at most 10 years: add_periodic() saturates
    s.ctx.runner.add_periodic(ctl, "stats", stats_task, &s, static_cast<uint64_t>(period * 1e6));
  }
  return 0;
}

int session_launch(Session& s) {
  if (s.interactive) return s.ctx.runner.start();
  std::printf("READY mode=%s shape=%s lcores=%u\n", s.mode->name,
              s.ctx.opt.pair ? "pair" : s.ctx.opt.role.c_str(), rte_lcore_count());
  std::fflush(stdout);
  int rc = s.ctx.runner.run();
  if (isatty(STDOUT_FILENO) && s.ctx.opt.stats_period_s <= 0) std::printf("\n");
  return rc;
}

void session_halt(Session& s) {
  s.ctx.runner.stop();
  s.ctx.runner.join();
  // No lcore polls now: between interactive runs a memif port may see its peer go and come.
  dp::release_intr_thread();
}

void session_report(Session& s, app::Json& result) {
  const Options& o = s.ctx.opt;
  if (s.timed_out) std::printf("Stopped after --duration %.1f s.\n", o.duration_s);
  if (dp::stop_requested()) std::printf("Stopped by a signal.\n");
  result.str("mode", s.mode->name).str("shape", o.pair ? "pair" : "process");
  result.str("role", o.pair ? "pair" : o.role);
  result.num("size", uint64_t{o.size}).num("burst", uint64_t{o.burst});
  s.mode->report(s.ctx, result);
  result.obj("port", port_json(s.ctx.nodes.back()->port.id()));
  for (NodePort* n : s.ctx.nodes) result.obj(std::string("port_") + n->name, port_json(n->port.id()));
  result.obj("lcores", lcores_json(s.ctx));
  result.boolean("timed_out", s.timed_out);
  // How the run ended, as --via api says it: a run cut short reports what it did, and its
  // `lost` counts what had not arrived yet.
  result.str("ended", s.timed_out             ? "duration"
                      : dp::stop_requested()  ? "signal"
                      : s.stopped             ? "stopped"
                      : s.ctx.peer_dead       ? "peer_dead"
                      : s.ctx.fell_silent     ? "idle"
                                              : "done");
  teardown_run(s);
}

std::string session_stats_line(Session& s) {
  return s.prepared ? s.mode->stats_line(s.ctx, rte_rdtsc()) : "";
}

void session_close(Session& s) {
  if (s.ctx.runner.active()) {  // the lcores stop before their ports do
    s.ctx.runner.stop();
    s.ctx.runner.join();
  }
  if (s.prepared) teardown_run(s);
  dp::telemetry_clear();
  close_topology(s.ctx, s.topo);
}

}  // namespace imago::perf
