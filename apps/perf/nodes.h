/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Bringing up imago-perf's nodes: a net_ring pair in one process, or one node on port 0.
 */
#pragma once

#include "apps/perf/perf.h"
#include "dataplane/ring_pair.h"

namespace imago::perf {

/** The nodes and the link this process owns. */
struct Topology {
  NodePort a, b;
  NodePort a2, b2;  ///< --redundancy: A's and B's ports on network B
  dp::RingPair ring{}, ring_b{};
  bool has_ring = false;
};

/** Open and start the nodes @p ctx.opt asks for. @return 0 or a negative errno after printing why. */
int open_topology(Context& ctx, Topology& topo);
/** (Re)initialise every node's fault layer from ctx.opt. @return 0 or a negative errno. */
int apply_faults(Context& ctx);
/** Stop and close every port, free the rings and mempools (idempotent). */
void close_topology(Context& ctx, Topology& topo);

}  // namespace imago::perf
