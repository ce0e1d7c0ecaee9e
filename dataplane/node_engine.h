/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The other half of every node (node_port.h is the first): its reliability engine and the
 * link that carries the engine's frames to and from the node's port. The library's runtime
 * (api::Node, behind imagod and imago_attach_embedded()) and imago-perf's engine loop build
 * it here, so an engine is created, given its incarnation and its peers one way.
 */
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <memory>

#include "dataplane/engine_link.h"
#include "dataplane/fault.h"
#include "dataplane/stats_board.h"
#include "reliability/engine.h"

namespace imago::dp {

/** A node's engine on its port. */
struct NodeEngine {
  EngineLink link;
  std::unique_ptr<rel::Engine> engine;
  BoardPublisher pub;  ///< where the polling lcore publishes the engine's state (none by default)
};

struct NodeEngineConfig {
  uint64_t id = 0;       ///< the node's id (1 .. 2^32 - 1)
  EncapConfig encap;     ///< how frames are wrapped (src_mac: the port's)
  uint16_t burst = 32;   ///< frames per rx/tx burst
  rel::Config engine;    ///< modes and timers; identity, epoch and seed are filled in here
};

/**
 * Build @p e on @p port (mbufs from @p pool): the link, then an engine that is a new
 * incarnation of node @p c.id (stamp_incarnation()), delivering to @p app. Control path.
 * @return 0 or a negative errno (a configuration the engine refuses: -EINVAL).
 */
int node_engine_open(NodeEngine& e, FaultyPort& port, rte_mempool* pool, const NodeEngineConfig& c,
                     rel::AppSink* app);

/** Make @p peer a peer of @p e, its frames sent to @p mac (or @p ip: UDP). Control path.
 *  @return 0 or a negative errno. */
int node_engine_add_peer(NodeEngine& e, rel::NodeId peer, const MacAddr& mac, uint32_t ip);

/** Publish @p e on @p board about every millisecond from now on (node_engine_poll()). */
void node_engine_publish_to(NodeEngine& e, StatsBoard* board, uint64_t node_id);

/** The polling lcore's step: receive, deliver, run timers, send (EngineLink::poll()), and
 *  publish the board when due. @return work done. */
inline unsigned node_engine_poll(NodeEngine& e, uint64_t now_tsc) {
  unsigned work = e.link.poll(now_tsc);
  e.pub.maybe(*e.engine, e.link.counters(), now_tsc);
  return work;
}

}  // namespace imago::dp
