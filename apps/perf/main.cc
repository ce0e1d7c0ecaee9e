// SPDX-License-Identifier: BSD-3-Clause
// imago-perf: the testpmd-style benchmark app. Thin: parse, start EAL and lcores, print.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "apps/perf/nodes.h"
#include "apps/perf/options.h"
#include "dataplane/eal.h"

namespace imago::perf {
namespace {

struct Control {
  Context* ctx;
  const Mode* mode;
  uint64_t deadline_tsc;
  bool timed_out = false;
};

unsigned control_task(void* arg, uint64_t now) {
  auto* c = static_cast<Control*>(arg);
  if (c->mode->finished(*c->ctx, now)) {
    c->ctx->runner.stop();
  } else if (now >= c->deadline_tsc) {
    c->timed_out = true;
    c->ctx->runner.stop();
  }
  return 0;
}

unsigned stats_task(void* arg, uint64_t now) {
  auto* c = static_cast<Control*>(arg);
  std::printf("%s\n", c->mode->stats_line(*c->ctx, now).c_str());
  std::fflush(stdout);
  return 0;
}

dp::EalDefaults eal_defaults(const Options& o) {
  dp::EalDefaults d;
  d.vdevs = o.vdevs;
  if (!o.iface.empty()) d.vdevs.push_back("net_af_packet0,iface=" + o.iface);
  d.lcores = o.lcores;
  // Two single-node processes must not both pin their main lcore to core 0.
  if (d.lcores.empty() && !o.role.empty()) {
    d.lcores = o.role == "rx" && sysconf(_SC_NPROCESSORS_ONLN) > 1 ? "1" : "0";
  }
  return d;
}

app::Json port_json(uint16_t port) {
  rte_eth_stats s{};
  rte_eth_stats_get(port, &s);
  app::Json j;
  j.num("ipackets", s.ipackets).num("opackets", s.opackets).num("imissed", s.imissed)
      .num("ierrors", s.ierrors).num("oerrors", s.oerrors).num("rx_nombuf", s.rx_nombuf);
  return j;
}

app::Json lcores_json(const Context& ctx) {
  app::Json j;
  for (unsigned l : ctx.runner.used_lcores()) {
    dp::LcoreStats s = ctx.runner.stats(l);
    uint64_t total = s.busy_cycles + s.idle_cycles;
    j.num("lcore" + std::to_string(l) + "_busy_pct",
          total ? 100.0 * static_cast<double>(s.busy_cycles) / static_cast<double>(total) : 0.0);
  }
  return j;
}

int run(Context& ctx, const Mode* mode, app::Json& result) {
  Control c{&ctx, mode, rte_rdtsc() + static_cast<uint64_t>(ctx.opt.duration_s * ctx.tsc_hz)};
  if (int rc = mode->setup(ctx); rc < 0) return rc;
  unsigned main = rte_get_main_lcore();
  ctx.runner.add_periodic(main, "control", control_task, &c, 10'000);
  if (ctx.opt.stats_period_s > 0) {
    ctx.runner.add_periodic(main, "stats", stats_task, &c,
                            static_cast<uint64_t>(ctx.opt.stats_period_s * 1e6));
  }
  std::printf("READY mode=%s shape=%s lcores=%u\n", mode->name,
              ctx.opt.pair ? "pair" : ctx.opt.role.c_str(), rte_lcore_count());
  std::fflush(stdout);
  int rc = ctx.runner.run();
  if (c.timed_out) std::printf("Stopped after --duration %.1f s.\n", ctx.opt.duration_s);
  if (dp::stop_requested()) std::printf("Stopped by a signal.\n");
  result.str("mode", mode->name).str("shape", ctx.opt.pair ? "pair" : "process");
  result.str("role", ctx.opt.pair ? "pair" : ctx.opt.role);
  result.num("size", uint64_t{ctx.opt.size}).num("burst", uint64_t{ctx.opt.burst});
  mode->report(ctx, result);
  result.obj("port", port_json(ctx.nodes.back()->port.id()));
  for (Node* n : ctx.nodes) result.obj(std::string("port_") + n->name, port_json(n->port.id()));
  result.obj("lcores", lcores_json(ctx));
  result.boolean("timed_out", c.timed_out);
  return rc;
}

}  // namespace
}  // namespace imago::perf

int main(int argc, char** argv) {
  using namespace imago;
  dp::ArgSplit args = dp::split_args(argc, argv);
  perf::Context ctx;
  std::string err;
  int rc = perf::parse_options(args.app, ctx.opt, err);
  if (rc == 1) {
    perf::print_usage(args.prog.c_str());
    return 0;
  }
  if (rc < 0) {
    std::fprintf(stderr, "imago-perf: %s\n", err.c_str());
    return 2;
  }
  auto eal = args.explicit_eal ? args.eal : dp::default_eal_args(perf::eal_defaults(ctx.opt), getpid());
  if (dp::eal_start(args.prog, eal) < 0) return 1;
  dp::install_stop_signals();
  ctx.tsc_hz = rte_get_tsc_hz();
  perf::Topology topo;
  app::Json result;
  rc = perf::open_topology(ctx, topo);
  const perf::Mode* mode = perf::find_mode(ctx.opt.mode);
  if (rc == 0) rc = perf::run(ctx, mode, result);
  if (ctx.mode_state) mode->teardown(ctx);
  perf::close_topology(ctx, topo);
  dp::eal_stop();
  if (rc < 0) {
    std::fprintf(stderr, "imago-perf: failed: %s\n", strerror(-rc));
    return 1;
  }
  std::printf("RESULT %s\n", result.text().c_str());
  return 0;
}
