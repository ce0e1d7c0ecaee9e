// SPDX-License-Identifier: BSD-3-Clause
// imagod: the imago primary process. This first cut owns EAL and the ports: it brings every
// port up, reports link and MAC, prints port counters periodically and shuts down cleanly on
// SIGINT/SIGTERM. Endpoints for secondary processes come with the application API.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <unistd.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "dataplane/eal.h"
#include "dataplane/log.h"
#include "dataplane/port.h"

namespace {

struct DaemonOptions {
  std::string iface;
  std::vector<std::string> vdevs;
  double stats_period_s = 10;
  double duration_s = 0;  // 0: until a signal
};

void usage(const char* prog) {
  std::printf(
      "Usage: %s [EAL args --] [options]\n\n"
      "imagod is the imago primary process: it owns EAL and the ports and runs until SIGINT or\n"
      "SIGTERM. Without EAL args it starts EAL itself (no hugepages, no PCI).\n\n"
      "Options (default in brackets):\n"
      "  --iface NAME             without EAL args: a net_af_packet port on interface NAME [-]\n"
      "  --vdev DEV               without EAL args: add an EAL --vdev (repeatable) [-]\n"
      "  --stats-period SECONDS   print port counters this often, 0 for never [10]\n"
      "  --duration SECONDS       exit after this long, 0 for never [0]\n"
      "  --help                   this text\n",
      prog);
}

bool to_double(const std::string& s, double& v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v >= 0;
}

// @return 0, 1 for --help, or -1 after printing the error.
int parse(const std::vector<std::string>& a, DaemonOptions& o) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--help" || a[i] == "-h") return 1;
    bool has_value = i + 1 < a.size();
    if (a[i] == "--iface" && has_value) {
      o.iface = a[++i];
    } else if (a[i] == "--vdev" && has_value) {
      o.vdevs.push_back(a[++i]);
    } else if (a[i] == "--stats-period" && has_value && to_double(a[i + 1], o.stats_period_s)) {
      ++i;
    } else if (a[i] == "--duration" && has_value && to_double(a[i + 1], o.duration_s)) {
      ++i;
    } else {
      std::fprintf(stderr, "imagod: bad or incomplete option '%s' (see --help)\n", a[i].c_str());
      return -1;
    }
  }
  return 0;
}

void print_port_stats(const std::vector<imago::dp::Port>& ports) {
  for (const auto& p : ports) {
    rte_eth_stats s{};
    rte_eth_stats_get(p.id(), &s);
    std::printf("port %u: rx %" PRIu64 " tx %" PRIu64 " missed %" PRIu64 " rx-errors %" PRIu64
                " tx-errors %" PRIu64 "\n",
                p.id(), s.ipackets, s.opackets, s.imissed, s.ierrors, s.oerrors);
  }
  std::fflush(stdout);
}

int open_ports(std::vector<imago::dp::Port>& ports, rte_mempool*& pool) {
  using namespace imago::dp;
  unsigned n = rte_eth_dev_count_avail();
  PortConfig cfg;
  pool = create_mbuf_pool("imagod_pool", n * mbufs_needed(cfg, rte_lcore_count(), 32, 256, 512),
                          RTE_MBUF_DEFAULT_DATAROOM, rte_socket_id());
  if (!pool) return -ENOMEM;
  ports.resize(n);
  size_t i = 0;
  uint16_t id;
  RTE_ETH_FOREACH_DEV(id) {
    Port& p = ports[i++];
    if (int rc = p.open(id, cfg, pool); rc < 0) return rc;
    if (int rc = p.start(); rc < 0) return rc;
    LinkStatus l;
    p.link(l, 1000);
    MacAddr m = p.mac();
    std::printf("port %u (%s): mac %02x:%02x:%02x:%02x:%02x:%02x, link %s %u Mbps\n", id,
                p.driver().c_str(), m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5],
                l.up ? "up" : "down", l.speed_mbps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace imago;
  dp::ArgSplit args = dp::split_args(argc, argv);
  DaemonOptions o;
  if (int rc = parse(args.app, o); rc != 0) {
    if (rc == 1) usage(args.prog.c_str());
    return rc == 1 ? 0 : 2;
  }
  dp::EalDefaults d;
  d.vdevs = o.vdevs;
  if (!o.iface.empty()) d.vdevs.push_back("net_af_packet0,iface=" + o.iface);
  if (dp::eal_start(args.prog, args.explicit_eal ? args.eal : dp::default_eal_args(d, getpid())) < 0) {
    return 1;
  }
  dp::install_stop_signals();
  if (!args.explicit_eal) dp::eal_own_runtime_dir();  // our unique prefix: leave nothing behind
  std::vector<dp::Port> ports;
  rte_mempool* pool = nullptr;
  int rc = open_ports(ports, pool);
  if (rc == 0) {
    std::printf("imagod: serving %zu port(s); SIGINT or SIGTERM stops it\n", ports.size());
    std::fflush(stdout);
    uint64_t hz = rte_get_tsc_hz(), start = rte_rdtsc(), next_stats = start;
    auto period = static_cast<uint64_t>(o.stats_period_s * static_cast<double>(hz));
    auto end = o.duration_s > 0 ? start + static_cast<uint64_t>(o.duration_s * hz) : UINT64_MAX;
    while (!dp::stop_requested() && rte_rdtsc() < end) {
      if (period && rte_rdtsc() >= next_stats + period) {
        next_stats = rte_rdtsc();
        print_port_stats(ports);
      }
      rte_delay_us_sleep(10'000);  // control loop only: nothing to poll yet
    }
  }
  for (auto& p : ports) p.close();
  rte_mempool_free(pool);
  dp::eal_stop();
  std::printf("imagod: %s\n", rc == 0 ? "stopped cleanly" : "failed to start");
  return rc == 0 ? 0 : 1;
}
