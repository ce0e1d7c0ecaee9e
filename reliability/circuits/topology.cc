/* SPDX-License-Identifier: BSD-3-Clause */
#include "reliability/circuits/topology.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <iterator>
#include <system_error>

namespace imago::rel::circ {

// ---- Topology ------------------------------------------------------------------------------

namespace {

/** Where port @p p is, or would go, in a node's sorted ports. */
auto port_slot(const std::vector<PortLink>& v, PortId p) {
  return std::lower_bound(v.begin(), v.end(), p,
                          [](const PortLink& pl, PortId q) { return pl.port < q; });
}

}  // namespace

int Topology::add_node(NodeId n) {
  if (!valid_node_id(n)) return -EINVAL;
  if (has_node(n)) return -EEXIST;
  if (nodes_.size() >= kMaxNodes) return -ENOSPC;
  index_.emplace(n, static_cast<uint32_t>(nodes_.size()));
  nodes_.push_back(n);
  ports_.emplace_back();
  return 0;
}

const PortLink* Topology::find_port(uint32_t index, PortId p) const {
  const auto& v = ports_[index];
  auto it = port_slot(v, p);
  return it != v.end() && it->port == p ? &*it : nullptr;
}

int Topology::add_link(NodeId a, PortId pa, NodeId b, PortId pb) {
  auto ia = index_.find(a), ib = index_.find(b);
  if (a == b || ia == index_.end() || ib == index_.end()) return -EINVAL;
  const PortLink* ua = find_port(ia->second, pa);
  const PortLink* ub = find_port(ib->second, pb);
  // One link on both ports, a != b: it joins a:pa and b:pb, the one asked for.
  if (ua && ub && ua->link == ub->link) return -EEXIST;
  if (ua || ub) return -EINVAL;
  if (links_.size() >= kMaxLinks) return -ENOSPC;
  const auto link = static_cast<uint32_t>(links_.size());
  links_.push_back({a, pa, b, pb});
  auto insert = [&](uint32_t at, PortId p, uint32_t peer) {
    auto& v = ports_[at];
    v.insert(port_slot(v, p), PortLink{p, link, peer});
  };
  insert(ia->second, pa, ib->second);
  insert(ib->second, pb, ia->second);
  return 0;
}

int Topology::add_link(NodeId a, NodeId b) {
  PortId pa = 0, pb = 0;
  int rc = next_free_port(a, &pa);
  if (rc == 0) rc = next_free_port(b, &pb);
  if (rc == -ENOENT) return -EINVAL;
  return rc != 0 ? rc : add_link(a, pa, b, pb);
}

int Topology::node_index(NodeId n) const {
  auto it = index_.find(n);
  return it == index_.end() ? -ENOENT : static_cast<int>(it->second);
}

std::span<const PortLink> Topology::ports(size_t index) const {
  if (index >= ports_.size()) return {};
  return ports_[index];
}

std::vector<std::pair<PortId, NodeId>> Topology::neighbours(NodeId n) const {
  std::vector<std::pair<PortId, NodeId>> out;
  int i = node_index(n);
  if (i < 0) return out;
  for (const PortLink& pl : ports_[i]) out.emplace_back(pl.port, nodes_[pl.peer]);
  return out;
}

int Topology::link_index(NodeId n, PortId p) const {
  int i = node_index(n);
  if (i < 0) return -ENOENT;
  const PortLink* pl = find_port(static_cast<uint32_t>(i), p);
  return pl ? static_cast<int>(pl->link) : -ENOENT;
}

int Topology::link_at(NodeId n, PortId p, Link* out) const {
  int l = link_index(n, p);
  if (l < 0) return l;
  *out = links_[l];
  return 0;
}

int Topology::next_free_port(NodeId n, PortId* out) const {
  int i = node_index(n);
  if (i < 0) return -ENOENT;
  uint32_t want = 0;  // ports are sorted: the first gap is the lowest free port
  for (const PortLink& pl : ports_[i]) {
    if (pl.port != want) break;
    ++want;
  }
  if (want > UINT16_MAX) return -ENOSPC;
  *out = static_cast<PortId>(want);
  return 0;
}

// ---- Built-in shapes -----------------------------------------------------------------------

namespace {

uint64_t pairs(uint64_t k) { return k < 2 ? 0 : k * (k - 1) / 2; }

bool fits(uint64_t nodes, uint64_t links) { return nodes <= kMaxNodes && links <= kMaxLinks; }

/** Nodes 1..n (n <= kMaxNodes). */
Topology with_nodes(uint32_t n) {
  Topology t;
  for (NodeId i = 1; i <= n; ++i) t.add_node(i);
  return t;
}

/** Link every pair of first, first + step, ... up to last (ids <= kMaxNodes: no overflow). */
void mesh_over(Topology* t, uint64_t first, uint64_t last, uint64_t step) {
  for (uint64_t i = first; i <= last; i += step)
    for (uint64_t j = i + step; j <= last; j += step)
      t->add_link(static_cast<NodeId>(i), static_cast<NodeId>(j));
}

}  // namespace

Topology make_mesh(uint32_t n) {
  if (!fits(n, pairs(n))) return {};
  Topology t = with_nodes(n);
  mesh_over(&t, 1, n, 1);
  return t;
}

Topology make_line(uint32_t n) {
  if (!fits(n, n)) return {};
  Topology t = with_nodes(n);
  for (NodeId i = 1; i < n; ++i) t.add_link(i, i + 1);
  return t;
}

Topology make_ring(uint32_t n) {
  Topology t = make_line(n);
  if (n >= 3 && !t.nodes().empty()) t.add_link(n, 1);
  return t;
}

Topology make_fat_tree(uint32_t n, uint32_t per_group) {
  if (per_group == 0 || n > kMaxNodes) return {};
  const uint64_t g = per_group, full = n / g, rest = n % g;
  const uint64_t leaders = full + (rest != 0);
  if (!fits(n, full * pairs(g) + pairs(rest) + pairs(leaders))) return {};
  Topology t = with_nodes(n);
  for (uint64_t first = 1; first <= n; first += g)
    mesh_over(&t, first, std::min<uint64_t>(n, first + g - 1), 1);
  mesh_over(&t, 1, n, g);
  return t;
}

// ---- Text form -----------------------------------------------------------------------------

namespace {

/** One statement's words: at most 3 (`fat-tree N PER_GROUP`); a few more are kept so the
 *  message can show them, a 6th is an error. */
struct Words {
  std::string_view w[5];
  size_t n = 0;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/** Split @p line (comment removed) into words; false when there are too many. */
bool split(std::string_view line, Words* out) {
  line = line.substr(0, line.find('#'));
  size_t i = 0;
  while (true) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size()) return true;
    size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (out->n == std::size(out->w)) return false;
    out->w[out->n++] = line.substr(i, j - i);
    i = j;
  }
}

/** @p s for a message: printable, and at most @p max characters. */
std::string shown(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

/** The statement as the message repeats it: its words, one space apart, shortened. */
std::string shown(const Words& w) {
  std::string s;
  for (size_t i = 0; i < w.n; ++i) {
    if (i != 0) s += ' ';
    s += shown(w.w[i], 24);  // not `" " + shown(..)`: GCC 12 -O3 takes that insert for an overlap
  }
  return s;
}

bool parse_uint(std::string_view s, uint64_t lo, uint64_t hi, uint64_t* out) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return false;
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool fail(std::string* why, std::string what) { return *why = std::move(what), false; }

bool parse_node_id(std::string_view s, NodeId* out, std::string* why) {
  uint64_t v = 0;
  if (!parse_uint(s, 1, kMaxNodeId, &v))
    return fail(why, "bad node id '" + shown(s, 24) + "' (1.." + std::to_string(kMaxNodeId) + ")");
  *out = static_cast<NodeId>(v);
  return true;
}

bool parse_count(std::string_view s, uint64_t lo, uint32_t* out, std::string* why) {
  uint64_t v = 0;
  if (!parse_uint(s, lo, kMaxNodes, &v))
    return fail(why, "bad count '" + shown(s, 24) + "' (" + std::to_string(lo) + ".." +
                         std::to_string(kMaxNodes) + ")");
  *out = static_cast<uint32_t>(v);
  return true;
}

/** Node @p n added, or why not. */
bool add_node(Topology* t, NodeId n, std::string* why) {
  int rc = t->add_node(n);
  if (rc == -EEXIST) return fail(why, "node " + std::to_string(n) + " exists");
  if (rc != 0) return fail(why, "more than " + std::to_string(kMaxNodes) + " nodes");
  return true;
}

/** Why add_link(l) returned @p rc. */
std::string link_error(const Topology& t, const Link& l, int rc) {
  auto node = [](NodeId n) { return "node " + std::to_string(n); };
  if (rc == -EEXIST) return "the link exists";
  if (rc == -ENOSPC) return "more than " + std::to_string(kMaxLinks) + " links";
  if (l.a == l.b) return "a link joins two different nodes";
  if (!t.has_node(l.a)) return "no " + node(l.a);
  if (!t.has_node(l.b)) return "no " + node(l.b);
  const bool at_a = t.link_index(l.a, l.pa) >= 0;
  return node(at_a ? l.a : l.b) + " port " + std::to_string(at_a ? l.pa : l.pb) + " in use";
}

bool add_link(Topology* t, const Link& l, std::string* why) {
  int rc = t->add_link(l.a, l.pa, l.b, l.pb);
  return rc == 0 || fail(why, link_error(*t, l, rc));
}

/** One side of a link statement, `ID` or `ID:PORT`; without a port, @p n's lowest free one. */
bool parse_end(const Topology& t, std::string_view s, NodeId* n, PortId* p, std::string* why) {
  const size_t colon = s.find(':');
  if (!parse_node_id(s.substr(0, colon), n, why)) return false;
  if (colon != std::string_view::npos) {
    uint64_t v = 0;
    if (!parse_uint(s.substr(colon + 1), 0, UINT16_MAX, &v))
      return fail(why, "bad port '" + shown(s.substr(colon + 1), 24) + "' (0..65535)");
    *p = static_cast<PortId>(v);
    return true;
  }
  int rc = t.next_free_port(*n, p);
  if (rc == -ENOENT) return fail(why, "no node " + std::to_string(*n));
  return rc == 0 || fail(why, "node " + std::to_string(*n) + " has no free port");
}

struct Statement;
using Run = bool (*)(const Statement& st, const Words& w, Topology* t, std::string* why);

/** A statement: its keyword, its arguments, and for a built-in shape how to make it. */
struct Statement {
  std::string_view name;
  std::string_view usage;
  size_t args;
  Run run;
  uint32_t min_n;                           ///< built-ins: the fewest nodes
  Topology (*make)(uint32_t n, uint32_t g); ///< built-ins: the shape
};

bool run_node(const Statement&, const Words& w, Topology* t, std::string* why) {
  NodeId n = 0;
  return parse_node_id(w.w[1], &n, why) && add_node(t, n, why);
}

bool run_link(const Statement&, const Words& w, Topology* t, std::string* why) {
  Link l{};
  // The sides are resolved one after the other: `link 1 1` picks one port twice, a self-link.
  return parse_end(*t, w.w[1], &l.a, &l.pa, why) && parse_end(*t, w.w[2], &l.b, &l.pb, why) &&
         add_link(t, l, why);
}

/** A built-in adds its nodes 1..N and its links, which cannot collide with what is there. */
bool run_shape(const Statement& st, const Words& w, Topology* t, std::string* why) {
  uint32_t n = 0, g = 0;
  if (!parse_count(w.w[1], st.min_n, &n, why)) return false;
  if (st.args == 2 && !parse_count(w.w[2], 1, &g, why)) return false;
  const Topology shape = st.make(n, g);
  if (shape.nodes().empty())
    return fail(why, "too large: more than " + std::to_string(kMaxLinks) + " links");
  for (NodeId id : shape.nodes())
    if (!add_node(t, id, why)) return false;
  for (const Link& l : shape.links())
    if (!add_link(t, l, why)) return false;
  return true;
}

constexpr Statement kStatements[] = {
    {"node", "node ID", 1, run_node, 0, nullptr},
    {"link", "link A[:PORT] B[:PORT]", 2, run_link, 0, nullptr},
    {"mesh", "mesh N", 1, run_shape, 1, [](uint32_t n, uint32_t) { return make_mesh(n); }},
    {"line", "line N", 1, run_shape, 1, [](uint32_t n, uint32_t) { return make_line(n); }},
    {"ring", "ring N", 1, run_shape, 3, [](uint32_t n, uint32_t) { return make_ring(n); }},
    {"fat-tree", "fat-tree N PER_GROUP", 2, run_shape, 1, make_fat_tree},
};

/** Carry out one statement @p w (not empty). */
bool run(const Words& w, Topology* t, std::string* why) {
  for (const Statement& st : kStatements) {
    if (st.name != w.w[0]) continue;
    if (w.n != st.args + 1) return fail(why, "usage: " + std::string(st.usage));
    return st.run(st, w, t, why);
  }
  return fail(why, "unknown statement '" + shown(w.w[0], 24) + "'");
}

}  // namespace

int parse_topology(std::string_view text, Topology* out, std::string* err) {
  Topology t;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    ++line_no;
    Words w;
    std::string why;
    const bool ok = split(line, &w) ? (w.n == 0 || run(w, &t, &why)) : fail(&why, "too many words");
    if (ok) continue;
    if (err) *err = "line " + std::to_string(line_no) + ": " + shown(w) + ": " + why;
    return -EINVAL;
  }
  *out = std::move(t);
  return 0;
}

std::string format_topology(const Topology& t) {
  std::string s;
  for (NodeId n : t.nodes()) s += "node " + std::to_string(n) + "\n";
  for (const Link& l : t.links())
    s += "link " + std::to_string(l.a) + ":" + std::to_string(l.pa) + " " + std::to_string(l.b) +
         ":" + std::to_string(l.pb) + "\n";
  return s;
}

}  // namespace imago::rel::circ
