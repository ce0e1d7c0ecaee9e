// SPDX-License-Identifier: BSD-3-Clause
// imago-perf: the testpmd-style benchmark app. Thin: parse, start EAL and lcores, print.
#include <rte_eal.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "apps/common/signals.h"
#include "apps/perf/cli.h"
#include "apps/perf/options.h"
#include "apps/perf/session.h"
#include "apps/perf/via_api.h"
#include "dataplane/eal.h"

namespace imago::perf {
namespace {

dp::EalDefaults eal_defaults(const Options& o) {
  dp::EalDefaults d;
  d.vdevs = o.vdevs;
  if (!o.iface.empty()) d.vdevs.push_back(dp::iface_vdev(o.pmd, o.iface));
  if (!o.iface_b.empty()) d.vdevs.push_back(dp::iface_vdev(o.pmd, o.iface_b, 1));
  d.lcores = o.lcores;
  d.telemetry = true;  // /imago/... commands (dataplane/telemetry.h) on imago-perf's own prefix
  // Two single-node processes must not both pin their main lcore to core 0.
  if (d.lcores.empty() && !o.role.empty()) {
    bool second_core = o.role == "rx" && sysconf(_SC_NPROCESSORS_ONLN) > 1;
    d.lcores = std::to_string(second_core ? 1 : 0);  // not a ?: of literals: GCC 12 bug 105651
  }
  return d;
}

// Batch mode: one run, its summary and the RESULT line.
int run_batch(Session& s) {
  app::Json result;
  int rc = session_prepare(s);
  if (rc == 0) rc = session_launch(s);
  if (rc == 0) session_report(s, result);
  session_close(s);
  dp::eal_stop();
  if (rc < 0) {
    std::fprintf(stderr, "imago-perf: failed: %s\n", strerror(-rc));
    return 1;
  }
  return print_result(result, s.ctx.output_failed);
}

// The option of @p o that only builds EAL args of our own (eal_defaults()), if one was given.
const char* eal_made_option(const Options& o) {
  if (!o.iface.empty()) return "iface";
  if (!o.iface_b.empty()) return "iface-b";
  if (!o.vdevs.empty()) return "vdev";
  return o.lcores.empty() ? nullptr : "lcores";
}

}  // namespace
}  // namespace imago::perf

int main(int argc, char** argv) {
  using namespace imago;
  dp::ArgSplit args = dp::split_args(argc, argv);
  static perf::Session s;  // static: the prompt's handlers reach it; too big for the stack
  std::string err;
  int rc = perf::parse_options(args.app, s.ctx.opt, err);
  if (rc == 1) {
    perf::print_usage(args.prog.c_str());
    return 0;
  }
  if (rc < 0) {
    std::fprintf(stderr, "imago-perf: %s\n", err.c_str());
    return 2;
  }
  if (s.ctx.opt.via_api) {
    if (std::string why = perf::via_api_refusal(s.ctx.opt, args); !why.empty()) {
      std::fprintf(stderr, "imago-perf: %s\n", why.c_str());
      return 2;
    }
    return perf::run_via_api(s.ctx.opt, args);
  }
  s.interactive = s.ctx.opt.interactive;
  s.ctx.explicit_eal = args.explicit_eal;
  if (const char* o = perf::eal_made_option(s.ctx.opt); args.explicit_eal && o != nullptr) {
    std::fprintf(stderr, "imago-perf: --%s builds the EAL args, and EAL args were given: say it in them "
                 "(-l LIST, --vdev=net_af_packet0,iface=NAME before --)\n", o);
    return 2;
  }
  auto eal = args.explicit_eal ? args.eal : dp::default_eal_args(perf::eal_defaults(s.ctx.opt), getpid());
  // Before EAL: a signal while it starts (a few hundred ms) stops the run once it begins,
  // which then reports and cleans up, instead of killing the process half set up.
  app::install_stop_signals();
  if (dp::eal_start(args.prog, eal) < 0) return 1;
  // Our unique prefix, or one only a primary holds: leave nothing behind.
  if (!args.explicit_eal || rte_eal_process_type() == RTE_PROC_PRIMARY) dp::eal_own_runtime_dir();
  if (s.interactive && rte_lcore_count() < 2) {
    std::fprintf(stderr, "imago-perf: -i needs 2 lcores: the prompt keeps the main one\n");
    dp::eal_stop();
    return 2;
  }
  if (int orc = perf::session_open(s); orc < 0) {
    perf::session_close(s);
    dp::eal_stop();
    std::fprintf(stderr, "imago-perf: failed: %s\n", strerror(-orc));
    return 1;
  }
  if (!s.interactive) return perf::run_batch(s);
  perf::cli_attach(&s);
  // cmdline writes to fd 1 directly: flush our lines before it writes its prompt.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  perf_cli_prompt();
  perf::session_close(s);
  dp::eal_stop();
  return s.ctx.output_failed ? 1 : 0;  // a --hist-csv or --arrivals of a run not written (said)
}
