// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/stats_board.h"

#include <rte_cycles.h>
#include <rte_pause.h>

#include <cstring>

namespace imago::dp {

void StatsBoard::publish(uint64_t node_id, const rel::Engine& engine, const EngineLinkCounters& link,
                         uint64_t now_tsc, const rel::red::LinkSet* set, const EngineLinkCounters* link_b,
                         const CircuitStats* circ, uint32_t app_queued) {
  const uint32_t s = seq_.load(std::memory_order_relaxed);
  seq_.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  snap_.node_id = node_id;
  snap_.published_tsc = now_tsc;
  snap_.tsc_hz = rte_get_tsc_hz();
  snap_.total = engine.total_counters();
  snap_.link = link;
  snap_.group = engine.group_counters();
  snap_.groups_leaving = engine.groups_leaving();
  snap_.groups_closing = engine.groups_closing();
  snap_.app_queued = app_queued;
  snap_.redundant = set != nullptr;
  if (set != nullptr) {
    snap_.mode = set->config().mode;
    for (uint8_t n = 0; n < rel::red::kMaxNets; ++n) snap_.nets[n] = set->counters(n);
    snap_.net_bad_shim = set->bad_shim();
    snap_.net_not_peer = set->not_peer();
    if (link_b != nullptr) snap_.link_b = *link_b;
  }
  snap_.fabric = circ != nullptr;
  if (circ != nullptr) snap_.circ = *circ;
  rel::NodeId ids[NodeSnapshot::kMaxPeers];
  const size_t n = engine.peer_ids(ids, NodeSnapshot::kMaxPeers);
  for (size_t i = 0; i < n; ++i) {
    engine.view(ids[i], &snap_.peers[i].view);
    snap_.peers[i].c = *engine.counters(ids[i]);
  }
  snap_.n_peers = static_cast<uint32_t>(n);
  seq_.store(s + 2, std::memory_order_release);
}

bool StatsBoard::read(NodeSnapshot* out) const {
  for (int tries = 0; tries < 1000; ++tries) {
    const uint32_t before = seq_.load(std::memory_order_acquire);
    if (before & 1) {
      rte_pause();
      continue;
    }
    std::memcpy(static_cast<void*>(out), &snap_, sizeof snap_);  // may tear: checked below
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

}  // namespace imago::dp
