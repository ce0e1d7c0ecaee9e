/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * How a node joins a multi-hop fabric (reliability/circuits/, dataplane/circuit_link.h), as
 * options every program that starts nodes spells the same way: the topology, the links'
 * keep-alive, and --show-routes. Topology port k is the node's k-th DPDK port.
 */
#pragma once

#include <string>

#include "dataplane/option_table.h"
#include "reliability/circuits/link_health.h"
#include "reliability/circuits/topology.h"

namespace imago::dp {

struct FabricOptions {
  std::string spec;               ///< --topology as given (empty: no fabric)
  rel::circ::Topology topology;   ///< read by check_fabric()
  rel::circ::LinkHealth::Config health;
  bool show_routes = false;
  uint32_t specs = 0;      ///< --topology given this many times (once at most)
  bool link_set = false;   ///< --link-hello-us or --link-miss given (with --topology only)
  bool on() const { return !spec.empty(); }
};

/**
 * Read a --topology value: `line:N`, `ring:N`, `mesh:N`, `fat-tree:N:PER_GROUP`, or the path of
 * a file in the text format of docs/PROTOCOL.md 3.10 (parse_topology()).
 * @return 0, or -EINVAL with what is wrong (the file's line among it) in @p err.
 */
int parse_topology_spec(const std::string& spec, rel::circ::Topology* out, std::string* err);

/** Read @p f.spec into @p f.topology and check it holds @p self. @return 0, -EINVAL (@p err). */
int check_fabric(FabricOptions& f, uint64_t self, std::string* err);

/** Ports a fabric node may have (CircuitLink::kMaxPorts). */
inline constexpr size_t kFabricMaxPorts = 16;

/** @return how many ports node @p self has in @p f's topology (check_fabric() first): its
 *  highest port number plus one. */
size_t fabric_ports(const FabricOptions& f, uint64_t self);

/** Add --topology, --show-routes, --link-hello-us and --link-miss to @p t, over member @p m of T. */
template <typename T>
void add_fabric_rows(OptionTable<T>& t, FabricOptions T::*m) {
  t.push_back({"topology", "SPEC",
               "a node of a multi-hop fabric: line:N, ring:N, mesh:N, fat-tree:N:PER_GROUP or a topology file; "
               "topology port k is the node's k-th port (--vdev order); --peer ID (an id alone, no address) is "
               "reached over a virtual circuit, and a node without --peer only forwards (a router) [none]",
               [m](T& o, const std::string& v) { return (o.*m).spec = v, ++(o.*m).specs, !v.empty(); },
               [m](const T& o) { return (o.*m).spec; }});
  t.push_back({"show-routes", nullptr,
               "with --topology: print the routing table at start and when a link changes (one per 10 s "
               "at most: a change within them comes when they end)",
               [m](T& o, const std::string&) { return (o.*m).show_routes = true; }});
  t.push_back({"link-hello-us", "US", "with --topology: a HELLO on every link this often, 10..1000000",
               [m](T& o, const std::string& v) {
                 uint64_t us;
                 (o.*m).link_set = true;
                 return parse_num<uint64_t>(v, us, 10, 1'000'000) && ((o.*m).health.hello_ns = us * 1000, true);
               },
               [m](const T& o) { return std::to_string((o.*m).health.hello_ns / 1000); }});
  t.push_back({"link-miss", "N", "with --topology: HELLOs a link sends unanswered (nothing received) before it is down, 2..10000",
               [m](T& o, const std::string& v) {
                 (o.*m).link_set = true;
                 return parse_num<uint32_t>(v, (o.*m).health.miss, 2, 10000);
               },
               [m](const T& o) { return std::to_string((o.*m).health.miss); }});
}

}  // namespace imago::dp
