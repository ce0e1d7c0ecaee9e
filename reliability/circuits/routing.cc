/* SPDX-License-Identifier: BSD-3-Clause */
#include "reliability/circuits/routing.h"

#include <algorithm>

namespace imago::rel::circ {

void RoutingTable::compute(const Topology& t, NodeId self, const std::vector<bool>& link_dead) {
  self_ = self;
  routes_.clear();
  known_.assign(t.nodes().begin(), t.nodes().end());
  std::sort(known_.begin(), known_.end());
  const int s = t.node_index(self);
  if (s < 0) return;
  constexpr uint32_t kUnseen = UINT32_MAX;
  const size_t n = t.nodes().size();
  std::vector<Route> first(n, Route{0, 0, kUnseen});  // per node index: first hop and hops
  std::vector<uint32_t> queue;
  queue.reserve(n);
  first[s].hops = 0;
  queue.push_back(static_cast<uint32_t>(s));
  // Ports are visited in increasing order, so each level of the queue is ordered by the port
  // of its first hop, and a node keeps the lowest first-hop port among its shortest paths.
  for (size_t head = 0; head < queue.size(); ++head) {
    const uint32_t u = queue[head];
    for (const PortLink& pl : t.ports(u)) {
      if (pl.link < link_dead.size() && link_dead[pl.link]) continue;
      Route& r = first[pl.peer];
      if (r.hops != kUnseen) continue;
      r = u == static_cast<uint32_t>(s) ? Route{t.nodes()[pl.peer], pl.port, 0} : first[u];
      r.hops = first[u].hops + 1;
      queue.push_back(pl.peer);
    }
  }
  routes_.reserve(queue.size() - 1);
  for (size_t i = 1; i < queue.size(); ++i)  // queue[0] is self
    routes_.emplace_back(t.nodes()[queue[i]], first[queue[i]]);
  std::sort(routes_.begin(), routes_.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  compute_others(t, static_cast<uint32_t>(s), link_dead);
}

namespace {

// Hops from node index @p from to every node over live links, never through @p self.
std::vector<uint32_t> hops_without(const Topology& t, uint32_t from, uint32_t self,
                                   const std::vector<bool>& link_dead) {
  std::vector<uint32_t> d(t.nodes().size(), UINT32_MAX);
  std::vector<uint32_t> queue{from};
  d[from] = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const uint32_t u = queue[head];
    for (const PortLink& pl : t.ports(u)) {
      if ((pl.link < link_dead.size() && link_dead[pl.link]) || pl.peer == self || d[pl.peer] != UINT32_MAX) continue;
      d[pl.peer] = d[u] + 1;
      queue.push_back(pl.peer);
    }
  }
  return d;
}

}  // namespace

// For each destination, the shortest way out of a port other than its route's (ties: the
// lowest port). O(ports x (nodes + links)): control path, when links change.
void RoutingTable::compute_others(const Topology& t, uint32_t s, const std::vector<bool>& link_dead) {
  others_.clear();
  for (const auto& r : routes_) others_.emplace_back(r.first, Route{0, 0, UINT32_MAX});
  for (const PortLink& pl : t.ports(s)) {
    if (pl.link < link_dead.size() && link_dead[pl.link]) continue;
    const std::vector<uint32_t> d = hops_without(t, pl.peer, s, link_dead);
    for (size_t i = 0; i < routes_.size(); ++i) {
      const int x = t.node_index(routes_[i].first);
      Route& o = others_[i].second;
      if (x < 0 || d[x] == UINT32_MAX || pl.port == routes_[i].second.port || d[x] + 1 >= o.hops) continue;
      o = Route{t.nodes()[pl.peer], pl.port, d[x] + 1};
    }
  }
}

bool RoutingTable::lookup_avoiding(NodeId dst, PortId avoid, Route* out) const {
  if (!lookup(dst, out)) return false;
  if (out->port != avoid) return true;
  auto it = std::lower_bound(others_.begin(), others_.end(), dst,
                             [](const auto& e, NodeId d) { return e.first < d; });
  if (it == others_.end() || it->first != dst || it->second.hops == UINT32_MAX) return false;
  *out = it->second;
  return true;
}

bool RoutingTable::lookup(NodeId dst, Route* out) const {
  auto it = std::lower_bound(routes_.begin(), routes_.end(), dst,
                             [](const auto& e, NodeId d) { return e.first < d; });
  if (it == routes_.end() || it->first != dst) return false;
  *out = it->second;
  return true;
}

std::string format_routes(const RoutingTable& rt) {
  std::string s;
  rt.for_each([&s](NodeId dst, const Route& r) {
    s += std::to_string(dst) + " -> " + std::to_string(r.next) + " via port " +
         std::to_string(r.port) + " (" + std::to_string(r.hops) + " hops)\n";
  });
  return s;
}

}  // namespace imago::rel::circ
