// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/nodes.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstdio>
#include <string>

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

int open_topology(Context& ctx, Topology& topo) {
  const Options& o = ctx.opt;
  topo.a.name = "A";
  topo.b.name = "B";
  if (o.pair) {
    if (int rc = dp::create_ring_pair("imago_pair", o.ring_size, topo.ring); rc < 0) return rc;
    topo.has_ring = true;
    if (int rc = open_node(ctx, topo.a, topo.ring.port_a); rc < 0) return rc;
    if (int rc = open_node(ctx, topo.b, topo.ring.port_b); rc < 0) return rc;
    ctx.nodes = {&topo.a, &topo.b};
    return apply_faults(ctx);
  }
  if (rte_eth_dev_count_avail() == 0) {
    std::fprintf(stderr, "imago-perf: --role %s needs a port: give --iface NAME, --vdev DEV, or "
                 "EAL args with a --vdev before --\n", o.role.c_str());
    return -ENODEV;
  }
  NodePort& n = o.role == "tx" ? topo.a : topo.b;
  uint16_t port_id = 0;
  RTE_ETH_FOREACH_DEV(port_id) break;  // the first available port
  if (int rc = open_node(ctx, n, port_id); rc < 0) return rc;
  ctx.nodes = {&n};
  return apply_faults(ctx);
}

int apply_faults(Context& ctx) {
  const Options& o = ctx.opt;
  dp::FaultConfig none{};
  auto offset = static_cast<uint32_t>(dp::encap_header_len(o.encap.kind));
  for (NodePort* n : ctx.nodes) {
    // In a pair, faults sit on the sender's transmit side and the receiver's receive side.
    bool sender = !o.pair || n == ctx.nodes.front();
    bool receiver = !o.pair || n == ctx.nodes.back();
    int rc = dp::node_port_faults(*n, sender ? o.fault_tx : none, receiver ? o.fault_rx : none, offset,
                                  o.fault_capacity);
    if (rc < 0) return rc;
  }
  return 0;
}

void close_topology(Context& ctx, Topology& topo) {
  for (NodePort* n : {&topo.a, &topo.b}) dp::node_port_close(*n);
  ctx.nodes.clear();
  if (topo.has_ring) dp::destroy_ring_pair(topo.ring);
  topo.has_ring = false;
}

}  // namespace imago::perf
