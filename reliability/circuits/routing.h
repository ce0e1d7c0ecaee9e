/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A node's routing table for multi-hop virtual circuits (after "Routing in Barrelfish"): for
 * every node it can reach, the neighbour and port a circuit toward it leaves by, and how many
 * hops away it is. Every node computes its own table from the same Topology and the same set
 * of dead links, and computes it again when a link dies.
 *
 * Paths are shortest by hop count (breadth-first search from the node). Among equally short
 * paths the one whose first hop leaves by the lowest port wins, so the choice depends on the
 * input only. Because every table holds true shortest distances, a circuit that follows the
 * tables hop by hop reaches its destination in exactly the hops the first table promised.
 *
 * Control path (circuit set-up, not per data frame): pure, allocates, O(nodes) memory.
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reliability/circuits/topology.h"

namespace imago::rel::circ {

/** The way toward one destination. */
struct Route {
  NodeId next;    ///< the neighbour the first hop reaches
  PortId port;    ///< our port toward it
  uint32_t hops;  ///< links between us and the destination (>= 1)
};

class RoutingTable {
 public:
  /**
   * Compute the table of node @p self over @p t.
   * @param link_dead indexed like t.links(); true: the link is down. Links past its end are
   *        alive (an empty vector: all alive).
   * An unknown @p self gives an empty table. O(nodes + links), then a sort of the result.
   */
  void compute(const Topology& t, NodeId self, const std::vector<bool>& link_dead);

  /** The route to @p dst into @p out. @return false when @p dst is unreachable, unknown or
   *  ourselves. */
  bool lookup(NodeId dst, Route* out) const;
  /** As lookup(), but not out of port @p avoid: the shortest way whose first hop leaves by
   *  another port and never comes back through us. Our table knows only our own links, so a
   *  hop that refused our set-up (a link of its died) is gone round this way. */
  bool lookup_avoiding(NodeId dst, PortId avoid, Route* out) const;
  /** @return whether @p node is a node of the topology (reachable or not). */
  bool knows(NodeId node) const { return std::binary_search(known_.begin(), known_.end(), node); }
  /** @return how many destinations (not counting ourselves) we reach. */
  size_t reachable() const { return routes_.size(); }
  NodeId self() const { return self_; }

  /** Call @p f(dst, const Route&) for every reachable destination, in increasing dst order. */
  template <typename F>
  void for_each(F f) const {
    for (const auto& [dst, r] : routes_) f(dst, r);
  }

 private:
  void compute_others(const Topology& t, uint32_t self_index, const std::vector<bool>& link_dead);

  NodeId self_ = 0;
  std::vector<std::pair<NodeId, Route>> routes_;  ///< sorted by destination
  std::vector<std::pair<NodeId, Route>> others_;  ///< per destination, the best route by another first port
  std::vector<NodeId> known_;                     ///< the topology's nodes, sorted
};

/** @return one line per destination, `dst -> next via port P (H hops)` (--show-routes). */
std::string format_routes(const RoutingTable& rt);

}  // namespace imago::rel::circ
