// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/circuits/: the topology, its built-in shapes and text form, and
// the per-node routing tables multi-hop circuits follow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "reliability/circuits/routing.h"
#include "reliability/circuits/topology.h"
#include "reliability/rng.h"

namespace imago::rel::circ {
namespace {

constexpr uint32_t kFar = UINT32_MAX;  // no path

RoutingTable table_of(const Topology& t, NodeId self, const std::vector<bool>& dead = {}) {
  RoutingTable rt;
  rt.compute(t, self, dead);
  return rt;
}

/** The route from @p from to @p to; hops 0 when there is none. */
Route route(const Topology& t, NodeId from, NodeId to, const std::vector<bool>& dead = {}) {
  Route r{0, 0, 0};
  table_of(t, from, dead).lookup(to, &r);
  return r;
}

/** Dead links: the one on @p n's port @p p. */
std::vector<bool> kill(const Topology& t, NodeId n, PortId p) {
  std::vector<bool> dead(t.links().size());
  int l = t.link_index(n, p);
  EXPECT_GE(l, 0);
  if (l >= 0) dead[l] = true;
  return dead;
}

/** Reference hop counts between node indexes (Floyd-Warshall: slow, obviously right). */
std::vector<std::vector<uint32_t>> distances(const Topology& t, const std::vector<bool>& dead) {
  const size_t n = t.nodes().size();
  std::vector<std::vector<uint32_t>> d(n, std::vector<uint32_t>(n, kFar));
  for (size_t i = 0; i < n; ++i) d[i][i] = 0;
  for (size_t l = 0; l < t.links().size(); ++l) {
    if (l < dead.size() && dead[l]) continue;
    const auto a = t.node_index(t.links()[l].a), b = t.node_index(t.links()[l].b);
    d[a][b] = d[b][a] = 1;
  }
  for (size_t k = 0; k < n; ++k)
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        if (d[i][k] != kFar && d[k][j] != kFar) d[i][j] = std::min(d[i][j], d[i][k] + d[k][j]);
  return d;
}

/** Follow the tables from @p src to @p dst hop by hop over live links: exactly @p hops. */
::testing::AssertionResult follows(const Topology& t, const std::vector<RoutingTable>& tables,
                                   const std::vector<bool>& dead, NodeId src, NodeId dst,
                                   uint32_t hops) {
  auto fail = [] { return ::testing::AssertionFailure(); };
  NodeId at = src;
  uint32_t taken = 0;
  while (at != dst && taken <= t.nodes().size()) {
    Route r;
    if (!tables[t.node_index(at)].lookup(dst, &r))
      return fail() << "node " << at << " has no route to " << dst;
    const int l = t.link_index(at, r.port);
    if (l < 0 || (static_cast<size_t>(l) < dead.size() && dead[l]))
      return fail() << "node " << at << " port " << r.port << " is no live link";
    const Link& k = t.links()[l];
    if ((k.a == at ? k.b : k.a) != r.next)
      return fail() << "node " << at << " port " << r.port << " does not lead to " << r.next;
    at = r.next;
    ++taken;
  }
  if (at != dst || taken != hops)
    return fail() << src << " -> " << dst << ": " << taken << " hops, table says " << hops;
  return ::testing::AssertionSuccess();
}

/** Every node's table against the reference, and every route followed to its end. */
void expect_tables_agree(const Topology& t, const std::vector<bool>& dead) {
  std::vector<RoutingTable> tables;
  for (NodeId n : t.nodes()) tables.push_back(table_of(t, n, dead));
  const auto d = distances(t, dead);
  for (size_t i = 0; i < t.nodes().size(); ++i)
    for (size_t j = 0; j < t.nodes().size(); ++j) {
      const NodeId src = t.nodes()[i], dst = t.nodes()[j];
      Route r;
      const bool found = tables[i].lookup(dst, &r);
      if (i == j || d[i][j] == kFar) {
        EXPECT_FALSE(found) << src << " -> " << dst;
        continue;
      }
      ASSERT_TRUE(found) << src << " -> " << dst;
      EXPECT_EQ(r.hops, d[i][j]) << src << " -> " << dst;
      EXPECT_TRUE(follows(t, tables, dead, src, dst, r.hops));
    }
}

/** @p k distinct links of @p t, dead, drawn from @p seed. */
std::vector<bool> kill_random(const Topology& t, size_t k, uint64_t seed) {
  Rng rng(seed);
  std::vector<bool> dead(t.links().size());
  for (size_t killed = 0; killed < k;) {
    const size_t l = rng.below(dead.size());
    if (!dead[l]) dead[l] = true, ++killed;
  }
  return dead;
}

TEST(Topology, RefusesSelfLinksUnknownNodesAndPortConflicts) {
  // Do: three nodes, a link 1:0-2:0.
  Topology t;
  for (NodeId n : {1u, 2u, 3u}) ASSERT_EQ(t.add_node(n), 0);
  ASSERT_EQ(t.add_link(1, 0, 2, 0), 0);
  // Expect: the same link again, either way round, exists; other uses of its ports conflict.
  EXPECT_EQ(t.add_link(1, 0, 2, 0), -EEXIST);
  EXPECT_EQ(t.add_link(2, 0, 1, 0), -EEXIST);
  EXPECT_EQ(t.add_link(1, 0, 3, 0), -EINVAL);
  EXPECT_EQ(t.add_link(3, 0, 2, 0), -EINVAL);
  EXPECT_EQ(t.add_link(1, 1, 2, 0), -EINVAL);
  // Expect: self-links and unknown nodes are refused; a second, parallel link is fine.
  EXPECT_EQ(t.add_link(1, 1, 1, 2), -EINVAL);
  EXPECT_EQ(t.add_link(1, 1), -EINVAL);
  EXPECT_EQ(t.add_link(1, 1, 9, 0), -EINVAL);
  EXPECT_EQ(t.add_link(9, 1), -EINVAL);
  EXPECT_EQ(t.add_link(1, 1, 2, 1), 0);
  EXPECT_EQ(t.links().size(), 2u);
  // Expect: node ids are checked, once.
  EXPECT_EQ(t.add_node(1), -EEXIST);
  EXPECT_EQ(t.add_node(0), -EINVAL);
  EXPECT_EQ(t.add_node(UINT32_MAX), -EINVAL);
  EXPECT_EQ(t.add_node(kMaxNodeId), 0);
}

TEST(Topology, AutoPortsFillTheLowestGapAndNeighboursAreSortedByPort) {
  // Do: node 1 uses port 1 explicitly, then two links on free ports.
  Topology t;
  for (NodeId n : {1u, 2u, 3u, 4u}) ASSERT_EQ(t.add_node(n), 0);
  ASSERT_EQ(t.add_link(1, 1, 2, 0), 0);
  ASSERT_EQ(t.add_link(1, 3), 0);
  ASSERT_EQ(t.add_link(1, 4), 0);
  // Expect: ports 0 and 2 were taken, and the neighbours come in port order.
  using NB = std::vector<std::pair<PortId, NodeId>>;
  EXPECT_EQ(t.neighbours(1), (NB{{0, 3}, {1, 2}, {2, 4}}));
  EXPECT_EQ(t.neighbours(9), NB{});
  Link l;
  ASSERT_EQ(t.link_at(3, 0, &l), 0);
  EXPECT_EQ(l, (Link{1, 0, 3, 0}));
  EXPECT_EQ(t.link_at(3, 1, &l), -ENOENT);
  EXPECT_EQ(t.link_at(9, 0, &l), -ENOENT);
  EXPECT_EQ(t.link_index(1, 2), 2);
  PortId p = 99;
  EXPECT_EQ(t.next_free_port(1, &p), 0);
  EXPECT_EQ(p, 3);
  EXPECT_EQ(t.next_free_port(9, &p), -ENOENT);
}

TEST(Topology, StaysWithinItsBounds) {
  // Do: fill the node table.
  Topology t;
  for (NodeId n = 1; n <= kMaxNodes; ++n) ASSERT_EQ(t.add_node(n), 0);
  // Expect: one more is refused; shapes over the limits come back empty.
  EXPECT_EQ(t.add_node(kMaxNodes + 1), -ENOSPC);
  EXPECT_TRUE(make_mesh(363).nodes().empty()) << "65703 links";
  EXPECT_EQ(make_mesh(362).links().size(), 65341u);
  EXPECT_TRUE(make_line(kMaxNodes + 1).nodes().empty());
  EXPECT_TRUE(make_fat_tree(kMaxNodes, 1).nodes().empty()) << "4096 leaders in a mesh";
  EXPECT_TRUE(make_fat_tree(16, 0).nodes().empty());
  EXPECT_EQ(make_fat_tree(4, UINT32_MAX), make_mesh(4)) << "one group: a mesh";
}

TEST(Builtins, MeshReachesEveryNodeInOneHop) {
  // Do: a mesh of 6.
  const Topology t = make_mesh(6);
  ASSERT_EQ(t.links().size(), 15u);
  // Expect: from every node, every other one is its own next hop, 1 hop away.
  for (NodeId s : t.nodes()) {
    const RoutingTable rt = table_of(t, s);
    EXPECT_EQ(rt.reachable(), 5u);
    rt.for_each([&](NodeId dst, const Route& r) {
      EXPECT_EQ(r.next, dst);
      EXPECT_EQ(r.hops, 1u);
      Link l;
      ASSERT_EQ(t.link_at(s, r.port, &l), 0);
      EXPECT_TRUE(l.a == dst || l.b == dst);
    });
  }
}

TEST(Builtins, LineReachesItsFarEndViaPortZero) {
  // Do: the line 1..5, routes from node 1.
  const Topology t = make_line(5);
  const Route r = route(t, 1, 5);
  // Expect: 4 hops through node 2 on port 0.
  EXPECT_EQ(r.hops, 4u);
  EXPECT_EQ(r.port, 0);
  EXPECT_EQ(r.next, 2u);
}

TEST(Builtins, RingTakesTheShorterWayAndBreaksTiesOnTheLowestPort) {
  // Do: a ring of 8, routes from node 1 (port 0: node 2, port 1: node 8).
  const Topology t = make_ring(8);
  ASSERT_EQ(t.links().size(), 8u);
  const Route to5 = route(t, 1, 5), to7 = route(t, 1, 7);
  // Expect: 5 is 4 hops either way: port 0 wins; 7 is 2 hops through 8.
  EXPECT_EQ(to5.hops, 4u);
  EXPECT_EQ(to5.port, 0);
  EXPECT_EQ(to5.next, 2u);
  EXPECT_EQ(to7.hops, 2u);
  EXPECT_EQ(to7.port, 1);
  EXPECT_EQ(to7.next, 8u);
}

TEST(Builtins, FatTreeCrossesGroupsThroughTheLeaders) {
  // Do: 16 nodes in groups of 4 (leaders 1, 5, 9, 13).
  const Topology t = make_fat_tree(16, 4);
  ASSERT_EQ(t.links().size(), 4u * 6 + 6);
  using NB = std::vector<std::pair<PortId, NodeId>>;
  EXPECT_EQ(t.neighbours(5), (NB{{0, 6}, {1, 7}, {2, 8}, {3, 1}, {4, 9}, {5, 13}}));
  // Expect: non-leader 2 reaches non-leader 6 in 3 hops via its leader 1.
  const Route r = route(t, 2, 6);
  EXPECT_EQ(r.hops, 3u);
  EXPECT_EQ(r.next, 1u);
  EXPECT_EQ(r.port, 0);
  // Expect: its own group is 1 hop away, another leader 2.
  EXPECT_EQ(route(t, 2, 4).hops, 1u);
  EXPECT_EQ(route(t, 2, 13).hops, 2u);
}

TEST(DeadLinks, RingRoutesTheOtherWayRound) {
  // Do: a ring of 6; node 1's table, then again with link 1-2 dead.
  const Topology t = make_ring(6);
  RoutingTable rt;
  rt.compute(t, 1, {});
  Route r;
  ASSERT_TRUE(rt.lookup(2, &r));
  EXPECT_EQ(r.hops, 1u);
  rt.compute(t, 1, kill(t, 1, 0));
  // Expect: node 2 is now 5 hops away through node 6.
  ASSERT_TRUE(rt.lookup(2, &r));
  EXPECT_EQ(r.hops, 5u);
  EXPECT_EQ(r.next, 6u);
  EXPECT_EQ(r.port, 1);
  EXPECT_EQ(rt.reachable(), 5u);
}

TEST(DeadLinks, LineCutMakesTheFarSideUnreachable) {
  // Do: the line 1..5 with link 2-3 dead.
  const Topology t = make_line(5);
  const auto dead = kill(t, 2, 1);
  const RoutingTable one = table_of(t, 1, dead), five = table_of(t, 5, dead);
  // Expect: each side reaches its own side only.
  Route r;
  EXPECT_EQ(one.reachable(), 1u);
  EXPECT_TRUE(one.lookup(2, &r));
  for (NodeId far : {3u, 4u, 5u}) EXPECT_FALSE(one.lookup(far, &r)) << far;
  EXPECT_EQ(five.reachable(), 2u);
  EXPECT_FALSE(five.lookup(2, &r));
}

TEST(Routes, LookupRefusesSelfAndUnknownNodes) {
  // Do: tables on a line of 3, one for a node that is not in it.
  const Topology t = make_line(3);
  const RoutingTable rt = table_of(t, 1, std::vector<bool>(1, false));
  const RoutingTable stranger = table_of(t, 9);
  // Expect: no route to ourselves or to strangers; a stranger routes nowhere.
  Route r;
  EXPECT_FALSE(rt.lookup(1, &r));
  EXPECT_FALSE(rt.lookup(9, &r));
  EXPECT_EQ(rt.self(), 1u);
  EXPECT_EQ(stranger.reachable(), 0u);
  EXPECT_EQ(stranger.self(), 9u);
}

TEST(Routes, FormatShowsOneLinePerDestination) {
  // Do: node 1's table on a line of 3.
  const std::string s = format_routes(table_of(make_line(3), 1));
  // Expect: destinations in increasing order.
  EXPECT_EQ(s, "2 -> 2 via port 0 (1 hops)\n3 -> 2 via port 0 (2 hops)\n");
}

TEST(Parse, ReadsCommentsBlankLinesAndFreePorts) {
  // Do: a file with comments, blank lines, CRLF and tabs, links on explicit and free ports.
  const char* text =
      "# three nodes\n\n  node 1 \t# first\r\nnode 2\nnode 3\n"
      "link 1 2\nlink 1 3\nlink 2:5 3\n";
  Topology t;
  std::string err;
  ASSERT_EQ(parse_topology(text, &t, &err), 0) << err;
  // Expect: free ports are the lowest unused ones.
  EXPECT_EQ(t.nodes(), (std::vector<NodeId>{1, 2, 3}));
  EXPECT_EQ(t.links(), (std::vector<Link>{{1, 0, 2, 0}, {1, 1, 3, 0}, {2, 5, 3, 1}}));
}

TEST(Parse, BuiltinsMatchTheirFunctions) {
  // Do/Expect: each one-line built-in parses to its make_ function.
  Topology t;
  std::string err;
  ASSERT_EQ(parse_topology("mesh 5", &t, &err), 0) << err;
  EXPECT_EQ(t, make_mesh(5));
  ASSERT_EQ(parse_topology("line 5\n", &t, &err), 0) << err;
  EXPECT_EQ(t, make_line(5));
  ASSERT_EQ(parse_topology("ring 7", &t, &err), 0) << err;
  EXPECT_EQ(t, make_ring(7));
  ASSERT_EQ(parse_topology("fat-tree 16 4 # sockets", &t, &err), 0) << err;
  EXPECT_EQ(t, make_fat_tree(16, 4));
}

TEST(Parse, FormatRoundTrips) {
  // Do: a built-in with extra nodes and links, formatted and read back.
  Topology t, back;
  std::string err;
  const char* in = "ring 6\nnode 100\nlink 100 3\nlink 100:7 5:9\nnode 4294967294\n";
  ASSERT_EQ(parse_topology(in, &t, &err), 0) << err;
  const std::string text = format_topology(t);
  ASSERT_EQ(parse_topology(text, &back, &err), 0) << err;
  // Expect: the same topology, and the explicit form of it.
  EXPECT_EQ(back, t);
  EXPECT_NE(text.find("link 100:7 5:9\n"), std::string::npos) << text;
  EXPECT_EQ(format_topology(back), text);
  ASSERT_EQ(parse_topology(format_topology(make_fat_tree(16, 4)), &back, &err), 0) << err;
  EXPECT_EQ(back, make_fat_tree(16, 4));
}

TEST(Parse, NamesTheLineAndTheMissingNode) {
  // Do: a link to a node never declared.
  Topology t;
  t.add_node(42);
  std::string err;
  // Expect: -EINVAL, the message names line and node, and the output is left alone.
  EXPECT_EQ(parse_topology("node 1\nnode 2\nlink 1:0 9:0\n", &t, &err), -EINVAL);
  EXPECT_EQ(err, "line 3: link 1:0 9:0: no node 9");
  EXPECT_EQ(t.nodes(), std::vector<NodeId>{42});
  EXPECT_EQ(parse_topology("bogus", &t, nullptr), -EINVAL) << "no message wanted";
}

TEST(Parse, RefusesJunkWithTheLineNumber) {
  struct Case {
    std::string text;
    int line;
    const char* says;
  };
  const std::string two = "node 1\nnode 2\n";
  const Case cases[] = {
      {"node", 1, "usage: node ID"},
      {"node 0", 1, "bad node id"},
      {"node 4294967295", 1, "bad node id"},
      {"node -1", 1, "bad node id"},
      {"node +1", 1, "bad node id"},
      {"node 0x10", 1, "bad node id"},
      {"node 1.5", 1, "bad node id"},
      {"node 99999999999999999999999999", 1, "bad node id"},
      {"node 1 2", 1, "usage"},
      {"NODE 1", 1, "unknown statement 'NODE'"},
      {std::string("node\0 1", 7), 1, "unknown statement 'node?'"},
      {"\x01\x02\xff", 1, "unknown statement '?\?\?'"},
      {"a b c d e f", 1, "too many words"},
      {"node 1 # ok\nnode 1", 2, "node 1 exists"},
      {two + "link", 3, "usage: link"},
      {two + "link 1", 3, "usage"},
      {two + "link 1 2 3", 3, "usage"},
      {two + "link 1:0 2:", 3, "bad port ''"},
      {two + "link 1: 2:0", 3, "bad port"},
      {two + "link 1:65536 2:0", 3, "bad port '65536'"},
      {two + "link 1:-1 2:0", 3, "bad port"},
      {two + "link :0 2:0", 3, "bad node id"},
      {two + "link 1:0:0 2:0", 3, "bad port '0:0'"},
      {two + "link 1 9", 3, "no node 9"},
      {two + "link 1:0 1:1", 3, "two different nodes"},
      {two + "link 1 1", 3, "two different nodes"},
      {two + "link 1:0 2:0\nlink 2:0 1:0", 4, "the link exists"},
      {two + "node 3\nlink 1:0 2:0\nlink 3:0 2:0", 5, "node 2 port 0 in use"},
      {"mesh", 1, "usage: mesh N"},
      {"mesh 0", 1, "bad count"},
      {"mesh 4097", 1, "bad count"},
      {"mesh 100000000000000000000", 1, "bad count"},
      {"mesh 363", 1, "more than 65536 links"},
      {"ring 2", 1, "bad count '2' (3..4096)"},
      {"ring -3", 1, "bad count"},
      {"line 5 6", 1, "usage"},
      {"fat-tree 16", 1, "usage: fat-tree N PER_GROUP"},
      {"fat-tree 16 0", 1, "bad count"},
      {"fat-tree 16 4097", 1, "bad count"},
      {"fat-tree 4096 1", 1, "more than 65536 links"},
      {"mesh 4\n# then\nring 4", 3, "node 1 exists"},
      {"node 5000\nring 4096", 2, "more than 4096 nodes"},
  };
  for (const Case& c : cases) {
    // Do: parse the junk.
    Topology t;
    std::string err;
    // Expect: -EINVAL, the line number and what is wrong.
    EXPECT_EQ(parse_topology(c.text, &t, &err), -EINVAL) << c.text;
    EXPECT_EQ(err.rfind("line " + std::to_string(c.line) + ": ", 0), 0u) << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
  }
}

/** Hostile text of one of three kinds: raw bytes, a soup of the format's words, or lines
 *  shaped like statements (which often parse, so the round trip runs too). */
std::string random_input(Rng& rng, int kind) {
  static const char* const kWords[] = {
      "node", "link", "mesh", "line", "ring", "fat-tree", "#", "1", "2", "3", "7", "1:0", "2:1",
      "3:65535", "362", "4096", "65536", "-1", ":", "\n", " ", "\t", "99999999999",
      "4294967294", "\r\n", "x", "\x7f"};
  static const char* const kLines[] = {
      "node 1", "node 2", "node 3", "node 9", "link 1 2", "link 2:0 3:1", "link 1:0 9", "link 2 3",
      "ring 3", "mesh 4", "line 5", "fat-tree 6 2", "# comment", "", "node 4294967294"};
  const size_t len = rng.below(kind == 2 ? 6 : 200);
  std::string text;
  for (size_t k = 0; k < len; ++k) {
    if (kind == 0) {
      text += static_cast<char>(rng.below(256));
    } else if (kind == 1) {
      text += std::string(kWords[rng.below(std::size(kWords))]) + (rng.chance(0.5) ? " " : "");
    } else {
      text += std::string(kLines[rng.below(std::size(kLines))]) + "\n";
    }
  }
  return text;
}

TEST(Parse, SurvivesRandomInput) {
  Rng rng(20240611);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    // Do: parse a seeded hostile input.
    const std::string text = random_input(rng, i % 3);
    Topology t;
    std::string err;
    const int rc = parse_topology(text, &t, &err);
    // Expect: a topology that round-trips, or -EINVAL with a message.
    if (rc == 0) {
      Topology back;
      ASSERT_EQ(parse_topology(format_topology(t), &back, &err), 0) << err;
      EXPECT_EQ(back, t);
      parsed += !t.nodes().empty();
    } else {
      ASSERT_EQ(rc, -EINVAL);
      EXPECT_EQ(err.rfind("line ", 0), 0u) << err;
    }
  }
  // Expect: some inputs were topologies, so the round trip was exercised.
  EXPECT_GT(parsed, 50);
}

TEST(Tables, AgreeHopByHopOnA64NodeRing) {
  // Do/Expect: every pair, all links alive, then with 3 random links dead.
  const Topology t = make_ring(64);
  expect_tables_agree(t, {});
  expect_tables_agree(t, kill_random(t, 3, 7));
}

TEST(Tables, AgreeHopByHopOnA64NodeFatTree) {
  // Do/Expect: 64 nodes in groups of 8, all alive, then with 3 random links dead.
  const Topology t = make_fat_tree(64, 8);
  ASSERT_EQ(t.links().size(), 8u * 28 + 28);
  expect_tables_agree(t, {});
  expect_tables_agree(t, kill_random(t, 3, 11));
}

}  // namespace
}  // namespace imago::rel::circ
