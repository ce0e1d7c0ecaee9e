/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The protocol settings a node runs with, in one place for every program that starts nodes
 * (imagod, the library through imago_attach_embedded(), imago-perf): the link MTU frames are
 * sized for, and the engine's modes and timers, starting from the fast-link preset
 * (reliability/config.h). The rows below are added to each program's option table, so the
 * options are spelled, checked and documented the same everywhere.
 */
#pragma once

#include <string>
#include <vector>

#include "dataplane/option_table.h"
#include "reliability/config.h"
#include "reliability/parity.h"

namespace imago::dp {

/** The fast-link preset with room for groups: 4 groups sent to and 16 (source, group)
 *  streams received at once (their windows are set aside when the node starts), each of
 *  4096 units: small messages take a unit each, and a window of 1024 held a group at one
 *  window per round trip (8 ms on a shared veth: 128 k messages/s). */
inline rel::Config node_preset() {
  rel::Config c = rel::fast_link_preset();
  c.group_sources = 4;
  c.group_streams = 16;
  c.group_window = 4096;
  return c;
}

struct ProtocolOptions {
  uint32_t mtu = 1500;                  ///< IP MTU the frames are sized for
  rel::Config engine = node_preset();  ///< modes and timers; identity and sizes are the node's
};

/** Check what single options cannot: the RTO bounds in order, above the ACK delay (a
 *  delayed ACK must not look like a loss), the first RTO within them. @return 0, or -EINVAL
 *  with the reason in @p err. */
int check_protocol(const ProtocolOptions& p, std::string* err);

/** @return the options that turn the defaults into @p p ("--mtu=9000", "--go-back-n", ...),
 *  to hand a node's settings to another program (imago-perf to the library). */
std::vector<std::string> protocol_args(const ProtocolOptions& p);
/** @return true when --@p name is one of the protocol rows. */
bool is_protocol_option(const std::string& name);

/** Add the protocol rows to @p t, over the member @p m of T: --mtu, --go-back-n,
 *  --no-flow-control, --no-delay-cap, --no-crc, --dead-after-ms, --ack-delay-us, --rto-min-us, --rto-max-ms,
 *  --group-sources, --group-streams, --group-window, --group-nack-backoff-us, --group-parity, --group-burst, --no-multicast,
 *  --group-expire-ms. */
template <typename T>
void add_protocol_rows(OptionTable<T>& t, ProtocolOptions T::*m) {
  using rel::kMs;
  using rel::kUs;
  auto flag = [m](const char* name, const char* help, bool rel::Config::*f, bool when_set) {
    return OptionRow<T>{name, nullptr, help, [=](T& o, const std::string&) { return (o.*m).engine.*f = when_set, true; },
                        [=](const T& o) { return std::string((o.*m).engine.*f == when_set ? "on" : "off"); }};
  };
  // A time option in @p unit (kUs or kMs) over a nanosecond field, within [lo, hi] units.
  auto time = [m](const char* name, const char* arg, const char* help, uint64_t rel::Config::*f, uint64_t unit,
                  uint64_t lo, uint64_t hi) {
    return OptionRow<T>{name, arg, help,
                        [=](T& o, const std::string& v) {
                          uint64_t n;
                          return parse_num<uint64_t>(v, n, lo, hi) && ((o.*m).engine.*f = n * unit, true);
                        },
                        [=](const T& o) { return std::to_string((o.*m).engine.*f / unit); }};
  };
  // A count of frames: 0 (off) or 2..@p hi (one frame makes no block and no run).
  auto frames = [m](const char* name, const char* help, uint32_t rel::Config::*f, uint32_t hi) {
    return OptionRow<T>{name, "FRAMES", help,
                        [=](T& o, const std::string& v) {
                          uint32_t& k = (o.*m).engine.*f;
                          return parse_num<uint32_t>(v, k, 0, hi) && k != 1;
                        },
                        [=](const T& o) { return std::to_string((o.*m).engine.*f); }};
  };
  t.push_back({"mtu", "BYTES", "IP MTU the frames are sized for, 576..9000 (net_af_packet: at most the interface's)",
               [m](T& o, const std::string& v) { return parse_num<uint32_t>(v, (o.*m).mtu, 576, 9000); },
               [m](const T& o) { return std::to_string((o.*m).mtu); }});
  t.push_back(flag("go-back-n", "Pupa's go-back-N instead of selective repeat", &rel::Config::selective_repeat, false));
  t.push_back(flag("no-flow-control", "switch the optimistic credits off", &rel::Config::flow_control, false));
  t.push_back(flag("no-delay-cap",
                   "after a loss, keep the whole window in flight instead of capping the frames in flight by the "
                   "queueing delay measured (docs/PROTOCOL.md 3.4.9)",
                   &rel::Config::delay_cap, false));
  t.push_back(flag("no-crc", "no CRC32C on frames (corruption then goes unseen)", &rel::Config::crc, false));
  t.push_back(time("dead-after-ms", "MS", "declare a peer dead after this much silence, 10..3600000",
                   &rel::Config::dead_after_ns, kMs, 10, 3'600'000));
  t.push_back(time("ack-delay-us", "US", "ACK timer: acknowledge this long after the first unacknowledged unit, 1..10000000",
                   &rel::Config::ack_delay_ns, kUs, 1, 10'000'000));
  t.push_back(time("rto-min-us", "US", "lower bound of the retransmission timeout (above --ack-delay-us), 1..60000000",
                   &rel::Config::rto_min_ns, kUs, 1, 60'000'000));
  t.push_back(time("rto-max-ms", "MS", "upper bound of the retransmission timeout (and of HELLO retries), 10..600000 (not below the first RTO, 10 ms)",
                   &rel::Config::rto_max_ns, kMs, 1, 600'000));
  auto count = [m](const char* name, const char* help, uint32_t rel::Config::*f, uint32_t hi) {
    return OptionRow<T>{name, "N", help,
                        [=](T& o, const std::string& v) { return parse_num<uint32_t>(v, (o.*m).engine.*f, 0, hi); },
                        [=](const T& o) { return std::to_string((o.*m).engine.*f); }};
  };
  t.push_back(count("group-sources", "groups this node may send to at once (imago_group_open with IMAGO_GROUP_SEND), 0..64",
                    &rel::Config::group_sources, 64));
  t.push_back(count("group-streams", "(source, group) streams this node may receive at once, 0..256",
                    &rel::Config::group_streams, 256));
  t.push_back({"send-window", "UNITS",
               "units (a frame's worth of bytes at most each) in flight or queued to each peer, and its receive "
               "slots, a power of two, 64..1048576; at least --max-message over a frame's payload",
               [m](T& o, const std::string& v) {
                 uint32_t w;
                 if (!parse_num<uint32_t>(v, w, 64, 1u << 20) || (w & (w - 1)) != 0) return false;
                 return (o.*m).engine.send_window = (o.*m).engine.recv_window = w, true;
               },
               [m](const T& o) { return std::to_string((o.*m).engine.send_window); }});
  t.push_back({"group-window", "UNITS",
               "units (a frame's worth of bytes at most each) a group stream holds on either side, a power of two, "
               "64..65536",
               [m](T& o, const std::string& v) {
                 uint32_t& w = (o.*m).engine.group_window;
                 return parse_num<uint32_t>(v, w, 64, 65536) && (w & (w - 1)) == 0;
               },
               [m](const T& o) { return std::to_string((o.*m).engine.group_window); }});
  t.push_back(time("group-nack-backoff-us", "US",
                   "a group member waits a random time up to this long before asking for a hole another's "
                   "repair may fill (NACK suppression; repairs then go to the group), 0..1000000",
                   &rel::Config::group_nack_backoff_ns, kUs, 0, 1'000'000));
  t.push_back({"group-parity", "auto|FRAMES",
               "a group source whose members lose between them 1.5 frames or more in a block sends an XOR parity "
               "frame per block, from which a member rebuilds one lost frame of it; auto: blocks of up to 64 frames, "
               "sized to the members' losses (1 % at 8 members: about 60, 5 %: 12); FRAMES: blocks of FRAMES, 2..64; 0: never",
               [m](T& o, const std::string& v) {
                 rel::Config& c = (o.*m).engine;
                 if (v == "auto") return c.group_parity_frames = rel::kParityMaxFrames, c.group_parity_fit = true;
                 c.group_parity_fit = false;
                 return parse_num<uint32_t>(v, c.group_parity_frames, 0, rel::kParityMaxFrames) &&
                        c.group_parity_frames != 1;
               },
               [m](const T& o) {
                 const rel::Config& c = (o.*m).engine;
                 return c.group_parity_fit && c.group_parity_frames != 0 ? std::string("auto")
                                                                         : std::to_string(c.group_parity_frames);
               }});
  t.push_back(frames("group-burst",
                     "a member's ask for FRAMES or more frames lost in a row (its queue overflowed) halves the frames "
                     "its group source keeps in flight; they grow back a frame a round and double every 50 ms without "
                     "another; 0: never (the default; 8 measured), else 2..1024; ACK streams only (a NACK stream never "
                     "waits for its members)",
                     &rel::Config::group_burst_frames, 1024));
  t.push_back(flag("no-multicast", "send group frames to each member by unicast instead of once to the group",
                   &rel::Config::group_multicast, false));
  t.push_back(time("group-expire-ms", "MS", "a group member that holds its source back this long is expired, 10..3600000",
                   &rel::Config::group_expire_ns, kMs, 10, 3'600'000));
  t.push_back(time("group-nack-hold-ms", "MS",
                   "a NACK-based group stream (IMAGO_GROUP_NACK) keeps a sent frame this long for repairs, "
                   "then frees it unacknowledged, 1..3600000",
                   &rel::Config::group_nack_hold_ns, kMs, 1, 3'600'000));
}

}  // namespace imago::dp
