// SPDX-License-Identifier: BSD-3-Clause
// Setting up a run through imago.h: which options mean something there, the library's command
// line, attaching, the endpoints, and the RESULT line. The traffic itself is api_traffic.cc.
#include "apps/perf/via_api.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>

#include "apps/common/signals.h"
#include "apps/perf/api_traffic.h"
#include "apps/perf/options.h"
#include "dataplane/eal.h"
#include "dataplane/fault_model.h"
#include "dataplane/protocol_options.h"

namespace imago::perf {
namespace {

// Options of the run itself, the same whichever way it goes.
const std::set<std::string> kRunOptions = {
    "mode", "pair", "role", "msgs", "size", "burst", "rate", "duration", "idle-timeout-ms",
    "ping-timeout-us", "hist-csv", "stats-period", "quiet", "via", "attach"};
// Options of the node, which the embedded library takes (and imagod, with --attach): they go
// to it in library_args().
const std::set<std::string> kNodeOptions = {"run-to-completion", "iface", "pmd", "vdev", "encap", "src-ip", "dst-ip",
                                            "peer", "peer-mac", "fault-rx", "seed", "auth-key"};

// Why an option of imago-perf's own engine path means nothing through the library, each its
// own reason (one reason for all named tx faults and rings to every option, an outside tester).
const char* no_meaning(const std::string& name) {
  static const std::pair<const char*, const char*> kWhy[] = {
      {"loss", "it drops frames on imago-perf's own tx path, which the library's nodes do not have; inject the "
               "loss on a receiving node instead: --fault-rx loss=P"},
      {"burst-loss", "it is a fault of imago-perf's own tx path; on a receiving node: --fault-rx burst=P"},
      {"reorder", "it is a fault of imago-perf's own tx path; on a receiving node: --fault-rx reorder=P"},
      {"dup", "it is a fault of imago-perf's own tx path; on a receiving node: --fault-rx dup=P"},
      {"corrupt", "it is a fault of imago-perf's own tx path; on a receiving node: --fault-rx corrupt=P"},
      {"delay-us", "it is a fault of imago-perf's own tx path; on a receiving node: --fault-rx delay-us=N"},
      {"fault-tx", "the library's nodes inject faults on receive only: give the spec as --fault-rx"},
      {"ring-size", "it sizes imago-perf's own net_ring pair; the library's --pair makes its own rings"},
      {"nb-desc", "it sizes imago-perf's own port queues; the library sizes its ports' queues itself"},
      {"lcores", "the library starts EAL itself on lcores 0-1 (this thread on 0, its engines on 1); for "
                 "others give EAL args: -l LIST ... --"},
      {"arrivals", "the library's receiving end keeps no arrival times: --hist-csv gives the delays' "
                   "histogram, RESULT.delay_us their percentiles (or run rate mode on the engine)"},
      {"udp-port", "the library's nodes always use UDP port 47000"},
      {"no-udp-csum", "the library's nodes always send UDP checksums"},
  };
  for (const auto& [n, why] : kWhy)
    if (name == n) return why;
  return "the library's nodes have no such setting";
}

std::string refusal_of(const std::string& name, bool attached) {
  if (attached && name == "run-to-completion")
    return "--run-to-completion drives an embedded library: with --attach the engines are imagod's, on its lcore";
  if (attached && (kNodeOptions.count(name) || dp::is_protocol_option(name)))
    return "with --attach the node is imagod's: give --" + name + " to imagod";
  if (kNodeOptions.count(name) || dp::is_protocol_option(name)) return "";
  return "--" + name + " has no meaning with --via api: " + no_meaning(name);
}

std::string shape_refusal(const Options& o, const dp::ArgSplit& args) {
  const Mode* m = find_mode(o.mode);
  if (m == nullptr || m->message_is_frame)
    return "--via api runs the reliable modes (stream, rate, echo, pingpong), not " + o.mode;
  if (o.interactive) return "--via api runs one batch (no -i)";
  bool attached = !o.attach.empty();
  if (attached && args.explicit_eal) return "with --attach the library starts EAL as imagod's secondary: no EAL args";
  if (o.pair && o.encap.kind == dp::Encap::Udp) return "--pair with --via api is Ethernet only (no --encap udp)";
  return "";
}

}  // namespace

std::string via_api_refusal(const Options& o, const dp::ArgSplit& args) {
  if (std::string why = shape_refusal(o, args); !why.empty()) return why;
  // Every option given, its default value too (as check_pointless(): `--loss 0` was taken).
  for (const std::string& name : given_options(args.app)) {
    if (kRunOptions.count(name)) continue;
    if (std::string why = refusal_of(name, !o.attach.empty()); !why.empty()) return why;
  }
  return "";
}

namespace {

// The imagod command line that gives the embedded library the nodes @p o describes.
std::vector<std::string> library_args(const Options& o, const dp::ArgSplit& args) {
  std::vector<std::string> v{args.prog};
  if (args.explicit_eal) {
    v.insert(v.end(), args.eal.begin(), args.eal.end());
    v.push_back("--");
  }
  if (o.pair) {
    v.push_back("--pair");
  } else {
    bool tx = o.role == "tx";
    std::string peer = std::to_string(tx ? kApiNodeB : kApiNodeA);
    const bool mac = o.encap.dst_mac != dp::EncapConfig{}.dst_mac;  // --peer-mac, or --peer ID@MAC
    if (o.encap.kind == dp::Encap::Udp) {
      v.insert(v.end(), {"--src-ip", dp::format_ipv4(o.encap.src_ip)});
      peer += "@" + dp::format_ipv4(o.encap.dst_ip);
      if (mac) peer += "@" + dp::format_mac(o.encap.dst_mac);  // the next hop's: a router's
    } else if (mac) {
      peer += "@" + dp::format_mac(o.encap.dst_mac);
    }
    v.insert(v.end(), {"--node-id", std::to_string(tx ? kApiNodeA : kApiNodeB), "--peer", peer});
  }
  if (!o.iface.empty()) v.insert(v.end(), {"--iface", o.iface, "--pmd", dp::iface_pmd_name(o.pmd)});
  if (!o.auth_key_file.empty()) v.insert(v.end(), {"--auth-key", o.auth_key_file});
  for (const std::string& d : o.vdevs) v.insert(v.end(), {"--vdev", d});
  if (std::string f = dp::format_fault_spec(o.fault_rx); f != "none") v.insert(v.end(), {"--fault-rx", f});
  for (const std::string& a : dp::protocol_args(o.protocol)) v.push_back(a);
  if (o.run_to_completion) v.push_back("--run-to-completion");
  return v;
}

int attach(const Options& o, const dp::ArgSplit& args, imago_t** im) {
  if (!o.attach.empty()) return imago_attach_secondary(o.attach.c_str(), im);
  std::vector<std::string> v = library_args(o, args);
  std::vector<char*> argv;
  for (std::string& s : v) argv.push_back(s.data());
  argv.push_back(nullptr);
  return imago_attach_embedded(static_cast<int>(v.size()), argv.data(), im);
}

// @return the index of node @p id in @p im, or -1.
int node_index(imago_t* im, uint64_t id) {
  for (unsigned i = 0; i < imago_node_count(im); ++i)
    if (imago_node_id(im, i) == id) return static_cast<int>(i);
  return -1;
}

int open_end(ApiRun& r, uint64_t self, uint64_t peer, ApiEnd& end) {
  end.node_index = node_index(r.im, self);
  if (end.node_index < 0) {
    std::fprintf(stderr, "imago-perf: no node %" PRIu64 " here (imago-perf's sender is node %" PRIu64
                 ", its receiver node %" PRIu64 ": start imagod with --node-id and --peer to match)\n",
                 self, kApiNodeA, kApiNodeB);
    return -ENODEV;
  }
  imago_ep_opts eo{};
  eo.local_node = self;
  if (int rc = imago_open(r.im, kApiEndpoint, peer, &eo, &end.ep); rc < 0) {
    std::fprintf(stderr, "imago-perf: imago_open(%s, node %" PRIu64 " -> %" PRIu64 "): %s\n", kApiEndpoint, self,
                 peer, strerror(-rc));
    return rc;
  }
  imago_node_stats_get(r.im, static_cast<unsigned>(end.node_index), &end.node_before);
  return 0;
}

// Open the ends this process runs: both when it has both nodes, else the one --role names.
int open_ends(ApiRun& r) {
  bool both = r.o.pair;
  if (both && imago_node_count(r.im) < 2) {
    std::fprintf(stderr, "imago-perf: imagod serves one node: give --role tx or rx (or run imagod --pair)\n");
    return -EINVAL;
  }
  if (both || r.o.role == "tx") {
    if (int rc = open_end(r, kApiNodeA, kApiNodeB, r.a); rc < 0) return rc;
  }
  if (both || r.o.role == "rx") {
    if (int rc = open_end(r, kApiNodeB, kApiNodeA, r.b); rc < 0) return rc;
  }
  return 0;
}

app::Json port_json(const imago_node_stats& d) {
  // The engine's view of the link: imagod's ports are not this process's to read.
  app::Json j;
  j.num("ipackets", d.frames_received + d.frames_rejected).num("opackets", d.frames_sent)
      .num("imissed", uint64_t{0}).num("ierrors", uint64_t{0}).str("source", "engine");
  return j;
}

app::Json ep_json(imago_ep_t* ep) {
  imago_ep_stats s{};
  imago_stats(ep, &s);
  app::Json j;
  j.num("msgs_sent", s.msgs_sent).num("msgs_received", s.msgs_received).num("tx_inline", s.tx_inline)
      .num("tx_pool", s.tx_pool).num("rx_inline", s.rx_inline).num("rx_pool", s.rx_pool).num("rx_mbuf", s.rx_mbuf).num("rx_rebuilt", s.rx_rebuilt)
      .num("tx_ring_full", s.tx_ring_full).num("rx_ring_full", s.rx_ring_full).num("rx_no_buffer", s.rx_no_buffer)
      .num("peer_deaths", s.peer_deaths).num("msgs_unconfirmed", s.msgs_unconfirmed);
  return j;
}

// The engine counters of each node here, counted during the run; the totals go in RESULT's
// retransmits, acks_sent, nacks_sent and decode_rejected, as imago-perf's engine path counts them.
void nodes_json(ApiRun& r, app::Json& res) {
  uint64_t retx = 0, acks = 0, nacks = 0, rejected = 0;
  imago_node_stats last{};
  for (ApiEnd* e : {&r.a, &r.b}) {
    if (!e->ep) continue;
    imago_node_stats d = node_delta(r, *e);
    retx += d.msgs_retransmitted, acks += d.acks_sent, nacks += d.nacks_sent, rejected += d.frames_rejected;
    app::Json j;
    j.num("msgs_sent", d.msgs_sent).num("msgs_received", d.msgs_received).num("msgs_retransmitted", d.msgs_retransmitted)
        .num("frames_sent", d.frames_sent).num("frames_received", d.frames_received)
        .num("frames_rejected", d.frames_rejected).num("acks_sent", d.acks_sent).num("nacks_sent", d.nacks_sent)
        .num("losses_detected", d.losses_detected).num("rto_expired", d.rto_expired)
        .num("msgs_by_ref", d.msgs_by_ref);
    res.obj("node_" + std::to_string(d.node), j);
    res.obj("ep_" + std::string(e == &r.a ? "A" : "B"), ep_json(e->ep));
    last = d;
  }
  res.num("retransmits", retx).num("acks_sent", acks).num("nacks_sent", nacks).num("decode_rejected", rejected);
  res.obj("port", port_json(last));
}

void report(ApiRun& r, app::Json& res) {
  const Options& o = r.o;
  if (r.timed_out) std::printf("Stopped after --duration %.1f s.\n", o.duration_s);
  if (dp::stop_requested()) std::printf("Stopped by a signal.\n");
  if (r.closed) std::printf("The endpoint was closed under the run (imagod gone, or it closed the endpoint).\n");
  res.str("mode", o.mode).str("shape", o.pair ? "pair" : "process").str("role", o.pair ? "pair" : o.role);
  res.str("via", "api").str("attach", o.attach.empty() ? "embedded" : "secondary")
      .boolean("run_to_completion", o.run_to_completion);
  res.num("size", uint64_t{o.size}).num("burst", uint64_t{o.burst});
  traffic_report(r, res);
  rte_delay_us_sleep(3000);  // a node snapshot published after the run's last message (1 ms apart)
  nodes_json(r, res);
  res.boolean("timed_out", r.timed_out).str("ended", r.ended ? r.ended : "signal");
}

}  // namespace

int run_via_api(const Options& o, const dp::ArgSplit& args) {
  ApiRun r;
  r.o = o;
  app::install_stop_signals();  // before attaching: a signal then ends the run cleanly
  if (int rc = attach(o, args, &r.im); rc < 0) {
    std::fprintf(stderr, "imago-perf: cannot attach (%s): %s%s\n", o.attach.empty() ? "embedded" : o.attach.c_str(),
                 strerror(-rc),
                 o.attach.empty() || rc != -EIO ? ""
                 : " (no imagod runs with that --file-prefix, or it runs with --no-huge: secondaries need hugepages)");
    return 1;
  }
  int rc = open_ends(r);
  if (rc == 0) rc = traffic_run(r);
  app::Json res;
  if (rc == 0) report(r, res);
  imago_detach(r.im);
  if (rc < 0) {
    std::fprintf(stderr, "imago-perf: failed: %s\n", strerror(-rc));
    return 1;
  }
  return print_result(res, r.output_failed);
}

}  // namespace imago::perf
