// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/fabric_options.h"

#include <cerrno>
#include <fstream>

namespace imago::dp {

namespace {

constexpr size_t kMaxFileBytes = 1 << 20;  // a topology of kMaxLinks links fits well within

}  // namespace

int parse_topology_spec(const std::string& spec, rel::circ::Topology* out, std::string* err) {
  // A built-in shape is its text statement with ':' for spaces: "fat-tree:8:4" -> "fat-tree 8 4".
  for (const char* shape : {"line:", "ring:", "mesh:", "fat-tree:"}) {
    if (spec.rfind(shape, 0) != 0) continue;
    std::string text = spec;
    for (char& c : text) c = c == ':' ? ' ' : c;
    std::string why;
    if (rel::circ::parse_topology(text, out, &why) == 0) return 0;
    *err = "--topology " + spec + ": " + why;
    return -EINVAL;
  }
  std::ifstream f(spec, std::ios::binary);
  if (!f) return *err = "--topology " + spec + ": no such shape (line:N, ring:N, mesh:N, fat-tree:N:G) or file", -EINVAL;
  std::string text(kMaxFileBytes + 1, '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  // A directory opens, and reads as nothing.
  if (f.bad() || (f.fail() && !f.eof()))
    return *err = "--topology " + spec + ": cannot read it (a directory, or not a readable file)", -EINVAL;
  text.resize(static_cast<size_t>(f.gcount()));
  if (text.size() > kMaxFileBytes) return *err = "--topology " + spec + ": larger than 1 MiB", -EINVAL;
  std::string why;
  if (rel::circ::parse_topology(text, out, &why) == 0) return 0;
  *err = "--topology " + spec + ": " + why;
  return -EINVAL;
}

int check_fabric(FabricOptions& f, uint64_t self, std::string* err) {
  if (!f.on()) return 0;
  if (int rc = parse_topology_spec(f.spec, &f.topology, err); rc < 0) return rc;
  if (self > rel::circ::kMaxNodeId || !f.topology.has_node(static_cast<rel::NodeId>(self))) {
    *err = "--topology " + f.spec + ": node " + std::to_string(self) + " (--node-id) is not in it";
    return -EINVAL;
  }
  if (const size_t n = fabric_ports(f, self); n == 0 || n > kFabricMaxPorts) {
    *err = "--topology " + f.spec + ": node " + std::to_string(self) + " has " + std::to_string(n) +
           " ports: a fabric node has 1 to " + std::to_string(kFabricMaxPorts);
    return -EINVAL;
  }
  return 0;
}

size_t fabric_ports(const FabricOptions& f, uint64_t self) {
  const rel::circ::Topology& t = f.topology;
  const auto used = t.ports(static_cast<size_t>(t.node_index(static_cast<rel::NodeId>(self))));
  return used.empty() ? 0 : used.back().port + 1u;
}

}  // namespace imago::dp
