// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "apps/common/output_file.h"
#include "apps/perf/raw_traffic.h"
#include "dataplane/auth.h"
#include "dataplane/option_table.h"

namespace imago::perf {
namespace {

using Opt = dp::OptionRow<Options>;

// A probability knob of the tx fault stage, e.g. --loss.
Opt fault_prob(const char* name, const char* help, double dp::FaultConfig::*field) {
  return {name, "P", help,
          [field](Options& o, const std::string& v) {
            double p;
            if (!dp::parse_num(v, p) || p < 0 || p > 1) return false;
            o.fault_tx.*field = p;
            return true;
          },
          [field](const Options& o) { return dp::format_num(o.fault_tx.*field); }};
}

Opt fault_spec(const char* name, const char* help, dp::FaultConfig Options::*stage) {
  return {name, "SPEC", help,
          [stage](Options& o, const std::string& v) {
            std::string err;
            bool seed = false;
            if (dp::parse_fault_spec(v, o.*stage, err, &seed) == 0) return o.spec_seed |= seed, true;
            std::fprintf(stderr, "imago-perf: %s\n", err.c_str());
            return false;
          },
          [stage](const Options& o) { return dp::format_fault_spec(o.*stage); }};
}

dp::OptionTable<Options> make_table() {
  dp::OptionTable<Options> t = {
      {"mode", "NAME", "perf mode (see the list of modes below)",
       [](Options& o, const std::string& v) { return find_mode(v) != nullptr && (o.mode = v, true); },
       [](const Options& o) { return o.mode; }},
      {"pair", nullptr, "two nodes in this process over a net_ring link (the embedded default)",
       [](Options& o, const std::string&) { return o.pair = true; },
       [](const Options& o) { return o.pair || o.role.empty() ? "on without --role" : "off"; }},
      {"role", "tx|rx", "one node in this process on port 0: the sender or the receiver",
       [](Options& o, const std::string& v) { return (v == "tx" || v == "rx") && (o.role = v, true); },
       [](const Options& o) { return o.role.empty() ? "-" : o.role; }},
      {"iface", "NAME", "without EAL args: run on Linux interface NAME (via --pmd)",
       [](Options& o, const std::string& v) { return !v.empty() && (o.iface = v, true); },
       [](const Options& o) { return o.iface.empty() ? "-" : o.iface; }},
      {"pmd", "af_packet|af_xdp", "the PMD --iface opens: net_af_packet, or net_af_xdp (XDP on a veth: MTU at most 3000)",
       [](Options& o, const std::string& v) { return dp::parse_iface_pmd(v, o.pmd); },
       [](const Options& o) { return std::string(dp::iface_pmd_name(o.pmd)); }},
      {"vdev", "DEV", "without EAL args: add an EAL --vdev (repeatable), e.g. net_memif0,role=server",
       [](Options& o, const std::string& v) { return o.vdevs.push_back(v), true; },
       [](const Options&) { return std::string("-"); }},
      {"lcores", "LIST", "without EAL args: EAL -l core list (default: all; tx 0 / rx 1 with --role)",
       [](Options& o, const std::string& v) { return o.lcores = v, true; },
       [](const Options& o) { return o.lcores.empty() ? "auto" : o.lcores; }},
      {"msgs", "N", "messages to send, 1 or more",
       [](Options& o, const std::string& v) { return dp::parse_num<uint64_t>(v, o.msgs, 1); },
       [](const Options& o) { return std::to_string(o.msgs); }},
      {"size", "BYTES", "message size in bytes, 16-65535 (raw modes: what fits one frame)",
       [](Options& o, const std::string& v) { return dp::parse_num<uint16_t>(v, o.size, 16, 65535); },
       [](const Options& o) { return std::to_string(o.size); }},
      {"burst", "N", "frames per rx/tx burst (1-512)",
       [](Options& o, const std::string& v) { return dp::parse_num<uint16_t>(v, o.burst, 1, 512); },
       [](const Options& o) { return std::to_string(o.burst); }},
      {"rate", "PPS", "pace the sender to PPS messages per second (0: as fast as possible; not the ping-pong modes); slots missed while its lcore was off the CPU are made up by one burst at most, so a loaded machine gets less",
       [](Options& o, const std::string& v) { return dp::parse_num<uint64_t>(v, o.rate_pps); },
       [](const Options& o) { return std::to_string(o.rate_pps); }},
      {"encap", "l2|udp", "link encapsulation: Ethernet 0x88B5, or UDP/IPv4",
       [](Options& o, const std::string& v) {
         if (v != "l2" && v != "udp") return false;
         o.encap.kind = v == "l2" ? dp::Encap::L2 : dp::Encap::Udp;
         return true;
       },
       [](const Options& o) { return o.encap.kind == dp::Encap::L2 ? "l2" : "udp"; }},
      {"udp-port", "PORT", "UDP port of the UDP encapsulation, 1..65535",
       [](Options& o, const std::string& v) { return dp::parse_num<uint16_t>(v, o.encap.udp_port, 1); },
       [](const Options& o) { return std::to_string(o.encap.udp_port); }},
      {"no-udp-csum", nullptr, "send UDP checksums as 0 (not computed)",
       [](Options& o, const std::string&) { return o.encap.udp_checksum = false, true; },
       [](const Options& o) { return o.encap.udp_checksum ? "computed" : "off"; }},
      {"src-ip", "A.B.C.D", "source IPv4 address (UDP encapsulation)",
       [](Options& o, const std::string& v) { return dp::parse_ipv4(v, o.encap.src_ip); },
       [](const Options& o) { return dp::format_ipv4(o.encap.src_ip); }},
      {"dst-ip", "A.B.C.D", "destination IPv4 address or multicast group (UDP encapsulation); reliable modes "
                            "take frames only from a unicast one",
       [](Options& o, const std::string& v) { return dp::parse_ipv4(v, o.encap.dst_ip); },
       [](const Options& o) { return dp::format_ipv4(o.encap.dst_ip); }},
      {"peer", "ID@MAC|ID@IP|ID@IP@MAC", "the other node and its address, as imagod's --peer: ID is 2 for --role tx, 1 "
                               "for rx; @MAC sets --peer-mac, @IP --dst-ip (@IP@MAC both: a peer behind a router, MAC the next hop's)",
       [](Options& o, const std::string& v) {
         dp::MacAddr mac = dp::kBroadcastMac;
         if (!dp::parse_peer(v, o.peer_id, mac, o.encap.dst_ip)) return false;
         if (mac != dp::kBroadcastMac) o.encap.dst_mac = o.peer_at_mac = mac;
         return true;
       },
       [](const Options& o) { return o.peer_id ? std::to_string(o.peer_id) : std::string("-"); }},
      {"peer-mac", "MAC", "destination MAC address; reliable modes take frames only from it (unless broadcast)",
       [](Options& o, const std::string& v) { return dp::parse_mac(v, o.peer_mac) && (o.encap.dst_mac = o.peer_mac, true); },
       [](const Options& o) { return dp::format_mac(o.encap.dst_mac); }},
      {"auth-key", "FILE", "cluster key (32 bytes or 64 hex digits) in FILE: tag every frame, drop frames "
                           "without a valid tag",
       [](Options& o, const std::string& v) {
         return dp::auth_key_option(v, o.encap.auth, "imago-perf") && (o.auth_key_file = v, true);
       },
       [](const Options& o) { return o.encap.auth ? "set" : "-"; }},
      {"duration", "SECONDS", "stop after this long whatever happened, above 0, at most 315360000 (10 years)",
       [](Options& o, const std::string& v) {
         return dp::parse_num(v, o.duration_s) && o.duration_s > 0 && o.duration_s <= kMaxSeconds;
       },
       [](const Options& o) { return dp::format_num(o.duration_s); }},
      {"idle-timeout-ms", "MS", "receiver: finish after this much silence once traffic began, 1..3600000",
       [](Options& o, const std::string& v) { return dp::parse_num<unsigned>(v, o.idle_timeout_ms, 1, 3'600'000); },
       [](const Options& o) { return std::to_string(o.idle_timeout_ms); }},
      {"ping-timeout-us", "US", "raw-pingpong: a reply later than this counts as lost, 1..60000000",
       [](Options& o, const std::string& v) { return dp::parse_num<uint64_t>(v, o.ping_timeout_us, 1, 60'000'000); },
       [](const Options& o) { return std::to_string(o.ping_timeout_us); }},
      {"hist-csv", "FILE", "pingpong, raw-pingpong, echo: the round trips', rate: the one-way delays' histogram (ns buckets) as CSV",
       [](Options& o, const std::string& v) { return !v.empty() && (o.hist_csv = v, true); },
       [](const Options& o) { return o.hist_csv.empty() ? "-" : o.hist_csv; }},
      {"arrivals", "FILE", "rate mode, receiver: write each message's arrival (unix_us) and one-way delay (delay_us) "
                           "as CSV, one line per message in delivery order",
       [](Options& o, const std::string& v) { return !v.empty() && (o.arrivals_csv = v, true); },
       [](const Options& o) { return o.arrivals_csv.empty() ? "-" : o.arrivals_csv; }},
      {"stats-period", "SECONDS", "print a stats line this often (0: off), at most 315360000 (10 years)",
       [](Options& o, const std::string& v) {
         return dp::parse_num(v, o.stats_period_s) && o.stats_period_s >= 0 && o.stats_period_s <= kMaxSeconds;
       },
       [](const Options& o) { return dp::format_num(o.stats_period_s); }},
      fault_prob("loss", "tx fault: drop each frame with probability P, 0..1 (--fault-tx loss=P)", &dp::FaultConfig::drop),
      fault_prob("burst-loss", "tx fault: Gilbert-Elliott P(good->bad), 0..1; bursts of ~4 frames (--fault-tx burst=P)",
                 &dp::FaultConfig::burst_enter),
      fault_prob("reorder", "tx fault: hold a frame back so later ones overtake it, 0..1 (--fault-tx reorder=P)",
                 &dp::FaultConfig::reorder),
      fault_prob("dup", "tx fault: send a frame twice, 0..1 (--fault-tx dup=P)", &dp::FaultConfig::dup),
      fault_prob("corrupt", "tx fault: flip one payload bit, 0..1 (--fault-tx corrupt=P)", &dp::FaultConfig::corrupt),
      {"delay-us", "US", "tx fault: delay every frame, 0..10000000 (--fault-tx delay-us=N)",
       [](Options& o, const std::string& v) { return dp::parse_num<uint32_t>(v, o.fault_tx.delay_us, 0, 10'000'000); },
       [](const Options& o) { return std::to_string(o.fault_tx.delay_us); }},
      {"seed", "N", "seed of the fault layer (both directions; not with a seed= in --fault-tx or --fault-rx)",
       [](Options& o, const std::string& v) {
         return dp::parse_num(v, o.fault_tx.seed) && (o.fault_rx.seed = o.fault_tx.seed + 1, true);
       },
       [](const Options& o) { return std::to_string(o.fault_tx.seed); }},
      fault_spec("fault-tx", "tx faults as key=value,... (loss burst dup corrupt reorder: 0..1; reorder-us "
                 "delay-us jitter-us: 0..10000000; seed); not with the tx fault options above", &Options::fault_tx),
      fault_spec("fault-rx", "rx faults, same keys as --fault-tx", &Options::fault_rx),
      {"ring-size", "N", "slots per net_ring direction of --pair, a power of two, 64..1048576",
       [](Options& o, const std::string& v) {
         return dp::parse_num<unsigned>(v, o.ring_size, 64, 1u << 20) && (o.ring_size & (o.ring_size - 1)) == 0;
       },
       [](const Options& o) { return std::to_string(o.ring_size); }},
      {"nb-desc", "N", "rx and tx descriptors per port queue, 64..8192",
       [](Options& o, const std::string& v) { return dp::parse_num<uint16_t>(v, o.nb_desc, 64, 8192); },
       [](const Options& o) { return std::to_string(o.nb_desc); }},
      {"interactive", nullptr, "a prompt (start, stop, show stats|peers|config, set, clear stats, quit); also -i",
       [](Options& o, const std::string&) { return o.interactive = true; },
       [](const Options& o) { return o.interactive ? "on" : "off"; }},
      {"via", "engine|api", "reliable modes: drive the engine directly, or go through imago.h endpoints "
                            "as an application does (the library embedded, or --attach)",
       [](Options& o, const std::string& v) { return (v == "engine" || v == "api") && (o.via_api = v == "api", true); },
       [](const Options& o) { return o.via_api ? "api" : "engine"; }},
      {"attach", "PREFIX", "with --via api: run as a secondary of the imagod started with --file-prefix PREFIX "
                           "(its nodes, its options) instead of embedding the library",
       [](Options& o, const std::string& v) { return !v.empty() && (o.attach = v, o.via_api = true); },
       [](const Options& o) { return o.attach.empty() ? "-" : o.attach; }},
      {"run-to-completion", nullptr, "with --via api, embedded: no engine lcore; this thread polls the nodes "
                                     "between its bursts (imago_engine_poll()), all on one lcore",
       [](Options& o, const std::string&) { return o.run_to_completion = true; },
       [](const Options& o) { return o.run_to_completion ? "on" : "off"; }},
      {"send-copy", nullptr, "stream and rate modes on the engine: copy every message into its frames, even where "
                             "the link sends large ones by reference (net_memif, net_af_packet: a message above "
                             "half a frame goes out of a buffer of its own; docs/PROTOCOL.md 3.4.1)",
       [](Options& o, const std::string&) { return o.send_copy = true; },
       [](const Options& o) { return o.send_copy ? "on" : "off"; }},
      {"quiet", nullptr, "no plain-words summary before the RESULT line",
       [](Options& o, const std::string&) { return o.verbose_summary = false, true; },
       [](const Options&) { return std::string("off"); }},
  };
  dp::add_protocol_rows(t, &Options::protocol);  // the reliable modes'
  t.push_back({"iface-b", "NAME", "with --redundancy and --role: network B's port on interface NAME (via --pmd)",
               [](Options& o, const std::string& v) { return !v.empty() && (o.iface_b = v, true); },
               [](const Options& o) { return o.iface_b.empty() ? "-" : o.iface_b; }});
  t.push_back({"peer-b", "ID@MAC|ID@IP", "with --redundancy: the other node's address on network B, as --peer",
               [](Options& o, const std::string& v) {
                 uint64_t id;
                 return dp::parse_peer(v, id, o.peer_mac_b, o.dst_ip_b) && id == (o.peer_id ? o.peer_id : id);
               },
               [](const Options& o) { return dp::format_mac(o.peer_mac_b); }});
  t.push_back({"src-ip-b", "A.B.C.D", "with --redundancy and UDP: our address on network B",
               [](Options& o, const std::string& v) { return dp::parse_ipv4(v, o.src_ip_b); },
               [](const Options& o) { return dp::format_ipv4(o.src_ip_b); }});
  dp::add_redundancy_rows(t, &Options::redundancy);
  return t;
}

const dp::OptionTable<Options>& table() {
  static const dp::OptionTable<Options> t = make_table();
  return t;
}

}  // namespace

namespace {

// What a mode needs, and the options only some modes use: refused as a bad line (exit 2).
int check_mode_options(const Options& opt, std::string& err) {
  const std::string& m = opt.mode;
  if (m == "rate" && opt.rate_pps == 0) err = "rate mode needs --rate PPS (messages per second)";
  if ((m == "rate" || m == "echo") && opt.size < kRawStampedSize)
    err = m + " mode needs --size " + std::to_string(kRawStampedSize) + " or more (room for a timestamp)";
  const bool histogram = m == "pingpong" || m == "raw-pingpong" || m == "echo" || m == "rate";
  if (!opt.hist_csv.empty() && !histogram)
    err = "--hist-csv: mode " + m + " has no histogram (pingpong, raw-pingpong, echo, rate)";
  // Written at the end of the run: one that cannot be is said now (a FIFO is not opened
  // yet: apps/common/output_file.h).
  else if (std::string why; !opt.hist_csv.empty() && !(why = app::check_output(opt.hist_csv)).empty())
    err = "--hist-csv " + opt.hist_csv + ": cannot write it: " + why;
  if (!opt.arrivals_csv.empty() && m != "rate") err = "--arrivals: rate mode only";
  else if (std::string why; !opt.arrivals_csv.empty() && !(why = app::check_output(opt.arrivals_csv)).empty())
    err = "--arrivals " + opt.arrivals_csv + ": cannot write it: " + why;
  return err.empty() ? 0 : -EINVAL;
}

// An option a run of this shape never reads: refused, not ignored (an outside tester found
// each taken silently). @return why, or "".
std::string pointless(const std::string& name, const Options& o) {
  const Mode* m = find_mode(o.mode);
  const bool pingpong = o.mode == "pingpong" || o.mode == "raw-pingpong";
  const bool udp_only = name == "src-ip" || name == "dst-ip" || name == "udp-port" || name == "no-udp-csum";
  if (name == "ping-timeout-us" && o.mode != "raw-pingpong")
    return "--ping-timeout-us: raw-pingpong mode only (the reliable modes lose no reply)";
  if (name == "rate" && pingpong) return "--rate: " + o.mode + " sends one message a round trip (nothing to pace)";
  if (name == "send-copy" && (o.via_api || (o.mode != "stream" && o.mode != "rate")))
    return "--send-copy: stream and rate modes on the engine only";
  if (m != nullptr && m->message_is_frame && dp::is_protocol_option(name))
    return "--" + name + ": mode " + o.mode + " sends bare frames, without the reliability protocol";
  if (udp_only && o.encap.kind != dp::Encap::Udp)
    return "--" + name + " is for --encap udp" + (name == "dst-ip" ? " (so is --peer ID@IP)" : "");
  if (name == "pmd" && o.iface.empty() && o.iface_b.empty()) return "--pmd chooses what opens --iface: give --iface";
  // Taken, --peer-mac made each node drop the other's frames as spoofed: every message lost.
  if ((name == "peer-mac" || name == "peer-b") && o.pair)
    return "--" + name + ": the peer of --pair is in this process, at its port's own address";
  return "";
}

// Every option @p args gives, its default value too (a value compared with the default let
// `--mode raw --mtu 1500` through, an outside tester).
int check_pointless(const Options& o, const std::vector<std::string>& args, std::string& err) {
  for (const std::string& name : given_options(args)) {
    const bool peer_ip = name == "peer" && o.encap.dst_ip != Options{}.encap.dst_ip;  // --peer ID@IP sets --dst-ip
    if (!(err = pointless(peer_ip ? "dst-ip" : name, o)).empty()) return -EINVAL;
  }
  return 0;
}

// Two options that set one thing: the last one given was taken without a word (--loss 0.5
// --fault-tx loss=0.1, --seed 3 --fault-rx seed=4).
int check_overlaps(const Options& o, const std::vector<std::string>& given, std::string& err) {
  auto has = [&](const std::string& n) { return std::find(given.begin(), given.end(), n) != given.end(); };
  // The tx fault options and the --fault-tx key each one is.
  static const std::pair<const char*, const char*> kTxKnobs[] = {
      {"loss", "loss"}, {"burst-loss", "burst"}, {"reorder", "reorder"}, {"dup", "dup"},
      {"corrupt", "corrupt"}, {"delay-us", "delay-us"}};
  for (const auto& [name, key] : kTxKnobs) {
    if (has(name) && has("fault-tx")) {
      err = std::string("--") + name + " is --fault-tx " + key + "=...: with --fault-tx, give every tx fault in it";
      return -EINVAL;
    }
  }
  if (has("seed") && o.spec_seed && (has("fault-tx") || has("fault-rx"))) {
    err = "--seed and a seed= in --fault-tx or --fault-rx both set the faults' seed: give it once";
    return -EINVAL;
  }
  return 0;
}

}  // namespace

int parse_options(const std::vector<std::string>& args, Options& opt, std::string& err) {
  std::vector<std::string> rest;
  for (const std::string& a : args) {
    if (a == "-i") {
      opt.interactive = true;  // testpmd's short form
    } else {
      rest.push_back(a);
    }
  }
  opt.spec_seed = false;  // this line's specs only (the prompt's `set` parses one option)
  if (int rc = dp::parse_option_table(table(), rest, opt, &err); rc != 0) return rc;
  const std::vector<std::string> given = given_options(rest);
  if (int rc = dp::refuse_repeats(table(), given, {"vdev"}, &err); rc < 0) return rc;
  if (int rc = check_overlaps(opt, given, err); rc < 0) return rc;
  if (int rc = dp::check_protocol(opt.protocol, &err); rc < 0) return rc;
  if (opt.pair && !opt.role.empty()) {
    err = "--pair and --role exclude each other";
    return -EINVAL;
  }
  if (!opt.pair && opt.role.empty()) opt.pair = true;  // the embedded default
  const bool b_opts = !opt.iface_b.empty() || opt.peer_mac_b != dp::kBroadcastMac || opt.dst_ip_b || opt.src_ip_b;
  if (b_opts && !opt.redundancy.on) {
    err = "--iface-b, --peer-b and --src-ip-b need --redundancy MODE";
    return -EINVAL;
  }
  if (int rc = dp::check_redundancy(opt.redundancy, &err); rc < 0) return rc;
  if (opt.redundancy.on && (find_mode(opt.mode)->message_is_frame || opt.via_api)) {
    err = "--redundancy runs the reliable modes on the engine (stream, rate, echo, pingpong; for the API "
          "path give --redundancy to imagod or the library)";
    return -EINVAL;
  }
  // As imagod: an outside tester found these taken here and refused there.
  if (!opt.iface.empty() && opt.iface == opt.iface_b) {
    err = "--iface-b " + opt.iface_b + " is network A's interface too: network B needs one of its own";
    return -EINVAL;
  }
  if (opt.src_ip_b && opt.encap.kind != dp::Encap::Udp) {
    err = "--src-ip-b needs --encap udp (addresses are for the UDP encapsulation)";
    return -EINVAL;
  }
  if (opt.redundancy.on && opt.encap.kind == dp::Encap::Udp && !opt.pair && (!opt.src_ip_b || !opt.dst_ip_b)) {
    err = "--redundancy with --encap udp needs --src-ip-b and --peer-b ID@IP (addresses on network B)";
    return -EINVAL;
  }
  if (opt.run_to_completion && !opt.via_api) {
    err = "--run-to-completion is a way to drive the library: give --via api too";
    return -EINVAL;
  }
  if (int rc = check_mode_options(opt, err); rc < 0) return rc;
  if (int rc = check_pointless(opt, rest, err); rc < 0) return rc;
  if (opt.peer_at_mac != dp::kBroadcastMac && opt.peer_mac != dp::kBroadcastMac && opt.peer_at_mac != opt.peer_mac) {
    err = "--peer ID@" + dp::format_mac(opt.peer_at_mac) + " and --peer-mac " + dp::format_mac(opt.peer_mac) +
          " name two addresses of one peer";
    return -EINVAL;
  }
  if (opt.peer_id && (opt.pair || opt.peer_id != (opt.role == "tx" ? 2u : 1u))) {
    err = "--peer: imago-perf's nodes are 1 (--role tx) and 2 (--role rx); the peer of " +
          (opt.pair ? std::string("--pair is in this process") : "--role " + opt.role + " is " +
                                                                    (opt.role == "tx" ? "2" : "1"));
    return -EINVAL;
  }
  return 0;
}

void print_usage(const char* prog) {
  std::printf(
      "Usage: %s [EAL args --] [options]\n\n"
      "imago-perf measures imago between two nodes. Without EAL args it starts EAL itself\n"
      "(no hugepages, no PCI) and, by default, runs two nodes in this process over a\n"
      "net_ring link (--pair). With --role tx|rx it runs one node on port 0, e.g. a\n"
      "net_af_packet vdev on a veth (--iface NAME) or net_memif.\n\n"
      "With --via api the reliable modes go through imago.h, as an application's messages do:\n"
      "endpoints named \"imago-perf\", their rings and buffer tiers, the engines on the library's\n"
      "engine lcore (EAL lcore 1) and this thread (lcore 0) the application of every end here,\n"
      "busy-polling. The library is embedded (--pair: nodes 1 and 2 in this process; --role tx|rx:\n"
      "node 1 or 2 on --iface/--vdev), or with --attach PREFIX this process is a secondary of that\n"
      "imagod (hugepages): both ends when it serves nodes 1 and 2 (imagod --pair), else the --role's\n"
      "(tx on node 1, rx on node 2). Node options (--iface, --pmd, --vdev, --encap, --src-ip,\n"
      "--dst-ip, --peer, --peer-mac, --fault-rx, --seed, --auth-key and the protocol options) go to\n"
      "the embedded library; with --attach they are imagod's. Options the library does not have\n"
      "(tx faults, --ring-size, --nb-desc, --lcores, --arrivals, --udp-port, --no-udp-csum, -i) are\n"
      "refused (exit 2), each with its reason. A sender alone finishes once its node has nothing\n"
      "in flight (imago_node_stats_get()); a receiver alone lingers 200 ms after the last frame\n"
      "(done too if the sender is declared dead once all came). Echo keeps at most 1024\n"
      "messages unanswered (both ends of a pair share the node's buffer pools).\n"
      "RESULT adds via, attach, ended (done, idle, duration, signal, closed, peer_dead, send_error;\n"
      "peer_dead and its flag: a death that ended the run, not one of a peer never heard, which the\n"
      "engines' deaths count and a receiver waits out),\n"
      "node_<id> (the engines' counters during the run), ep_A, ep_B.\n"
      "--run-to-completion (embedded) gives the library no engine lcore: this thread polls the\n"
      "nodes too (imago_engine_poll()), everything on lcore 0.\n\n"
      "Options (default in brackets):\n",
      prog);
  dp::print_option_table(stdout, table(), Options{});
  std::printf("\nModes:\n");
  for (const Mode* m = modes(); m->name; ++m) std::printf("  %-10s %s\n", m->name, m->help);
  std::printf(
      "\nThe last line of output is RESULT {json}: msgs_sent, msgs_delivered, lost, ...\n"
      "An option that takes a value may be given once (--vdev: as often as needed); a tx fault\n"
      "option (--loss ...) does not go with --fault-tx, nor --seed with a seed= in a spec.\n"
      "SIGINT, SIGTERM or SIGHUP ends a run early and cleanly (RESULT's ended: signal). A closed\n"
      "standard output (SIGPIPE is ignored) does not: the run goes to its end, then exits 1.\n"
      "Exit status: 0 once RESULT is printed, whatever the run found (judge it by RESULT's ended,\n"
      "peer_dead, lost, msgs_delivered); 1 when the run could not take place, or when RESULT or a\n"
      "file asked for (--hist-csv, --arrivals) could not be written (said on stderr; RESULT is\n"
      "still printed if it can be); 2 for a bad line.\n"
      "Example: %s --pair --mode raw --msgs 1000000 --size 64 --loss 0.1 --seed 7\n",
      prog);
}

std::vector<std::string> given_options(const std::vector<std::string>& args) { return dp::given_options(table(), args); }

std::vector<std::pair<std::string, std::string>> option_values(const Options& opt) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const Opt& o : table()) v.emplace_back(o.name, o.show(opt));
  return v;
}

}  // namespace imago::perf
