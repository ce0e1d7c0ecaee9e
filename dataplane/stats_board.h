/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A node's engine as its lcore publishes it for readers elsewhere: rte_telemetry's thread,
 * imagod's statistics, applications in other processes (imago_node_stats_get()), imago-stat.
 * The engine is single-threaded and never stops for them: once a millisecond its lcore copies
 * the counters, the link's counters and each peer's view into the board under a sequence
 * lock, and a reader copies the board out, retrying while a copy was being written. The
 * board holds plain data only, so it can live in shared memory (imagod's secondaries read it).
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "dataplane/circuit_link.h"
#include "dataplane/engine_link.h"
#include "reliability/engine.h"

namespace imago::dp {

/** One peer on the board. */
struct PeerSnapshot {
  rel::PeerView view;
  rel::PeerCounters c;
};

/** What a reader gets: one consistent copy. */
struct NodeSnapshot {
  static constexpr unsigned kMaxPeers = 32;
  uint64_t node_id = 0;
  uint64_t published_tsc = 0;  ///< 0: never published
  uint64_t tsc_hz = 0;
  rel::PeerCounters total;     ///< Engine::total_counters(): every peer, and frames no peer claimed
  EngineLinkCounters link;
  rel::GroupCounters group;    ///< Engine::group_counters()
  uint32_t groups_leaving = 0;  ///< Engine::groups_leaving()
  uint32_t groups_closing = 0;  ///< Engine::groups_closing()
  uint32_t app_queued = 0;      ///< messages the node above the engine holds for it (BoardPublisher::app_queued)
  /** A node on two networks (reliability/redundancy/): its mode, network B's link, and each
   *  network's counters and state. */
  bool redundant = false;
  rel::red::Mode mode = rel::red::Mode::kDuplicate;
  EngineLinkCounters link_b;
  rel::red::NetCounters nets[rel::red::kMaxNets];
  uint64_t net_bad_shim = 0, net_not_peer = 0;
  /** A node of a multi-hop fabric (reliability/circuits/): its circuits, links and forwarding. */
  bool fabric = false;
  CircuitStats circ;
  uint32_t n_peers = 0;
  PeerSnapshot peers[kMaxPeers];
};

class StatsBoard {
 public:
  /** The writer (the lcore polling @p engine; nobody else): copy its state now. */
  void publish(uint64_t node_id, const rel::Engine& engine, const EngineLinkCounters& link, uint64_t now_tsc,
               const rel::red::LinkSet* set = nullptr, const EngineLinkCounters* link_b = nullptr,
               const CircuitStats* circ = nullptr, uint32_t app_queued = 0);
  /** Any thread or process: copy the board into @p out. @return false when no consistent
   *  copy could be had (the writer kept publishing; try again). */
  bool read(NodeSnapshot* out) const;

 private:
  std::atomic<uint32_t> seq_{0};  // odd while the writer copies
  NodeSnapshot snap_;
};

/** Call @p fn(name, value) for the networks of a node on two (@p s.redundant), each counter
 *  as "net_a_<name>" / "net_b_<name>", network B's link counters as "link_b_<name>". */
template <typename Fn>
void for_each_net_counter(const NodeSnapshot& s, Fn&& fn) {
  if (!s.redundant) return;
  for (uint8_t n = 0; n < rel::red::kMaxNets; ++n) {
    const std::string pre = n == 0 ? "net_a_" : "net_b_";
    rel::red::for_each_counter(s.nets[n], [&](const char* k, uint64_t v) { fn((pre + k).c_str(), v); });
  }
  fn("net_bad_shim", s.net_bad_shim), fn("net_not_peer", s.net_not_peer);
  for_each_counter(s.link_b, [&](const char* k, uint64_t v) { fn((std::string("link_b_") + k).c_str(), v); });
}

/** Call @p fn(name, value) for the node's group-stream counters (Engine::group_counters(),
 *  docs/PROTOCOL.md 3.7.3 and 3.7.4), each as "group_<name>": their names would meet the
 *  unicast counters' (dup_received, overflow, ...) without it. Every node has them. */
template <typename Fn>
void for_each_group_counter(const NodeSnapshot& s, Fn&& fn) {
  rel::for_each_counter(s.group, [&](const char* k, uint64_t v) { fn((std::string("group_") + k).c_str(), v); });
}

/** Call @p fn(name, value) for a fabric node's circuit counters (@p s.fabric), each as
 *  "circ_<name>". */
template <typename Fn>
void for_each_circuit_counter(const NodeSnapshot& s, Fn&& fn) {
  if (!s.fabric) return;
  for_each_counter(s.circ, [&](const char* k, uint64_t v) { fn((std::string("circ_") + k).c_str(), v); });
}

/** Publishes a board at most once per period, from the lcore's poll. */
struct BoardPublisher {
  StatsBoard* board = nullptr;  ///< null: publish nothing
  uint64_t node_id = 0;
  uint64_t period_tsc = 0;
  uint64_t next_tsc = 0;
  uint32_t app_queued = 0;  ///< set by the node above the engine: messages it still holds for it (published)

  void maybe(const rel::Engine& engine, const EngineLinkCounters& link, uint64_t now_tsc,
             const rel::red::LinkSet* set = nullptr, const EngineLinkCounters* link_b = nullptr,
             const CircuitStats* circ = nullptr) {
    if (board == nullptr || now_tsc < next_tsc) return;
    next_tsc = now_tsc + period_tsc;
    board->publish(node_id, engine, link, now_tsc, set, link_b, circ, app_queued);
  }
};

}  // namespace imago::dp
