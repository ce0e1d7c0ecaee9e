// SPDX-License-Identifier: BSD-3-Clause
#include "api/options.h"

#include <rte_config.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>

#include "api/imago.h"
#include "dataplane/option_table.h"
#include "dataplane/protocol_options.h"

namespace imago::api {

namespace {

// An EAL file prefix that fits the runtime directory's socket paths (108 bytes with
// /var/run/dpdk/ and a process's mp_socket_PID_... behind it; EAL found out only after it
// took a hugepage) and names one directory.
bool prefix_ok(const std::string& v) {
  if (v.empty() || v.size() > 48) return false;
  for (char c : v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return v != "." && v != "..";
}

// Beyond this DPDK's pool sizes overflow (and no machine has the memory).
constexpr uint32_t kPoolBuffersMax = 1u << 24;

// Seconds the daemon turns into TSC cycles: bounded so that the product cannot overflow.
bool parse_seconds(const std::string& v, double& s) {
  constexpr double kTenYears = 315360000;
  return dp::parse_num(v, s) && s >= 0 && s <= kTenYears;
}

// An lcore id EAL could have (a larger one was only refused after EAL had started, exit 1).
const char* engine_lcore_help() {
  static const std::string h = "lcore running the engines, 0.." + std::to_string(RTE_MAX_LCORE - 1) +
                               " and one of EAL's -l (not with --run-to-completion) [first worker]";
  return h.c_str();
}

dp::OptionTable<RuntimeOptions> make_table() {
  dp::OptionTable<RuntimeOptions> t = {
      {"pair", nullptr, "two nodes, 1 and 2, over a crossed net_ring pair in this process",
       [](RuntimeOptions& o, const std::string&) { return o.pair = true; }},
      {"node-id", "ID", "this node's id, 1..4294967295 (a --topology node: ..4294967294) [1]",
       [](RuntimeOptions& o, const std::string& v) { return o.node_id_given = true, dp::parse_node_id(v, o.node_id); }},
      {"peer", "ID[@MAC|@IP|@IP@MAC]", "a peer node and its address (repeatable, at most 32); @IP@MAC: over UDP, a peer "
                                       "behind a router, MAC the next hop's [broadcast]",
       [](RuntimeOptions& o, const std::string& v) {
         PeerAddr p;
         return dp::parse_peer(v, p.id, p.mac, p.ip) && (o.peers.push_back(p), true);
       }},
      {"iface", "NAME", "a port on interface NAME through --pmd (default EAL args only)",
       [](RuntimeOptions& o, const std::string& v) { o.iface = v; return !v.empty(); }},
      {"pmd", "af_packet|af_xdp", "the PMD --iface opens: net_af_packet, or net_af_xdp (XDP on a veth: MTU at most 3000) [af_packet]",
       [](RuntimeOptions& o, const std::string& v) { return dp::parse_iface_pmd(v, o.pmd); }},
      {"vdev", "DEV", "an EAL --vdev (repeatable; default EAL args only)",
       [](RuntimeOptions& o, const std::string& v) { o.vdevs.push_back(v); return true; }},
      {"src-ip", "IP", "UDP/IPv4 encapsulation from this address [plain Ethernet]",
       [](RuntimeOptions& o, const std::string& v) { return dp::parse_ipv4(v, o.src_ip); }},
      {"iface-b", "NAME", "with --redundancy: network B's port on interface NAME through --pmd [the second port]",
       [](RuntimeOptions& o, const std::string& v) { o.iface_b = v; return !v.empty(); }},
      {"peer-b", "ID@MAC|ID@IP|ID@IP@MAC", "with --redundancy: a --peer's address on network B (repeatable) [broadcast]",
       [](RuntimeOptions& o, const std::string& v) {
         PeerAddr p;
         return dp::parse_peer(v, p.id, p.mac, p.ip) && (o.peers_b.push_back(p), true);
       }},
      {"src-ip-b", "IP", "with --redundancy and --src-ip: our address on network B",
       [](RuntimeOptions& o, const std::string& v) { return dp::parse_ipv4(v, o.src_ip_b); }},
      {"auth-key", "FILE", "cluster key (32 bytes or 64 hex digits) in FILE: tag every frame, drop frames "
                             "without a valid tag [none]",
       [](RuntimeOptions& o, const std::string& v) { return dp::auth_key_option(v, o.auth_key, "imago"); }},
      {"run-to-completion", nullptr, "embedded only: no engine lcore; the application drives its nodes from its own "
                                     "thread with imago_engine_poll() (one lcore in all, free to run on any CPU: EAL --lcores 0@(0-N))",
       [](RuntimeOptions& o, const std::string&) { return o.run_to_completion = true; }},
      {"engine-lcore", "N", engine_lcore_help(),
       [](RuntimeOptions& o, const std::string& v) { return dp::parse_num<unsigned>(v, o.engine_lcore, 0, RTE_MAX_LCORE - 1); }},
      {"pool-max", "BYTES", "largest message in the small pool tier, 49..2048 [512]",
       [](RuntimeOptions& o, const std::string& v) { return dp::parse_num(v, o.pool_max) && o.pool_max > IMAGO_MSG_INLINE_MAX && o.pool_max <= kFrameClass; }},
      {"max-message", "BYTES", "largest message, 1024..16777216 (16 MiB) [65536]",
       [](RuntimeOptions& o, const std::string& v) {
         return dp::parse_num(v, o.max_message) && o.max_message >= 1024 && o.max_message <= (16u << 20);
       }},
      {"pool-buffers", "N", "buffers in the pool tier, 64..16777216 [4096]",
       [](RuntimeOptions& o, const std::string& v) {
         return dp::parse_num(v, o.pool_buffers) && o.pool_buffers >= 64 && o.pool_buffers <= kPoolBuffersMax;
       }},
      {"loss", "P", "drop this fraction of received frames, 0..1 (testing; as --fault-rx loss=P, so not with --fault-rx) [0]",
       [](RuntimeOptions& o, const std::string& v) {
         return dp::parse_num(v, o.fault_rx.drop) && o.fault_rx.drop >= 0 && o.fault_rx.drop <= 1;
       }},
      {"fault-rx", "SPEC", "receive faults (testing): loss=P,burst=P,dup=P,corrupt=P,reorder=P (P: 0..1),"
                             "reorder-us=N,delay-us=N,jitter-us=N (N: 0..10000000 us),seed=N [none]",
       [](RuntimeOptions& o, const std::string& v) {
         std::string e;
         return dp::parse_fault_spec(v, o.fault_rx, e, &o.fault_rx_seed_given) == 0;
       }},
      {"seed", "N", "seed of the injected faults (each port adds its id), 0..18446744073709551615 (not with --fault-rx seed=N) [1]",
       [](RuntimeOptions& o, const std::string& v) { return dp::parse_num(v, o.fault_rx.seed); }},
      {"file-prefix", "NAME", "imagod: EAL prefix applications attach with, 1 to 48 of A-Z a-z 0-9 . _ - (ignored with --no-huge, which shares nothing: imago-PID) [imago]",
       [](RuntimeOptions& o, const std::string& v) { return prefix_ok(v) && (o.file_prefix = v, true); }},
      {"no-huge", nullptr, "imagod: no hugepages: the nodes run, but no application can attach (secondaries need hugepages)",
       [](RuntimeOptions& o, const std::string&) { return o.no_huge = true; }},
      {"stats-period", "SECONDS", "imagod: print counters this often, 0 never, at most 315360000 (10 years) [10]",
       [](RuntimeOptions& o, const std::string& v) { return parse_seconds(v, o.stats_period_s); }},
      {"duration", "SECONDS", "imagod: exit after this long, 0 never, at most 315360000 (10 years) [0]",
       [](RuntimeOptions& o, const std::string& v) { return parse_seconds(v, o.duration_s); }},
  };
  dp::add_protocol_rows(t, &RuntimeOptions::protocol);
  dp::add_redundancy_rows(t, &RuntimeOptions::redundancy);
  dp::add_fabric_rows(t, &RuntimeOptions::fabric);
  return t;
}

const dp::OptionTable<RuntimeOptions>& table() {
  static const dp::OptionTable<RuntimeOptions> t = make_table();
  return t;
}

// The largest message must fit in the send window (the engine refuses the node otherwise).
int check_send_window(const RuntimeOptions& o, std::string* err) {
  rel::Config c = o.protocol.engine;
  c.mtu = o.protocol.mtu - 46 - 16 - 20 - 12;  // the most any encapsulation, tag, shim or circuit takes
  c.max_message_size = o.max_message + 4;
  const uint32_t cap = rel::unit_capacity(c);
  const uint64_t need = (c.max_message_size + cap - 1) / cap;
  if (need <= c.send_window) return 0;
  *err = "--send-window " + std::to_string(c.send_window) + " is too small for --max-message " +
         std::to_string(o.max_message) + ": give at least " + std::to_string(std::bit_ceil(need));
  return -EINVAL;
}

// A fabric node: plain Ethernet on its own ports, peers that are nodes of the topology.
int check_fabric_options(RuntimeOptions& o, std::string* err) {
  const dp::FabricOptions& f = o.fabric;
  if (f.specs > 1) return *err = "--topology given twice: one topology a node", -EINVAL;
  if (!f.on()) {
    if (f.show_routes) return *err = "--show-routes needs --topology", -EINVAL;
    if (f.link_set) return *err = "--link-hello-us and --link-miss need --topology", -EINVAL;
    return 0;
  }
  if (o.pair || o.redundancy.on || o.src_ip != 0 || !o.iface.empty())
    return *err = "--topology excludes --pair, --redundancy, --src-ip and --iface (its ports are the --vdevs, in "
                  "topology port order)", -EINVAL;
  // Read whole at start: a FIFO would hold the start until a writer came, a device might
  // never end. Only a regular file, as imago-cp (a shape such as line:3 names no file).
  if (struct stat st{}; ::stat(f.spec.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return *err = "--topology " + f.spec + ": not a regular file", -EINVAL;
  if (int rc = dp::check_fabric(o.fabric, o.node_id, err); rc < 0) return rc;
  for (const PeerAddr& p : o.peers) {
    if (p.id == o.node_id || p.id > rel::circ::kMaxNodeId || !f.topology.has_node(static_cast<rel::NodeId>(p.id)))
      return *err = "--peer " + std::to_string(p.id) + ": not another node of --topology " + f.spec, -EINVAL;
    if (p.mac != PeerAddr{}.mac || p.ip != 0 || p.mac_b != PeerAddr{}.mac_b || p.ip_b != 0)
      return *err = "--peer " + std::to_string(p.id) + ": a fabric node's peers are reached over circuits, by id "
                    "alone: give --peer " + std::to_string(p.id), -EINVAL;
  }
  return 0;
}

}  // namespace

namespace {

// A peer in our own name, or two peers at one address (frames from it would be taken for
// either): refused. Over UDP peers are told apart by IP (two behind one router share a MAC).
int check_peer_addresses(const RuntimeOptions& o, std::string* err) {
  if (o.peers.size() > IMAGO_PEERS_MAX)
    return *err = "--peer given " + std::to_string(o.peers.size()) + " times: a node takes at most " +
                  std::to_string(IMAGO_PEERS_MAX) + " peers", -EINVAL;
  const dp::MacAddr none{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  for (size_t i = 0; i < o.peers.size(); ++i) {
    const PeerAddr& p = o.peers[i];
    if (p.id == o.node_id)
      return *err = "--peer " + std::to_string(p.id) + " is this node's own id (--node-id)", -EINVAL;
    const bool a_unencapsulated = p.ip != 0 && o.src_ip == 0;
    if (a_unencapsulated || (p.ip_b != 0 && o.src_ip_b == 0))
      return *err = std::string(a_unencapsulated ? "--peer " : "--peer-b ") + std::to_string(p.id) +
                    "@IP needs --src-ip" + (a_unencapsulated ? "" : "-b") +
                    " (addresses are for the UDP encapsulation; on Ethernet give ID@MAC)", -EINVAL;
    for (size_t j = 0; j < i; ++j) {
      const PeerAddr& q = o.peers[j];
      const bool same = p.ip != 0 ? p.ip == q.ip : q.ip == 0 && p.mac != none && p.mac == q.mac;
      if (same)
        return *err = "--peer " + std::to_string(p.id) + " and --peer " + std::to_string(q.id) +
                      " have the same address (frames from it would be either's)", -EINVAL;
    }
  }
  return 0;
}

}  // namespace

namespace {

// Two options that set one thing: the last one given was taken without a word (an outside
// tester: --loss 0.5 --fault-rx loss=0.1). And --pmd, which only chooses what opens --iface.
int check_overlaps(const std::vector<std::string>& given, const RuntimeOptions& o, std::string* err) {
  auto has = [&](const char* n) { return std::find(given.begin(), given.end(), n) != given.end(); };
  if (has("loss") && has("fault-rx"))
    return *err = "--loss P is --fault-rx loss=P: with --fault-rx, give the loss in it", -EINVAL;
  if (has("seed") && o.fault_rx_seed_given)
    return *err = "--seed and --fault-rx seed=N both set the faults' seed: give it once", -EINVAL;
  if (has("pmd") && o.iface.empty() && o.iface_b.empty())
    return *err = "--pmd chooses what opens --iface (and --iface-b): give --iface", -EINVAL;
  return 0;
}

// An error quotes what it was given, a file's bytes too (a binary --topology file):
// control and non-ASCII bytes are written as \xNN, never sent to a terminal raw.
std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char b[5];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      out += b;
    }
  }
  return out;
}

int parse_and_check(const std::vector<std::string>& args, RuntimeOptions& o, std::string* err) {
  if (int rc = dp::parse_option_table(table(), args, o, err); rc != 0) return rc;
  const std::vector<std::string> given = dp::given_options(table(), args);
  if (int rc = dp::refuse_repeats(table(), given, {"peer", "peer-b", "vdev"}, err); rc < 0) return rc;
  if (int rc = check_overlaps(given, o, err); rc < 0) return rc;
  if (o.run_to_completion && std::find(given.begin(), given.end(), "engine-lcore") != given.end())
    return *err = "--engine-lcore: --run-to-completion runs no engine lcore (the application's thread polls)", -EINVAL;
  const bool b_opts = !o.iface_b.empty() || !o.peers_b.empty() || o.src_ip_b != 0;
  if (b_opts && !o.redundancy.on) return *err = "--iface-b, --peer-b and --src-ip-b need --redundancy MODE", -EINVAL;
  if (int rc = dp::check_redundancy(o.redundancy, err); rc < 0) return rc;
  if (o.redundancy.on && o.src_ip != 0 && o.src_ip_b == 0 && !o.pair)
    return *err = "--redundancy with --src-ip needs --src-ip-b (our address on network B)", -EINVAL;
  if (o.src_ip_b != 0 && o.src_ip == 0)
    return *err = "--src-ip-b needs --src-ip (addresses are for the UDP encapsulation)", -EINVAL;
  if (!o.iface.empty() && o.iface == o.iface_b)
    return *err = "--iface-b " + o.iface_b + " is network A's interface too: network B needs one of its own", -EINVAL;
  for (const std::vector<PeerAddr>* list : {&o.peers, &o.peers_b})
    for (size_t i = 0; i < list->size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if ((*list)[i].id == (*list)[j].id)
          return *err = std::string(list == &o.peers ? "--peer " : "--peer-b ") + std::to_string((*list)[i].id) +
                        " given twice", -EINVAL;
  for (PeerAddr& p : o.peers_b) {
    PeerAddr* a = nullptr;
    for (PeerAddr& q : o.peers) a = q.id == p.id ? &q : a;
    if (a == nullptr) return *err = "--peer-b " + std::to_string(p.id) + ": no --peer " + std::to_string(p.id), -EINVAL;
    a->mac_b = p.mac, a->ip_b = p.ip;
  }
  // --pair makes its own two nodes and their ports: what names another node or port would be
  // silently ignored (or open a port nothing uses).
  if (o.pair && (o.node_id_given || !o.peers.empty() || !o.iface.empty()))
    return *err = "--pair excludes --node-id, --peer and --iface (it runs nodes 1 and 2 over its own net_ring pair)",
           -EINVAL;
  if (int rc = check_peer_addresses(o, err); rc < 0) return rc;
  if (int rc = check_fabric_options(o, err); rc < 0) return rc;
  // On the command line, not once EAL and the port are up (imagod exited 1, "failed to start").
  if (!o.pair && !o.fabric.on() && o.peers.empty())
    return *err = "node " + std::to_string(o.node_id) + " needs at least one --peer ID@MAC|ID@IP|ID@IP@MAC", -EINVAL;
  if (int rc = check_send_window(o, err); rc < 0) return rc;
  return dp::check_protocol(o.protocol, err);
}

}  // namespace

int parse_runtime_options(const std::vector<std::string>& args, RuntimeOptions& o, std::string* err) {
  const int rc = parse_and_check(args, o, err);
  if (rc < 0) *err = printable(*err);
  return rc;
}

void print_runtime_options(FILE* f) { dp::print_option_table(f, table(), RuntimeOptions{}); }

}  // namespace imago::api
