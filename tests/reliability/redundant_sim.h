// SPDX-License-Identifier: BSD-3-Clause
// Seeds for the simulator's two-network runs (reliability/redundancy/): each seed picks a
// mode (active/standby, duplicate, ping-pong), the faults of each network, and what happens
// to them: one dies for good, both die and heal, one flaps, A dies then B dies as A comes
// back. Property (sim_property_test.cc): Cluster's, and while one network stays up, nothing
// is excused (no peer declared dead, nothing lost).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tests/reliability/sim_cluster.h"

namespace imago::sim {

inline const char* kNetSchedules[] = {"both-clean", "a-dies", "b-dies", "both-die-heal",
                                      "a-flaps",    "both-lossy", "a-dies-then-b"};
inline constexpr int kNetScheduleCount = 7;

/** @return true when schedule @p kind keeps one network up all along (nothing may be lost). */
inline bool one_network_always_up(int kind) { return kind != 3 && kind != 6; }

/** Draw a link set's timers and policies, in @p mode. */
inline void draw_link_set(Rng& r, rel::red::Mode mode, rel::red::Config* red) {
  red->mode = mode;
  red->health.heartbeat_ns = (200 + r.below(1800)) * 1000;  // 0.2 .. 2 ms
  red->health.heartbeat_miss = 2 + static_cast<uint32_t>(r.below(4));
  red->health.fail_threshold = 1 + static_cast<uint32_t>(r.below(5));
  red->health.fail_window_ns = (10 + r.below(200)) * rel::kMs;
  red->health.heal_ns = (1 + r.below(50)) * rel::kMs;
  red->failback_ns = r.chance(0.5) ? 0 : (1 + r.below(100)) * rel::kMs;
  red->pingpong_run = r.chance(0.5) ? 1 : 1 + static_cast<uint32_t>(r.below(32));
}

/**
 * Draw what schedule @p kind does to the two networks from @p t0 on: the drop windows of
 * network A (@p a) and B (@p b), and, when both are lossy, the faults @p lossy point to.
 */
inline void draw_net_schedule(Rng& r, int kind, uint64_t t0, std::vector<DropWindow>* a,
                              std::vector<DropWindow>* b, std::initializer_list<LinkFaults*> lossy) {
  constexpr uint64_t kForever = ~uint64_t{0} / 2;
  // A network that dies drops everything silently, or (a link down) refuses every frame.
  const bool refuse = r.chance(0.5);
  auto whole = [refuse](uint64_t from, uint64_t to) { return DropWindow{from, to, 0, 0, false, true, refuse}; };
  switch (kind) {
    case 0: break;
    case 1: a->push_back(whole(t0, kForever)); break;
    case 2: b->push_back(whole(t0, kForever)); break;
    case 3: {  // both down, then both back (sometimes after the peers were declared dead)
      const uint64_t len = r.chance(0.1) ? 3 * rel::kSec : r.below(500 * rel::kMs);
      a->push_back(whole(t0, t0 + len));
      b->push_back(whole(t0 + r.below(5 * rel::kMs), t0 + len + r.below(50 * rel::kMs)));
      break;
    }
    case 4: {  // A flaps: down and up every period
      const uint64_t period = (2 + r.below(100)) * rel::kMs;
      for (uint64_t t = t0; t < t0 + 2 * rel::kSec; t += 2 * period) a->push_back(whole(t, t + period));
      break;
    }
    case 5:  // both lossy, independently, with every other fault
      for (LinkFaults* f : lossy) {
        f->loss = r.uniform() * 0.1;
        f->burst_enter = r.uniform() * 0.005;
        f->reorder = r.uniform() * 0.1;
        f->dup = r.uniform() * 0.05;
        f->corrupt = r.uniform() * 0.02;
      }
      break;
    default: {  // A dies; later B dies as A comes back
      const uint64_t t1 = t0 + (5 + r.below(100)) * rel::kMs;
      a->push_back(whole(t0, t1));
      b->push_back(whole(t1, kForever));
      break;
    }
  }
}

inline Scenario make_redundant_scenario(uint64_t seed, uint64_t msgs, int* kind, rel::red::Mode* mode) {
  Rng r(mix(seed) ^ 0x2E7);
  Scenario sc;
  *kind = static_cast<int>(seed % kNetScheduleCount);
  *mode = static_cast<rel::red::Mode>(1 + (seed / kNetScheduleCount) % 3);
  sc.redundant = true;
  draw_link_set(r, *mode, &sc.red);
  sc.nodes = 2 + static_cast<uint32_t>(r.below(3));
  sc.msgs = msgs;
  rel::Config& c = sc.cfg;
  draw_engine_config(r, c);
  // Streams that last through the network faults (about 100 ms to 1 s).
  sc.max_burst = 1 + static_cast<uint32_t>(r.below(8));
  sc.app_gap_ns = 100'000 + r.below(900'000);
  for (LinkFaults* f : {&sc.faults, &sc.faults_b}) {
    f->delay_ns = 2'000 + r.below(50'000);
    f->jitter_ns = r.below(20'000);
  }
  const uint64_t t0 = 1 * rel::kMs + r.below(20 * rel::kMs);
  draw_net_schedule(r, *kind, t0, &sc.drops, &sc.drops_b, {&sc.faults, &sc.faults_b});
  c.crc = true;
  sc.hold_frames = Rng(mix(seed) ^ 0x401D).chance(0.5);
  return sc;
}

}  // namespace imago::sim
