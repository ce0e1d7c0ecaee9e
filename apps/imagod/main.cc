// SPDX-License-Identifier: BSD-3-Clause
// imagod: the imago primary process. It owns EAL, the ports, the nodes and their engine
// lcore; applications attach as DPDK secondary processes (imago_attach_secondary()) and open
// endpoints over rte_mp. It reclaims the endpoints of applications that exit or are killed,
// prints counters periodically, and stops cleanly on SIGINT or SIGTERM.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "api/engine_watch.h"
#include "api/runtime.h"
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
      "plugin folder). SIGINT or SIGTERM stops it cleanly (a --topology node first closes its\n"
      "circuits and tells its neighbours it leaves). A node dropping frames only\n"
      "miswiring (or forgery) explains gets a line 'imago: node N dropped M frames ...' naming\n"
      "the counter and the likely cause (networks crossed, a peer without --redundancy), at most\n"
      "one per kind every 10 s. Exit codes: 0 stopped cleanly, 2 a refused command line, 1 it\n"
      "could not start, 3 it gave up (an engine lcore stuck for 10 s, or a stop not done in 30 s:\n"
      "an application killed mid-operation can wedge it; start a new one, which cleans up).\n\n"
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

// The control loop: reap dead applications, print counters, until a signal or --duration.
void serve(imago::api::Runtime& rt, const imago::api::RuntimeOptions& o) {
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
      const auto now_ns = static_cast<uint64_t>(static_cast<double>(rte_rdtsc() - start) * 1e9 / static_cast<double>(hz));
      if (const int l = engines.stuck(rt.engine_loops(), now_ns); l >= 0) give_up_stuck(l);
    }
    if (period && rte_rdtsc() >= next_stats) {
      next_stats += period;
      rt.print_stats(stdout);
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
  dp::install_stop_signals();
  api::Runtime rt;
  int rc = rt.start(o, args, true);
  if (rc == 0) {
    std::printf("imagod: serving %zu node(s) (ids", rt.node_count());
    for (uint32_t i = 0; i < rt.shm()->n_nodes; ++i) std::printf(" %lu", static_cast<unsigned long>(rt.shm()->node_ids[i]));
    if (o.no_huge) {
      std::printf("), no applications (--no-huge); SIGINT or SIGTERM stops it\n");
    } else {
      // EAL's runtime directory ends in the prefix, whoever chose it (EAL args of its own too).
      const std::string dir = rte_eal_get_runtime_dir();
      std::printf("), file prefix '%s'; SIGINT or SIGTERM stops it\n", dir.substr(dir.rfind('/') + 1).c_str());
    }
    std::fflush(stdout);
    serve(rt, o);
    bound_the_stop();
    rt.print_stats(stdout);
  }
  rt.stop();
  std::printf("imagod: %s\n", rc == 0 ? "stopped cleanly" : "failed to start");
  return rc == 0 ? 0 : 1;
}
