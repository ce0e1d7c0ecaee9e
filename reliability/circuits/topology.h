/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The fabric a multi-hop virtual circuit crosses: nodes, each with numbered ports, joined by
 * undirected point-to-point links (after "Routing in Barrelfish", Barrelfish technical note:
 * every node computes its own routing table from this shared picture, routing.h).
 *
 * A topology is built by hand (add_node(), add_link()), from one of the built-in shapes
 * (Barrelfish's direct/full mesh, line, ring and fat tree) or from a text file
 * (parse_topology()). Its state is bounded (kMaxNodes, kMaxLinks) so a hostile file cannot
 * make it grow without end. Pure control-path code: no clock, no threads, no exceptions on
 * bad input; it allocates.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "reliability/wire.h"

namespace imago::rel::circ {

using NodeId = imago::rel::NodeId;
/** A node's port: 0-based, local to that node. */
using PortId = uint16_t;

inline constexpr size_t kMaxNodes = 4096;   ///< nodes in one topology, at most
inline constexpr size_t kMaxLinks = 65536;  ///< links in one topology, at most
/** 0 and 2^32-1 are kept out of the id space (no node, every node). */
inline constexpr NodeId kMaxNodeId = 0xFFFFFFFEu;

/** @return true when @p n may name a node (1..kMaxNodeId). */
constexpr bool valid_node_id(NodeId n) { return n >= 1 && n <= kMaxNodeId; }

/** An undirected point-to-point link joining node a's port pa to node b's port pb. */
struct Link {
  NodeId a;
  PortId pa;
  NodeId b;
  PortId pb;
  friend bool operator==(const Link&, const Link&) = default;
};

/** One used port of a node (Topology::ports()). */
struct PortLink {
  PortId port;
  uint32_t link;  ///< index in Topology::links()
  uint32_t peer;  ///< index in Topology::nodes() of the node at the other end
};

class Topology {
 public:
  /** Add node @p n. @return 0, -EEXIST (already there), -EINVAL (not valid_node_id()),
   *  -ENOSPC (kMaxNodes reached). */
  int add_node(NodeId n);
  /** Link @p a's port @p pa to @p b's port @p pb.
   *  @return 0; -EEXIST when that very link is there already; -EINVAL when a == b, a node is
   *  unknown, or a port is used by another link; -ENOSPC when kMaxLinks is reached. */
  int add_link(NodeId a, PortId pa, NodeId b, PortId pb);
  /** Link @p a and @p b on the lowest free port of each.
   *  @return 0; -EINVAL when a == b or a node is unknown; -ENOSPC when a node has no free
   *  port or kMaxLinks is reached. */
  int add_link(NodeId a, NodeId b);

  /** Nodes, in the order they were added. */
  const std::vector<NodeId>& nodes() const { return nodes_; }
  /** Links, in the order they were added (the index RoutingTable's dead links use). */
  const std::vector<Link>& links() const { return links_; }
  bool has_node(NodeId n) const { return index_.count(n) != 0; }
  /** @return the position of @p n in nodes(), or -ENOENT. */
  int node_index(NodeId n) const;
  /** The used ports of the node at position @p index in nodes(), sorted by port (empty
   *  when out of range). */
  std::span<const PortLink> ports(size_t index) const;
  /** @return port -> neighbour of @p n, sorted by port (empty for an unknown node). */
  std::vector<std::pair<PortId, NodeId>> neighbours(NodeId n) const;
  /** @return the index in links() of the link on @p n's port @p p, or -ENOENT. */
  int link_index(NodeId n, PortId p) const;
  /** The link on @p n's port @p p into @p out. @return 0, -ENOENT (no such node or port). */
  int link_at(NodeId n, PortId p, Link* out) const;
  /** The lowest port of @p n no link uses. @return 0, -ENOENT (unknown node), -ENOSPC (all
   *  65536 in use). */
  int next_free_port(NodeId n, PortId* out) const;

  /** Equal: the same nodes and links, in the same order. */
  friend bool operator==(const Topology& x, const Topology& y) {
    return x.nodes_ == y.nodes_ && x.links_ == y.links_;
  }

 private:
  const PortLink* find_port(uint32_t index, PortId p) const;

  std::vector<NodeId> nodes_;
  std::vector<Link> links_;
  std::unordered_map<NodeId, uint32_t> index_;  ///< node -> position in nodes_
  std::vector<std::vector<PortLink>> ports_;    ///< per position in nodes_, sorted by port
};

// Built-in shapes over node ids 1..n. Each node's ports are numbered from 0 in the order its
// links are added, so every node builds the same topology from the same shape. A shape with
// more than kMaxNodes nodes or kMaxLinks links comes back empty.

/** Every pair linked (Barrelfish's "direct"): pairs (i, j), i < j, in increasing order. */
Topology make_mesh(uint32_t n);
/** 1-2-3-...-n. */
Topology make_line(uint32_t n);
/** The line plus n linked to 1; for n < 3 (no ring without a double link), the line. */
Topology make_ring(uint32_t n);
/** Barrelfish's fat tree: nodes in consecutive groups of @p per_group ("sockets"), each
 *  group a full mesh whose first node is its leader, and the leaders a full mesh (added after
 *  the groups). Empty when @p per_group is 0. */
Topology make_fat_tree(uint32_t n, uint32_t per_group);

/**
 * Read a topology from text: one statement per line, `#` starts a comment, blank lines are
 * ignored. Statements: `node ID`; `link A:PA B:PB` (explicit ports); `link A B` (the lowest
 * free port on each side; the two forms mix); the built-ins `mesh N`, `line N`, `ring N`
 * (N >= 3), `fat-tree N PER_GROUP`, which add nodes 1..N and their links. IDs are
 * 1..2^32-2, ports 0..65535, N and PER_GROUP 1..kMaxNodes.
 *
 * Safe on any input: bounded by kMaxNodes and kMaxLinks, stops at the first error.
 * @param out set only on success.
 * @param err on failure (may be null): the line number, the statement and what is wrong,
 *        e.g. "line 3: link 1:0 9:0: no node 9".
 * @return 0, -EINVAL.
 */
int parse_topology(std::string_view text, Topology* out, std::string* err);

/** @return @p t in the explicit form (`node` lines, then `link A:PA B:PB` lines), which
 *  parse_topology() reads back to an equal topology. */
std::string format_topology(const Topology& t);

}  // namespace imago::rel::circ
