/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The other half of every node (node_port.h is the first): its reliability engine and the
 * link that carries the engine's frames to and from the node's port. The library's runtime
 * (api::Node, behind imagod and imago_attach_embedded()) and imago-perf's engine loop build
 * it here, so an engine is created, given its incarnation and its peers one way.
 *
 * A node on two networks (NASA KSC's dual network, reliability/redundancy/) has a second
 * port and link, and a LinkSet between the engine and the two links. A node of a multi-hop
 * fabric (reliability/circuits/) has a port per link of its topology and a CircuitLink in
 * their place: its engine reaches its peers over virtual circuits, and it forwards others'.
 */
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <memory>

#include "dataplane/circuit_link.h"
#include "dataplane/engine_link.h"
#include "dataplane/fault.h"
#include "dataplane/stats_board.h"
#include "reliability/engine.h"

namespace imago::dp {

/** A node's engine on its port (or two). */
struct NodeEngine {
  EngineLink link;    ///< network A: the node's only one without redundancy
  EngineLink link_b;  ///< network B (a node on two networks)
  std::unique_ptr<rel::red::LinkSet> set;  ///< between the engine and the two links, or none
  std::unique_ptr<CircuitLink> circ;   ///< a fabric node's ports, instead of link and link_b
  std::unique_ptr<rel::Engine> engine;
  TscClock clock;      ///< TSC cycles to the engine's nanoseconds
  BoardPublisher pub;  ///< where the polling lcore publishes the engine's state (none by default)
  uint64_t last_poll_tsc = 0;    ///< the previous node_engine_poll()
  uint64_t absence_tol_tsc = 0;  ///< rel::Engine::absence_tolerance_ns() in TSC cycles
  uint64_t set_tol_tsc = 0;      ///< the link set's (its heartbeat interval), with two networks
};

struct NodeEngineConfig {
  uint64_t id = 0;       ///< the node's id (1 .. 2^32 - 1)
  EncapConfig encap;     ///< how frames are wrapped (src_mac: the port's)
  uint16_t burst = 32;   ///< frames per rx/tx burst
  rel::Config engine;    ///< modes and timers; identity, epoch and seed are filled in here
  /** A second network: its port (null: one network), pool and encapsulation (src_mac: its
   *  port's; the kind and key must be network A's), and how the two are used. The engine's
   *  MTU loses the redundancy shim's 20 bytes. */
  FaultyPort* port_b = nullptr;
  rte_mempool* pool_b = nullptr;
  EncapConfig encap_b;
  rel::red::Config redundancy;
  /** A node of a multi-hop fabric: its topology and a port per link (null: one network, or
   *  two). The @p port given to node_engine_open() is then not used; the engine's MTU loses
   *  the circuit header's 12 bytes. */
  const CircuitSetup* circuits = nullptr;
};

/**
 * Build @p e on @p port (mbufs from @p pool): the link, then an engine that is a new
 * incarnation of node @p c.id (stamp_incarnation()), delivering to @p app. Control path.
 * @return 0 or a negative errno (a configuration the engine refuses: -EINVAL).
 */
int node_engine_open(NodeEngine& e, FaultyPort& port, rte_mempool* pool, const NodeEngineConfig& c,
                     rel::AppSink* app);

/** Make @p peer a peer of @p e, its frames sent to @p mac (or @p ip: UDP), and on network B
 *  to @p mac_b (@p ip_b). Control path. @return 0 or a negative errno. */
int node_engine_add_peer(NodeEngine& e, rel::NodeId peer, const MacAddr& mac, uint32_t ip,
                         const MacAddr& mac_b = kBroadcastMac, uint32_t ip_b = 0);

/** Say (once per rel::AppSink::on_peer_settings()) that node @p self refuses @p peer, whose
 *  HELLO states @p theirs where its own are @p ours. */
void node_engine_log_settings(uint64_t self, rel::NodeId peer, rel::PeerSettings theirs, rel::PeerSettings ours);

/** Publish @p e on @p board about every millisecond from now on (node_engine_poll()). */
void node_engine_publish_to(NodeEngine& e, StatsBoard* board, uint64_t node_id);

/** @return the engine time of @p tsc. */
inline uint64_t node_engine_now_ns(const NodeEngine& e, uint64_t tsc) { return e.clock.ns(tsc); }

/** Set the time of frames the engine sends outside node_engine_poll() (the application's
 *  sends). */
inline void node_engine_set_now(NodeEngine& e, uint64_t now_tsc) {
  if (e.circ) return e.circ->set_now(now_tsc);
  e.link.set_now(now_tsc);
  if (!e.set) return;
  e.link_b.set_now(now_tsc);
  e.set->set_now(e.link.now_ns(now_tsc));
}

/** Send the pending bursts. @return frames the ports took. */
inline unsigned node_engine_flush(NodeEngine& e, uint64_t now_tsc) {
  if (e.circ) return e.circ->flush(now_tsc);
  return e.link.flush(now_tsc) + (e.set ? e.link_b.flush(now_tsc) : 0);
}

/** @return the mbuf being received now (EngineLink::current_frame()), on either network. */
inline rte_mbuf* node_engine_current_frame(const NodeEngine& e) {
  if (e.circ) return e.circ->current_frame();
  rte_mbuf* m = e.link.current_frame();
  return m != nullptr || !e.set ? m : e.link_b.current_frame();
}

/** The lcore came round late (descheduled; a run-to-completion application busy elsewhere):
 *  the engine heard nothing meanwhile, so the time beyond the tolerance is not its peers'
 *  silence. Before receiving: what waited in the rx ring then counts as heard now. */
inline void node_engine_note_poll(NodeEngine& e, uint64_t now_tsc) {
  const uint64_t gap = now_tsc - e.last_poll_tsc, last = e.last_poll_tsc;
  e.last_poll_tsc = now_tsc;
  if (last == 0) return;
  if (gap > e.absence_tol_tsc) e.engine->credit_absence(e.clock.ns(now_tsc), e.clock.ns(gap - e.absence_tol_tsc));
  if (e.set && gap > e.set_tol_tsc) e.set->credit_absence(e.clock.ns(now_tsc), e.clock.ns(gap - e.set_tol_tsc));
}

/** The polling lcore's step: receive, deliver, run timers, send (EngineLink::poll()), and
 *  publish the board when due. @return work done. */
inline unsigned node_engine_poll(NodeEngine& e, uint64_t now_tsc) {
  node_engine_note_poll(e, now_tsc);
  unsigned work;
  if (e.circ) {  // every link in (forwarding as it goes), hellos and circuits, timers, every link out
    const uint64_t now = e.clock.ns(now_tsc);
    work = e.circ->receive(now_tsc);
    work += e.circ->poll(now);
    e.engine->poll(now);
    work += e.circ->flush(now_tsc);
    if (e.pub.board != nullptr && now_tsc >= e.pub.next_tsc)
      e.pub.maybe(*e.engine, e.circ->link_counters(), now_tsc, nullptr, nullptr, &e.circ->stats());
    return work;
  }
  if (!e.set) {
    work = e.link.poll(now_tsc);
  } else {  // both networks in, heartbeats and health, the engine's timers, both out
    const uint64_t now = e.link.now_ns(now_tsc);
    work = e.link.receive(now_tsc) + e.link_b.receive(now_tsc);
    work += e.set->poll(now);
    e.engine->poll(now);
    work += node_engine_flush(e, now_tsc);
  }
  e.pub.maybe(*e.engine, e.link.counters(), now_tsc, e.set.get(), &e.link_b.counters());
  return work;
}

}  // namespace imago::dp
