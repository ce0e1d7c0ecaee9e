// SPDX-License-Identifier: BSD-3-Clause
// imagod: the imago primary process. It owns EAL, the ports, the nodes and their engine
// lcore; applications attach as DPDK secondary processes (imago_attach_secondary()) and open
// endpoints over rte_mp. It reclaims the endpoints of applications that exit or are killed,
// prints counters periodically, and stops cleanly on SIGINT, SIGTERM or SIGHUP.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "api/engine_watch.h"
#include "api/runtime.h"
#include "apps/common/signals.h"
#include "dataplane/eal.h"

namespace {

void usage(const char* prog) {
  std::printf(
      "Usage: %s [EAL args --] [options]\n\n"
      "imagod is the imago primary process. Applications attach to it as DPDK secondary\n"
      "processes with the same --file-prefix and open endpoints to its peers.\n"
      "Without EAL args it starts EAL itself: hugepages (for the secondaries), no PCI,\n"
      "lcores 0-1 (0: control, 1: engines), file prefix 'imago' or --file-prefix.\n\n"
      "Examples:\n"
      "  %s --iface veth0 --node-id 1 --peer 2@02:00:00:00:00:02\n"
      "  %s --pair --file-prefix demo      two nodes (1, 2) in this process\n"
      "  %s --topology line:3 --node-id 2 --vdev net_af_packet0,iface=b0 --vdev net_af_packet1,iface=b1\n"
      "      a router of a multi-hop fabric (port k: the k-th --vdev); its ends give --peer 1 / --peer 3\n\n"
      "While it runs: rte_telemetry answers /imago/nodes, /imago/node,ID, /imago/peers,ID,\n"
      "/imago/peer,ID,PEER, /imago/ports[,PORT], /imago/lcores, /imago/endpoints,\n"
      "/imago/endpoint,SLOT, /imago/pools and /imago/routes,ID (dpdk-telemetry.py -f PREFIX, or imago-stat -f\n"
      "PREFIX for a live table); dpdk-dumpcap --file-prefix=PREFIX -i PORT captures its frames\n"
      "(tshark decodes them with imago.lua, which meson install puts in Wireshark's global Lua\n"
      "plugin folder). SIGINT, SIGTERM or SIGHUP stops it cleanly (a --topology node first closes\n"
      "its circuits and tells its neighbours it leaves). A closed standard output does not stop\n"
      "it: it says so once on stderr and goes on serving, without printing counters. An option\n"
      "given twice is refused, except the repeatable ones (--peer, --peer-b, --vdev); so are\n"
      "--loss with --fault-rx (--loss P is --fault-rx loss=P) and --pmd without --iface.\n"
      "A node dropping frames only miswiring (or forgery) explains gets a line 'imago: node N\n"
      "dropped M frames ...' naming the counter and the likely cause (networks crossed, a peer\n"
      "without --redundancy), at most one per kind every 10 s. Exit codes: 0 stopped cleanly,\n"
      "2 a refused command line, 1 it could not start, 3 it gave up (an engine lcore stuck for\n"
      "10 s, or a stop not done in 30 s: an application killed mid-operation can wedge it; start\n"
      "a new one, which cleans up).\n\n"
      "Options [default]:\n",
      prog, prog, prog, prog);
  imago::api::print_runtime_options(stdout);
}

constexpr unsigned kStuckS = 10;  // an engine loop standing still this long is stuck
constexpr unsigned kStopS = 30;   // the longest a stop may take

// An engine that no longer runs serves no one and cannot be stopped cleanly (its lcore spins
// on a shared ring a killed application left mid-operation): say so and end, exit 3, so that
// a service manager starts a new one (which cleans up after this one).
[[noreturn]] void give_up_stuck(int lcore) {
  std::fprintf(stderr, "imagod: engine lcore %d has not run for %u s (an application killed inside a shared "
               "pool operation can wedge it: docs/USER.md): it cannot serve or stop cleanly; exiting (3) "
               "for a restart\n", lcore, kStuckS);
  std::fflush(nullptr);
  std::_Exit(3);
}

// After a stop request: a stop that has not finished in kStopS (an application killed inside
// its attach holds EAL's shared lock for good) ends the process anyway, exit 3.
void bound_the_stop() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(kStopS));
    std::fprintf(stderr, "imagod: stopping did not finish in %u s (an application killed while attaching can "
                 "hold EAL's shared lock: docs/USER.md); exiting (3) without cleaning up\n", kStopS);
    std::fflush(nullptr);
    std::_Exit(3);
  }).detach();
}

// Standard output that fails under imagod: its service does not depend on its log, so it
// goes on serving and says so once on stderr. A pipe whose reader left (EPIPE; SIGPIPE is
// ignored, apps/common/signals.h) never comes back: no more counters are printed into it.
// Another error (a full disk) may pass: printing goes on, the lines lost meanwhile are lost.
struct StdoutWatch {
  bool lost = false;  ///< EPIPE: nothing is printed to stdout any more
  bool said = false;
  // @return true once standard output is gone for good.
  bool check() {
    if (lost) return true;
    int e = errno;  // a line written just before that failed left why here
    if (std::fflush(stdout) != 0) e = errno;
    else if (!std::ferror(stdout)) return false;
    std::clearerr(stdout);
    lost = e == EPIPE;
    if (!said)
      std::fprintf(stderr, "imagod: standard output cannot be written (%s): %s; still serving (SIGINT, SIGTERM or "
                   "SIGHUP stops it)\n", e ? std::strerror(e) : "write error",
                   lost ? "counters are no longer printed" : "lines printed meanwhile are lost");
    said = true;
    return lost;
  }
};

// The control loop: reap dead applications, print counters, until a signal or --duration.
void serve(imago::api::Runtime& rt, const imago::api::RuntimeOptions& o, StdoutWatch& out) {
  const uint64_t hz = rte_get_tsc_hz(), start = rte_rdtsc();
  const auto period = static_cast<uint64_t>(o.stats_period_s * static_cast<double>(hz));
  const uint64_t end = o.duration_s > 0 ? start + static_cast<uint64_t>(o.duration_s * static_cast<double>(hz)) : UINT64_MAX;
  uint64_t next_stats = start + period, next_watch = start;
  imago::api::EngineWatch engines(kStuckS * 1'000'000'000ull);
  while (!imago::dp::stop_requested() && rte_rdtsc() < end) {
    rt.housekeeping();
    if (rte_rdtsc() >= next_watch) {
      next_watch += hz;
      rt.watch_wiring(stdout);
      out.check();
      const auto now_ns = static_cast<uint64_t>(static_cast<double>(rte_rdtsc() - start) * 1e9 / static_cast<double>(hz));
      if (const int l = engines.stuck(rt.engine_loops(), now_ns); l >= 0) give_up_stuck(l);
    }
    if (period && rte_rdtsc() >= next_stats) {
      next_stats += period;
      if (!out.check()) rt.print_stats(stdout);
    }
    rte_delay_us_sleep(20'000);  // control work only: the engines run on their own lcore
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace imago;
  // A line at a time into a file or a pipe too: an operator tailing the log sees a reclaim
  // or a death when it happens, not with the next stats line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  dp::ArgSplit args = dp::split_args(argc, argv);
  api::RuntimeOptions o;
  std::string err;
  if (int rc = api::parse_runtime_options(args.app, o, &err); rc != 0) {
    if (rc == 1) {
      usage(args.prog.c_str());
      return 0;
    }
    std::fprintf(stderr, "imagod: %s\n", err.c_str());
    return 2;
  }
  if (o.run_to_completion) {  // the library's option: an application that polls its own nodes
    std::fprintf(stderr, "imagod: --run-to-completion is for an application with the library embedded: "
                         "imagod's nodes run on its engine lcore\n");
    return 2;
  }
  app::install_stop_signals();
  api::Runtime rt;
  StdoutWatch out;
  int rc = rt.start(o, args, true);
  if (rc == 0) {
    std::printf("imagod: serving %zu node(s) (ids", rt.node_count());
    for (uint32_t i = 0; i < rt.shm()->n_nodes; ++i) std::printf(" %lu", static_cast<unsigned long>(rt.shm()->node_ids[i]));
    if (o.no_huge) {
      std::printf("), no applications (--no-huge); SIGINT, SIGTERM or SIGHUP stops it\n");
    } else {
      // EAL's runtime directory ends in the prefix, whoever chose it (EAL args of its own too).
      const std::string dir = rte_eal_get_runtime_dir();
      std::printf("), file prefix '%s'; SIGINT, SIGTERM or SIGHUP stops it\n", dir.substr(dir.rfind('/') + 1).c_str());
    }
    out.check();
    serve(rt, o, out);
    bound_the_stop();
    if (!out.check()) rt.print_stats(stdout);
  }
  rt.stop();
  // Where it can still be read: stderr once standard output is gone.
  std::fprintf(out.check() ? stderr : stdout, "imagod: %s\n", rc == 0 ? "stopped cleanly" : "failed to start");
  return rc == 0 ? 0 : 1;
}
