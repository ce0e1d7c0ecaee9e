// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/option_table.h"

#include <arpa/inet.h>

#include "dataplane/protocol_options.h"

namespace imago::dp {

bool parse_ipv4(const std::string& s, uint32_t& out) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  out = ntohl(a.s_addr);
  return true;
}

bool parse_mac(const std::string& s, MacAddr& out) {
  unsigned v[6];
  char tail;
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6) return false;
  MacAddr m;
  for (int i = 0; i < 6; ++i) {
    if (v[i] > 0xFF) return false;
    m.b[i] = static_cast<uint8_t>(v[i]);
  }
  out = m;
  return true;
}

std::string format_num(double v) {
  char b[32];
  auto [end, ec] = std::to_chars(b, b + sizeof b, v);
  return ec == std::errc() ? std::string(b, end) : "?";
}

std::string format_ipv4(uint32_t ip) {
  char b[INET_ADDRSTRLEN];
  in_addr a{htonl(ip)};
  return inet_ntop(AF_INET, &a, b, sizeof b) ? b : "?";
}

bool parse_node_id(const std::string& s, uint64_t& id) { return parse_num<uint64_t>(s, id, 1, UINT32_MAX); }

bool parse_peer(const std::string& s, uint64_t& id, MacAddr& mac, uint32_t& ip) {
  const size_t at = s.find('@');
  if (!parse_node_id(s.substr(0, at), id)) return false;
  if (at == std::string::npos) return true;
  const std::string addr = s.substr(at + 1);
  // ID@IP@MAC: a peer known by its IP (UDP) whose frames go to MAC, the next hop's (a
  // router's), not to the broadcast MAC a router would not forward.
  if (const size_t at2 = addr.find('@'); at2 != std::string::npos)
    return parse_ipv4(addr.substr(0, at2), ip) && parse_mac(addr.substr(at2 + 1), mac);
  return addr.find(':') != std::string::npos ? parse_mac(addr, mac) : parse_ipv4(addr, ip);
}

std::string format_mac(const MacAddr& m) {
  char b[18];
  std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
  return b;
}

int check_protocol(const ProtocolOptions& p, std::string* err) {
  const rel::Config& c = p.engine;
  if (c.rto_min_ns > c.rto_max_ns) return *err = "--rto-min-us is above --rto-max-ms", -EINVAL;
  if (c.rto_initial_ns > c.rto_max_ns)
    return *err = "--rto-max-ms is below the first RTO (" + std::to_string(c.rto_initial_ns / rel::kMs) + " ms)", -EINVAL;
  if (c.rto_min_ns <= c.ack_delay_ns) return *err = "--rto-min-us must be above --ack-delay-us (a delayed ACK is no loss)", -EINVAL;
  return 0;
}

namespace {

struct ProtocolHolder {
  ProtocolOptions p;
};

const OptionTable<ProtocolHolder>& protocol_table() {
  static const OptionTable<ProtocolHolder> t = [] {
    OptionTable<ProtocolHolder> rows;
    add_protocol_rows(rows, &ProtocolHolder::p);
    return rows;
  }();
  return t;
}

}  // namespace

bool is_protocol_option(const std::string& name) { return find_option(protocol_table(), name) != nullptr; }

std::vector<std::string> protocol_args(const ProtocolOptions& p) {
  const ProtocolHolder now{p}, fresh{};
  std::vector<std::string> args;
  for (const OptionRow<ProtocolHolder>& r : protocol_table()) {
    std::string v = r.show(now);
    if (v == r.show(fresh)) continue;
    args.push_back(std::string("--") + r.name + (r.arg ? "=" + v : ""));  // a flag shows "on" when given
  }
  return args;
}

}  // namespace imago::dp
