// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/node_engine.h"

#include <rte_cycles.h>

#include "dataplane/node_port.h"

namespace imago::dp {

int node_engine_open(NodeEngine& e, FaultyPort& port, rte_mempool* pool, const NodeEngineConfig& c,
                     rel::AppSink* app) {
  if (int rc = e.link.init(port, pool, c.encap, c.burst); rc < 0) return rc;
  rel::Config ec = c.engine;
  stamp_incarnation(ec, c.id);
  if (int rc = rel::Engine::create(ec, &e.link, app, &e.engine); rc < 0) return rc;
  e.link.attach(e.engine.get());
  return 0;
}

int node_engine_add_peer(NodeEngine& e, rel::NodeId peer, const MacAddr& mac, uint32_t ip) {
  if (int rc = e.link.add_peer_addr(peer, mac, ip); rc < 0) return rc;
  return e.engine->add_peer(peer, e.link.now_ns(rte_rdtsc()));
}

void node_engine_publish_to(NodeEngine& e, StatsBoard* board, uint64_t node_id) {
  e.pub = BoardPublisher{.board = board, .node_id = node_id, .period_tsc = rte_get_tsc_hz() / 1000, .next_tsc = 0};
}

}  // namespace imago::dp
