/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * How a node uses two networks (reliability/redundancy/), as options every program that
 * starts nodes spells the same way (imagod and the library, imago-perf): the mode, the
 * heartbeat and the failure rules. Which port is network B is each program's own option
 * (--iface-b, or the second port).
 */
#pragma once

#include <string>

#include "dataplane/option_table.h"
#include "reliability/redundancy/link_set.h"

namespace imago::dp {

struct RedundancyOptions {
  bool on = false;          ///< --redundancy given: the node has a second network
  rel::red::Config cfg;
  enum Given : uint8_t { kHealth = 1, kPingpongRun = 2, kFailback = 4 };
  uint8_t given = 0;        ///< which of the other options were given (Given bits)
};

/** Refuse what two-network options given cannot mean: any without --redundancy,
 *  --pingpong-run without ping-pong, --failback-ms without active-standby.
 *  @return 0, or -EINVAL with @p err set. */
int check_redundancy(const RedundancyOptions& r, std::string* err);

/** Add --redundancy, --heartbeat-us, --net-miss, --net-fail-threshold, --net-fail-window-ms,
 *  --net-heal-ms, --pingpong-run and --failback-ms to @p t, over the member @p m of T. */
template <typename T>
void add_redundancy_rows(OptionTable<T>& t, RedundancyOptions T::*m) {
  using rel::kMs;
  using rel::kUs;
  using G = RedundancyOptions::Given;
  auto time = [m](const char* name, const char* arg, const char* help, uint64_t* (*field)(rel::red::Config&),
                  uint64_t unit, uint64_t lo, uint64_t hi, G bit = G::kHealth) {
    return OptionRow<T>{name, arg, help,
                        [=](T& o, const std::string& v) {
                          uint64_t n;
                          (o.*m).given |= bit;
                          return parse_num<uint64_t>(v, n, lo, hi) && (*field((o.*m).cfg) = n * unit, true);
                        },
                        [=](const T& o) {
                          rel::red::Config c = (o.*m).cfg;
                          return std::to_string(*field(c) / unit);
                        }};
  };
  t.push_back({"redundancy", "MODE",
               "two networks (network B: --iface-b, or the second port): active-standby (traffic on A, B takes over "
               "when A fails), duplicate (every frame on both, the first copy kept), ping-pong (frames alternate); "
               "off: one network",
               [m](T& o, const std::string& v) {
                 if (v == "off") return (o.*m).on = false, true;  // what show() prints for one network
                 return rel::red::parse_mode(v.c_str(), &(o.*m).cfg.mode) && ((o.*m).on = true);
               },
               [m](const T& o) { return (o.*m).on ? std::string(rel::red::mode_name((o.*m).cfg.mode)) : std::string("off"); }});
  t.push_back(time("heartbeat-us", "US", "a heartbeat on each network to each peer this often, 50..1000000",
                   [](rel::red::Config& c) { return &c.health.heartbeat_ns; }, kUs, 50, 1'000'000));
  t.push_back({"net-miss", "N", "heartbeats a network lags the other by (and intervals it is silent for) to go down toward a peer, 2..1000",
               [m](T& o, const std::string& v) {
                 (o.*m).given |= G::kHealth;
                 return parse_num<uint32_t>(v, (o.*m).cfg.health.heartbeat_miss, 2, 1000);
               },
               [m](const T& o) { return std::to_string((o.*m).cfg.health.heartbeat_miss); }});
  t.push_back({"net-fail-threshold", "N",
               "failures (frames lost on a network, heartbeats missed) within --net-fail-window-ms that take it down, "
               "1..100000",
               [m](T& o, const std::string& v) {
                 (o.*m).given |= G::kHealth;
                 return parse_num<uint32_t>(v, (o.*m).cfg.health.fail_threshold, 1, 100000);
               },
               [m](const T& o) { return std::to_string((o.*m).cfg.health.fail_threshold); }});
  t.push_back(time("net-fail-window-ms", "MS", "the window failures are counted in, 1..3600000",
                   [](rel::red::Config& c) { return &c.health.fail_window_ns; }, kMs, 1, 3'600'000));
  t.push_back(time("net-heal-ms", "MS", "a network that went down is used again after it is healthy this long, 0..3600000",
                   [](rel::red::Config& c) { return &c.health.heal_ns; }, kMs, 0, 3'600'000));
  t.push_back({"pingpong-run", "N",
               "ping-pong: frames to a peer on one network before the other, 1..1024 (1: the seed's strict "
               "alternation; runs keep a PMD's bursts whole)",
               [m](T& o, const std::string& v) {
                 (o.*m).given |= G::kPingpongRun;
                 return parse_num<uint32_t>(v, (o.*m).cfg.pingpong_run, 1, 1024);
               },
               [m](const T& o) { return std::to_string((o.*m).cfg.pingpong_run); }});
  t.push_back(time("failback-ms", "MS",
                   "active-standby: traffic goes back to network A once it is healthy this long; 0: it stays on B",
                   [](rel::red::Config& c) { return &c.failback_ns; }, kMs, 0, 3'600'000, G::kFailback));
}

}  // namespace imago::dp
