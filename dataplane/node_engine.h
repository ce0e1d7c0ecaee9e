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
#include "reliability/engine.h"

namespace imago::dp {

/** A node's engine on its port. */
struct NodeEngine {
  EngineLink link;
  std::unique_ptr<rel::Engine> engine;
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

}  // namespace imago::dp
