// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/nodes.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "dataplane/eal.h"
#include "dataplane/if_state.h"

namespace imago::perf {
namespace {

constexpr size_t kMaxFrame = 9000 + sizeof(dp::EthHdr);  // a 9000-byte jumbo MTU

int open_node(Context& ctx, NodePort& n, uint16_t port_id) {
  const Options& o = ctx.opt;
  dp::NodePortConfig c;
  c.pool_name = std::string("perf_") + n.name;
  c.port = {.nb_rxd = o.nb_desc, .nb_txd = o.nb_desc};
  c.max_frame = max_frame_bytes(o);
  // Raw modes put each message in one frame: no link carries more than a jumbo frame.
  if (c.max_frame > kMaxFrame) {
    std::fprintf(stderr, "imago-perf: %s sends each message as one frame: --size %u makes a %zu-byte "
                 "frame, above %zu (use a reliable mode, which fragments)\n",
                 o.mode.c_str(), o.size, c.max_frame, kMaxFrame);
    return -EMSGSIZE;
  }
  c.burst = o.burst;
  c.extra_mbufs = o.ring_size;  // the ring of a pair
  c.fault_capacity = o.fault_capacity;
  // Faults come after opening (apply_faults), where the pair's roles decide them.
  return dp::node_port_open(n, port_id, c);
}

}  // namespace

// --role with --redundancy: network B's port, the --iface-b vdev or the first port after A's.
int second_port(const Options& o, uint16_t a, uint16_t* b) {
  uint16_t id;
  const std::string name = std::string("net_") + dp::iface_pmd_name(o.pmd) + "1";
  if (!o.iface_b.empty() && rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0) return *b = id, 0;
  RTE_ETH_FOREACH_DEV(id) {
    if (id != a) return *b = id, 0;
  }
  std::fprintf(stderr, "imago-perf: --redundancy needs a second port (network B): give --iface-b NAME, or a "
               "second --vdev\n");
  return -ENODEV;
}

int open_topology(Context& ctx, Topology& topo) {
  const Options& o = ctx.opt;
  topo.a.name = "A";
  topo.b.name = "B";
  topo.a2.name = "A2";
  topo.b2.name = "B2";
  if (o.pair) {
    if (int rc = dp::create_ring_pair("imago_pair", o.ring_size, topo.ring); rc < 0) return rc;
    topo.has_ring = true;
    if (int rc = open_node(ctx, topo.a, topo.ring.port_a); rc < 0) return rc;
    if (int rc = open_node(ctx, topo.b, topo.ring.port_b); rc < 0) return rc;
    ctx.nodes = {&topo.a, &topo.b};
    if (o.redundancy.on) {  // a second crossed pair: network B
      if (int rc = dp::create_ring_pair("imago_pair_b", o.ring_size, topo.ring_b); rc < 0) return rc;
      if (int rc = open_node(ctx, topo.a2, topo.ring_b.port_a); rc < 0) return rc;
      if (int rc = open_node(ctx, topo.b2, topo.ring_b.port_b); rc < 0) return rc;
      topo.a.net_b = &topo.a2, topo.b.net_b = &topo.b2;
    }
    return apply_faults(ctx);
  }
  NodePort& n = o.role == "tx" ? topo.a : topo.b;
  uint16_t port_id = 0;
  const std::string name_a = std::string("net_") + dp::iface_pmd_name(o.pmd) + "0";
  if (!o.iface.empty() && !ctx.explicit_eal && rte_eth_dev_get_port_by_name(name_a.c_str(), &port_id) != 0) {
    std::fprintf(stderr, "imago-perf: --iface %s: %s could not open it (%s)\n", o.iface.c_str(), name_a.c_str(),
                 dp::port_open_failure(name_a, o.iface).c_str());
    return -ENODEV;
  }
  if (rte_eth_dev_count_avail() == 0) {
    std::fprintf(stderr, "imago-perf: --role %s: %s\n", o.role.c_str(),
                 dp::no_port_message("--iface NAME, --vdev DEV, or EAL args with a --vdev before --").c_str());
    return -ENODEV;
  }
  if (o.iface.empty() || rte_eth_dev_get_port_by_name(name_a.c_str(), &port_id) != 0)
    RTE_ETH_FOREACH_DEV(port_id) break;  // the first available port
  if (int rc = open_node(ctx, n, port_id); rc < 0) return rc;
  ctx.nodes = {&n};
  if (o.redundancy.on) {
    NodePort& n2 = o.role == "tx" ? topo.a2 : topo.b2;
    uint16_t port_b;
    if (int rc = second_port(o, port_id, &port_b); rc < 0) return rc;
    if (int rc = open_node(ctx, n2, port_b); rc < 0) return rc;
    n.net_b = &n2;
  }
  return apply_faults(ctx);
}

int apply_faults(Context& ctx) {
  const Options& o = ctx.opt;
  dp::FaultConfig none{};
  auto offset = static_cast<uint32_t>(dp::encap_header_len(o.encap.kind));
  for (NodePort* n : ctx.nodes) {
    // In a pair, faults sit on the sender's transmit side and the receiver's receive side
    // (of both networks: --fault-tx and --fault-rx apply to each).
    bool sender = !o.pair || n == ctx.nodes.front();
    bool receiver = !o.pair || n == ctx.nodes.back();
    for (NodePort* p : {n, n->net_b}) {
      if (p == nullptr) continue;
      int rc = dp::node_port_faults(*p, sender ? o.fault_tx : none, receiver ? o.fault_rx : none, offset,
                                    o.fault_capacity);
      if (rc < 0) return rc;
    }
  }
  return 0;
}

void close_topology(Context& ctx, Topology& topo) {
  for (NodePort* n : {&topo.a, &topo.b, &topo.a2, &topo.b2}) dp::node_port_close(*n);
  ctx.nodes.clear();
  if (topo.has_ring) dp::destroy_ring_pair(topo.ring);
  if (topo.has_ring && topo.ring_b.a_to_b != nullptr) dp::destroy_ring_pair(topo.ring_b);
  topo.ring_b = {};
  topo.has_ring = false;
}

}  // namespace imago::perf
