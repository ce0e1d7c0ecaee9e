// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/telemetry.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <atomic>
#include <mutex>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <string>
#include <vector>

#include "dataplane/if_state.h"

namespace imago::dp {
namespace {

std::mutex g_mu;            // commands (telemetry threads) against telemetry_set()
// Under g_mu. Never destroyed: a library's nodes may be torn down by another static's
// destructor at exit (an application that returns from main() attached), after this one's.
TelemetrySources& g_sources = *new TelemetrySources;
std::atomic<bool> g_registered{false};

// A reader's copy of a board (16 KiB), one per telemetry thread.
thread_local NodeSnapshot g_snap;  // DPDK runs a thread per telemetry client

const char* state_name(rel::PeerState s) {
  switch (s) {
    case rel::PeerState::kConnecting: return "connecting";
    case rel::PeerState::kEstablished: return "established";
    case rel::PeerState::kDead: return "dead";
  }
  return "?";
}

// "1" -> 1; "1,2" -> 1 and 2. @return how many numbers were read (0: none, or malformed).
int parse_ids(const char* params, uint64_t* a, uint64_t* b) {
  if (params == nullptr || *params == '\0') return 0;
  char* end = nullptr;
  *a = std::strtoull(params, &end, 10);
  if (end == params) return 0;
  if (*end == '\0') return 1;
  if (*end != ',' || b == nullptr) return 0;
  const char* second = end + 1;
  *b = std::strtoull(second, &end, 10);
  return end != second && *end == '\0' ? 2 : 0;
}

void add_counters(rte_tel_data* d, const rel::PeerCounters& c, bool rejects) {
  rel::for_each_counter(c, [d](const char* k, uint64_t v) { rte_tel_data_add_dict_u64(d, k, v); });
  if (!rejects) return;
  rel::for_each_reject(c, [d](const char* k, uint64_t v) {
    rte_tel_data_add_dict_u64(d, ("reject_" + std::string(k)).c_str(), v);
  });
}

// A read fails while the engine copies its board, for as long as this thread is descheduled
// in the middle (busy lcores on few cores): try again, control path, for up to 100 ms, rather
// than answer that the node does not exist.
bool read_settled(const StatsBoard& b, NodeSnapshot* out) {
  const uint64_t end = rte_rdtsc() + rte_get_tsc_hz() / 10;
  while (!b.read(out)) {
    if (rte_rdtsc() > end) return false;
    rte_delay_us_sleep(100);
  }
  return true;
}

int cmd_nodes(const char*, const char*, rte_tel_data* d) {
  rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
  TelemetryLock hold;
  for (const StatsBoard* b : g_sources.boards) {
    if (read_settled(*b, &g_snap)) rte_tel_data_add_array_u64(d, g_snap.node_id);
  }
  return 0;
}

// The commands that name one node (its id in @p params): @p fill on a consistent copy of its
// board (g_snap), under the lock. @return fill's, -EINVAL or -ENOENT.
template <typename Fill>
int on_node(const char* params, Fill fill) {
  uint64_t id = 0;
  if (parse_ids(params, &id, nullptr) != 1) return -EINVAL;
  TelemetryLock hold;
  if (!telemetry_node(id, &g_snap)) return -ENOENT;
  return fill();
}

int cmd_node(const char*, const char* params, rte_tel_data* d) {
  return on_node(params, [d] {
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "node", g_snap.node_id);
    rte_tel_data_add_dict_u64(d, "peers", g_snap.n_peers);
    rte_tel_data_add_dict_u64(d, "tsc_hz", g_snap.tsc_hz);
    rte_tel_data_add_dict_u64(d, "published_tsc", g_snap.published_tsc);
    add_counters(d, g_snap.total, true);
    for_each_counter(g_snap.link, [d](const char* k, uint64_t v) {
      rte_tel_data_add_dict_u64(d, ("link_" + std::string(k)).c_str(), v);
    });
    for_each_group_counter(g_snap, [d](const char* k, uint64_t v) { rte_tel_data_add_dict_u64(d, k, v); });
    for_each_net_counter(g_snap, [d](const char* k, uint64_t v) { rte_tel_data_add_dict_u64(d, k, v); });
    for_each_circuit_counter(g_snap, [d](const char* k, uint64_t v) { rte_tel_data_add_dict_u64(d, k, v); });
    return 0;
  });
}

// /imago/routes,NODE: a fabric node's routing table and links (its first routes by destination).
int cmd_routes(const char*, const char* params, rte_tel_data* d) {
  return on_node(params, [d] {
    if (!g_snap.fabric) return -ENOTSUP;
    const CircuitStats& c = g_snap.circ;
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "node", g_snap.node_id);
    rte_tel_data_add_dict_u64(d, "reachable", c.reachable);
    char key[32], val[64];
    for (uint32_t i = 0; i < c.n_links; ++i) {
      std::snprintf(key, sizeof key, "port_%u", i);
      rte_tel_data_add_dict_string(d, key, c.link_up[i] ? "up" : "down");
    }
    for (uint32_t i = 0; i < c.n_routes; ++i) {
      const RouteRow& r = c.routes[i];
      std::snprintf(key, sizeof key, "to_%u", r.dst);
      std::snprintf(val, sizeof val, "next %u via port %u, %u hops", r.next, r.port, r.hops);
      rte_tel_data_add_dict_string(d, key, val);
    }
    return 0;
  });
}

void add_view(rte_tel_data* d, const rel::PeerView& v) {
  rte_tel_data_add_dict_string(d, "state", state_name(v.state));
  for (auto [k, x] : {std::pair<const char*, uint64_t>{"peer", v.id}, {"known", v.known}, {"confirmed", v.confirmed},
                      {"epoch", v.epoch}, {"srtt_ns", v.srtt_ns}, {"rttvar_ns", v.rttvar_ns},
                      {"min_rtt_ns", v.min_rtt_ns}, {"rto_ns", v.rto_ns}, {"tx_in_flight", v.tx_in_flight},
                      {"tx_queued", v.tx_queued}, {"tx_unconfirmed_msgs", v.tx_unconfirmed_msgs},
                      {"rx_held", v.rx_held}, {"credit_allowed", v.credit_allowed},
                      {"credit_granted", v.credit_granted}})
    rte_tel_data_add_dict_u64(d, k, x);
}

// /imago/peers,NODE: the ids; /imago/peer,NODE,PEER: one peer whole.
int cmd_peers(const char*, const char* params, rte_tel_data* d) {
  return on_node(params, [d] {
    rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
    for (uint32_t i = 0; i < g_snap.n_peers; ++i) rte_tel_data_add_array_u64(d, g_snap.peers[i].view.id);
    return 0;
  });
}

int cmd_peer(const char*, const char* params, rte_tel_data* d) {
  uint64_t id = 0, peer = 0;
  if (parse_ids(params, &id, &peer) != 2) return -EINVAL;
  TelemetryLock hold;
  if (!telemetry_node(id, &g_snap)) return -ENOENT;
  for (uint32_t i = 0; i < g_snap.n_peers; ++i) {
    const PeerSnapshot& p = g_snap.peers[i];
    if (p.view.id != peer) continue;
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "node", id);
    add_view(d, p.view);
    add_counters(d, p.c, true);
    return 0;
  }
  return -ENOENT;
}

// The PMD's extended statistics that are not zero (drops, errors, per-queue counts: what a
// driver adds to the basic ones), as "x_<name>", as many as a reply holds.
void add_xstats(rte_tel_data* d, uint16_t port) {
  constexpr int kMax = 200;  // a dict holds RTE_TEL_MAX_DICT_ENTRIES (256) with the basic ones
  const int n = rte_eth_xstats_get(port, nullptr, 0);
  if (n <= 0) return;
  std::vector<rte_eth_xstat> vals(static_cast<size_t>(n));
  std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
  if (rte_eth_xstats_get(port, vals.data(), n) != n || rte_eth_xstats_get_names(port, names.data(), n) != n) return;
  int added = 0;
  for (const rte_eth_xstat& x : vals) {
    if (x.value == 0 || x.id >= static_cast<uint64_t>(n) || added == kMax) continue;
    std::string k = std::string("x_") + names[x.id].name;
    for (char& c : k)
      if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '/') c = '_';  // telemetry's name rule
    rte_tel_data_add_dict_u64(d, k.c_str(), x.value);
    ++added;
  }
}

int cmd_ports(const char*, const char* params, rte_tel_data* d) {
  uint64_t want = 0;
  const bool one = parse_ids(params, &want, nullptr) == 1;
  if (!one) {
    rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
    uint16_t p = 0;
    RTE_ETH_FOREACH_DEV(p) rte_tel_data_add_array_u64(d, p);
    return 0;
  }
  if (want > UINT16_MAX || !rte_eth_dev_is_valid_port(static_cast<uint16_t>(want))) return -ENOENT;
  const auto port = static_cast<uint16_t>(want);
  rte_eth_stats st{};
  rte_eth_link link{};
  rte_eth_stats_get(port, &st);
  rte_eth_link_get_nowait(port, &link);
  char name[RTE_ETH_NAME_MAX_LEN] = "";
  rte_eth_dev_get_name_by_port(port, name);
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "port", port);
  rte_tel_data_add_dict_string(d, "name", name);
  // The address peers must name (--peer ID@MAC): a PMD's own, not always its interface's.
  rte_ether_addr mac{};
  char mac_text[RTE_ETHER_ADDR_FMT_SIZE] = "";
  if (rte_eth_macaddr_get(port, &mac) == 0) rte_ether_format_addr(mac_text, sizeof mac_text, &mac);
  rte_tel_data_add_dict_string(d, "mac", mac_text);
  // A kernel interface's PMD (net_af_packet, net_af_xdp) says up whatever the interface does:
  // its carrier, or whether it still exists (deleted and made again, it is another one, which
  // this port's socket never sees), says more (an outside tester: "up" under a link down).
  rte_eth_dev_info info{};
  const int iface = rte_eth_dev_info_get(port, &info) == 0 && info.if_index != 0 ? iface_running(info.if_index) : 1;
  if (info.if_index != 0) rte_tel_data_add_dict_string(d, "iface", iface < 0 ? "gone" : iface ? "up" : "down");
  rte_tel_data_add_dict_int(d, "link_up", link.link_status && iface == 1);
  rte_tel_data_add_dict_u64(d, "link_speed_mbps", link.link_speed);
  for (auto [k, v] : {std::pair{"ipackets", st.ipackets}, {"opackets", st.opackets}, {"ibytes", st.ibytes},
                      {"obytes", st.obytes}, {"imissed", st.imissed}, {"ierrors", st.ierrors},
                      {"oerrors", st.oerrors}, {"rx_nombuf", st.rx_nombuf}})
    rte_tel_data_add_dict_u64(d, k, v);
  add_xstats(d, port);
  return 0;
}

int cmd_lcores(const char*, const char*, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  TelemetryLock hold;
  if (g_sources.runner == nullptr) return 0;
  for (unsigned l : g_sources.runner->used_lcores()) {
    // Plain counters the lcore writes as it goes: a figure may be one iteration old.
    LcoreStats st = g_sources.runner->stats(l);
    const std::string k = "lcore" + std::to_string(l) + "_";
    rte_tel_data_add_dict_u64(d, (k + "busy_cycles").c_str(), st.busy_cycles);
    rte_tel_data_add_dict_u64(d, (k + "idle_cycles").c_str(), st.idle_cycles);
    rte_tel_data_add_dict_u64(d, (k + "iterations").c_str(), st.iterations);
  }
  return 0;
}

}  // namespace

TelemetryLock::TelemetryLock() { g_mu.lock(); }
TelemetryLock::~TelemetryLock() { g_mu.unlock(); }

bool telemetry_node(uint64_t id, NodeSnapshot* out) {
  for (const StatsBoard* b : g_sources.boards)
    if (read_settled(*b, out) && out->node_id == id) return true;
  return false;
}

int telemetry_add(const char* cmd, telemetry_cb fn, const char* help) {
  return rte_telemetry_register_cmd(cmd, fn, help);
}

int telemetry_register() {
  if (g_registered.exchange(true)) return 0;
  struct Cmd {
    const char* name;
    telemetry_cb fn;
    const char* help;
  };
  static const Cmd cmds[] = {
      {"/imago/nodes", cmd_nodes, "The ids of the nodes this process runs. No parameters."},
      {"/imago/node", cmd_node, "Every counter of a node's engine, group streams and link. Parameter: node id."},
      {"/imago/peers", cmd_peers, "The peers of a node. Parameter: node id."},
      {"/imago/peer", cmd_peer, "One peer: session, RTT, windows, credits, counters. Parameters: node id,peer id."},
      {"/imago/ports", cmd_ports, "The ports (no parameter), or one port's link and counters. Parameter: port id."},
      {"/imago/lcores", cmd_lcores, "Busy and idle cycles of the lcores that poll the nodes. No parameters."},
      {"/imago/routes", cmd_routes, "A fabric node's links and routing table (--topology). Parameter: node id."},
  };
  for (const Cmd& c : cmds) {
    if (int rc = telemetry_add(c.name, c.fn, c.help); rc < 0) return rc;
  }
  return 0;
}

void telemetry_set(const TelemetrySources& src) {
  TelemetrySources copy = src;  // allocate outside the lock
  std::lock_guard<std::mutex> lock(g_mu);
  g_sources.boards.swap(copy.boards);
  g_sources.runner = copy.runner;
}

void telemetry_clear() { telemetry_set(TelemetrySources{}); }

}  // namespace imago::dp
