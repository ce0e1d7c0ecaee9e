/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A node of a multi-hop fabric on DPDK ports (docs/PROTOCOL.md 3.10): the seam between the
 * pure circuits (reliability/circuits/) and the node's ports, one per link of the topology
 * (topology port k is the node's k-th port). It forwards the circuits of other nodes in the
 * dataplane lcore, mbuf in, mbuf out: the circuit header's VCI and CRC and the link header are
 * rewritten in the received mbuf, which goes out on the next port as it is (no reassembly, no
 * copy, FIFO per circuit and hop). Frames of our own circuits go to the engine through a
 * CircuitSink, end to end reliable; frames the engine sends are copied into an mbuf once,
 * behind their circuit header.
 *
 * Each port says HELLO every `hello_ns`; a port silent for `miss` intervals is down
 * (link_health.h): the routing table is computed again without it and every circuit through
 * it is torn down toward both ends, whose opener sets it up again on another path if one is
 * left. A node with no peers is a router: it only forwards.
 *
 * A frame whose next link is full waits, and the link it came in on is read no more until it
 * moves (push-back, the seed's third option): nothing is dropped and nothing queues beyond a
 * burst per link; the link behind fills and pushes back in turn, up to the sending end, whose
 * engine is refused and sends later. Other circuits on that input link wait too (the seed's
 * head-of-line blocking): what bounds the wait is the ends' windows, which bound what the
 * circuits into a congested link can have in flight (docs/PROTOCOL.md 3.10.5), and a frame
 * waits `max_wait_ns` at most before it is dropped, so a cycle of full links cannot hang.
 * No allocation after init(); routes are computed again (allocating) only when a link
 * changes, a control-path event.
 */
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "dataplane/encap.h"
#include "dataplane/engine_link.h"
#include "dataplane/fault.h"
#include "dataplane/log_gate.h"
#include "dataplane/tx_queue.h"
#include "reliability/circuits/circuit_sink.h"
#include "reliability/circuits/link_health.h"
#include "reliability/circuits/routing.h"
#include "reliability/circuits/topology.h"

namespace imago::dp {

/** One link of the node: its port and where its mbufs come from. */
struct CircuitPortSpec {
  FaultyPort* port = nullptr;
  rte_mempool* pool = nullptr;
  MacAddr mac{};  ///< the port's own address (frames go to the broadcast address: links are point to point)
};

/** How a node takes part in a fabric (NodeEngineConfig::circuits). */
struct CircuitSetup {
  rel::circ::Topology topology;
  std::vector<CircuitPortSpec> ports;  ///< index: topology port; every port the node uses in the topology
  rel::circ::LinkHealth::Config health;
  rel::circ::CircuitSink::Config sink;
  FILE* show_routes = nullptr;  ///< print the routing table here at start and at every change
  /** A frame whose next link is full waits this long at most (its input link pushed back),
   *  then is dropped (the ends repair it). */
  uint64_t max_wait_ns = 2'000'000;
};

struct CircuitLinkCounters {
  uint64_t hellos_sent = 0, hellos_in = 0;
  uint64_t links_down = 0, links_up = 0;  ///< links that went silent, and came back
  uint64_t route_changes = 0;             ///< routing tables computed after a link changed
  uint64_t circuits_up = 0, circuits_down = 0;  ///< our ends' circuits (CircuitListener)
  uint64_t pushbacks = 0;        ///< times an input link was read no more: a frame's next link was full
  uint64_t forward_dropped = 0;  ///< frames to forward whose next link was down, or full past max_wait_ns
                                 ///< (lost: the ends repair)
  uint64_t wrong_neighbour = 0;  ///< HELLOs from another node, or port, than the topology has on that link,
                                 ///< and frames dropped on a link while it answers so (it is down)
  uint64_t own_hellos = 0;       ///< HELLOs in this node's own name (a loop, or replayed to it): ignored
  uint64_t neighbours_left = 0;  ///< last HELLOs of neighbours that stopped (their link went down at once)
  uint64_t log_quiet = 0;        ///< a port's link and miswire changes not logged (a line per 10 s each)
};

/** One row of a routing table as published (telemetry's /imago/routes). */
struct RouteRow {
  uint32_t dst = 0, next = 0;
  uint16_t port = 0, hops = 0;
};

/** Everything a fabric node counts (StatsBoard, RESULT, imagod's statistics), and its routes
 *  and links now. */
struct CircuitStats {
  static constexpr uint32_t kMaxRoutes = 64;  ///< routes published (the first by destination)
  static constexpr uint32_t kMaxLinks = 16;   ///< CircuitLink::kMaxPorts
  rel::circ::CircuitCounters node;
  rel::circ::CircuitSinkCounters sink;
  CircuitLinkCounters link;
  uint32_t in_use = 0;     ///< circuits this node takes part in now (ends and hops)
  uint32_t ports_up = 0;   ///< links alive now
  uint32_t n_routes = 0, reachable = 0;  ///< published, and in the table
  RouteRow routes[kMaxRoutes];
  uint32_t n_links = 0;
  bool link_up[kMaxLinks] = {};
};

/** Call @p fn(name, value) for every counter of @p s (a counter added is added here). */
template <typename Fn>
void for_each_counter(const CircuitStats& s, Fn&& fn) {
  const rel::circ::CircuitCounters& n = s.node;
  fn("setups_sent", n.setups_sent), fn("setups_received", n.setups_received), fn("setups_ok", n.setups_ok);
  fn("setups_failed", n.setups_failed), fn("teardowns_sent", n.teardowns_sent);
  fn("teardowns_received", n.teardowns_received), fn("data_forwarded", n.data_forwarded);
  fn("data_local", n.data_local), fn("bad_frame", n.bad_frame), fn("unknown_vci", n.unknown_vci);
  fn("bad_setup", n.bad_setup), fn("refused_full", n.refused_full), fn("no_route", n.no_route);
  fn("too_far", n.too_far), fn("expired_idle", n.expired_idle), fn("expired_setup", n.expired_setup);
  fn("send_refused", n.send_refused);
  const rel::circ::CircuitSinkCounters& k = s.sink;
  fn("frames_out", k.frames_out), fn("frames_in", k.frames_in), fn("no_circuit", k.no_circuit);
  fn("forward_refused", k.forward_refused), fn("reopened", k.reopened), fn("wrong_peer", k.wrong_peer);
  fn("setups_held", k.setups_held), fn("setups_unproven", k.setups_unproven);
  const CircuitLinkCounters& l = s.link;
  fn("hellos_sent", l.hellos_sent), fn("hellos_in", l.hellos_in), fn("links_down", l.links_down);
  fn("links_up", l.links_up), fn("route_changes", l.route_changes), fn("circuits_up", l.circuits_up);
  fn("circuits_down", l.circuits_down), fn("pushbacks", l.pushbacks), fn("forward_dropped", l.forward_dropped);
  fn("wrong_neighbour", l.wrong_neighbour), fn("own_hellos", l.own_hellos), fn("log_quiet", l.log_quiet);
  fn("neighbours_left", l.neighbours_left);
  fn("in_use", s.in_use), fn("ports_up", s.ports_up);
}

static_assert(CircuitStats::kMaxLinks >= 16);

class CircuitLink final : public rel::circ::CircuitPorts, public rel::circ::CircuitListener {
 public:
  static constexpr size_t kMaxPorts = 16;

  CircuitLink() = default;
  CircuitLink(const CircuitLink&) = delete;
  CircuitLink& operator=(const CircuitLink&) = delete;
  ~CircuitLink() override;  ///< frees the frames it still holds

  /**
   * @param encap  the encapsulation (L2 only; src MAC per port from @p s), and the key
   * @param max_frame  the engine's largest frame (its MTU: the circuit header comes on top)
   * @return 0; -EINVAL (UDP, no port, too many ports, a port the topology gives @p self
   *         without a DPDK port, @p self not in the topology, @p burst 0 or above
   *         TxQueue::kMaxBurst).
   */
  int init(const CircuitSetup& s, rel::NodeId self, const EncapConfig& encap, uint16_t burst, uint64_t seed,
           uint32_t max_frame);
  /** The engine's FrameSink. */
  rel::circ::CircuitSink& sink() { return *sink_; }
  /** Frames for our ends go to @p e (which must use sink()). */
  void attach(rel::Engine* e) { sink_->attach(e); }
  /** Reach @p peer over a circuit (control path). @return 0, -EEXIST, -EINVAL (unknown node). */
  int add_peer(rel::NodeId peer, uint64_t now);

  /** Receive a burst on every port: forward, or hand to the circuits and the engine. */
  unsigned receive(uint64_t now_tsc);
  /** HELLOs, links that went silent, the circuits' timers. @return work done. */
  unsigned poll(uint64_t now_ns);
  /** Send every port's pending burst. @return frames the ports took. */
  unsigned flush(uint64_t now_tsc);
  /** The node stops (control path, no lcore polling it): close our circuits (their far ends
   *  are told *closed*) and tell every neighbour by a last HELLO that its link is gone (it
   *  routes round at once and tears down the circuits through us, *hop-dead*), waiting up
   *  to a millisecond for the ports to take it all. @return circuits closed. */
  unsigned leave();
  void set_now(uint64_t now_tsc) {
    now_tsc_ = now_tsc;
    sink_->set_now(clock_.ns(now_tsc));
  }
  uint64_t now_ns(uint64_t tsc) const { return clock_.ns(tsc); }
  /** @return the mbuf whose frame the engine is processing now (EngineLink::current_frame()). */
  rte_mbuf* current_frame() const { return current_; }

  /** Link counters as an EngineLink keeps them (frames in and out, decode errors). */
  const EngineLinkCounters& link_counters();
  const CircuitStats& stats();
  const rel::circ::RoutingTable& routes() const { return routes_; }
  /** @return why the circuit to our peer @p peer last went down (kNone: up since, or never down). */
  rel::circ::CircReason down_why(rel::NodeId peer) const {
    for (const auto& [id, why] : last_down_)
      if (id == peer) return why;
    return rel::circ::CircReason::kNone;
  }

  // CircuitPorts: control frames, and the engine's frames behind their circuit header, copied
  // into an mbuf once.
  bool send(rel::circ::PortId port, std::span<const uint8_t> frame) override;
  int send_parts(rel::circ::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> body) override;
  // CircuitListener: our ends, logged.
  void on_circuit_up(rel::circ::CircuitId id, rel::NodeId peer, bool origin) override;
  void on_circuit_down(rel::circ::CircuitId id, rel::NodeId peer, rel::circ::CircReason why) override;

 private:
  /** A frame on its way through: its mbuf, the circuit frame in it, where it goes. */
  struct Hop {
    rte_mbuf* m = nullptr;
    uint8_t* frame = nullptr;
    uint16_t len = 0;
    rel::circ::PortId out = 0;
    uint32_t vci = 0;
    uint64_t since = 0;  ///< when it arrived
  };
  struct Port {
    FaultyPort* port = nullptr;
    rte_mempool* pool = nullptr;
    EncapConfig encap;
    TxQueue tx;
    // Push-back: a frame received here whose next link is full waits (waiting), with the rest
    // of its burst (rest), and this port is read no more until they moved: at most a burst
    // held, and the link behind it fills and pushes back in turn.
    Hop waiting;
    rte_mbuf* rest[TxQueue::kMaxBurst];
    uint16_t rest_n = 0, rest_at = 0;
    // Our HELLO on this link (who we are, which port), sealed once; who the topology says
    // answers here, and whether the log said that someone else does.
    /// [0] we hear nothing of the neighbour, [1] we hear it, [2] we stop (leave())
    uint8_t hello[3][sizeof(rel::circ::CircuitHeader) + sizeof(rel::circ::HelloBody)] = {};
    rel::NodeId expect_node = 0;
    uint32_t expect_port = 0;
    bool miswired = false;
    uint8_t wrong_in_row = 0;  ///< HELLOs from another node than expected, none right since
    HeldLine link_log;    ///< its "link up/down" lines: a change held back is shown when the gap ends
    bool heard_once = false;  ///< its neighbour was heard once (ports start up, on trust)
    LogGate miswire_log;  ///< its miswire lines
  };
  // Per peer of ours: why its circuit was last logged down (kNone: up since). A peer out of
  // reach fails every re-open the same way: logged once, not every back-off.
  std::vector<std::pair<rel::NodeId, rel::circ::CircReason>> last_down_;

  /** Has the log said already that the circuit to @p peer is down for @p why? Records it. */
  bool told_down(rel::NodeId peer, rel::circ::CircReason why);
  void init_hello(rel::circ::PortId p);
  void on_hello(rel::circ::PortId p, std::span<const uint8_t> frame, uint64_t now);
  bool drain(rel::circ::PortId p, uint64_t now);
  bool on_mbuf(rel::circ::PortId p, rte_mbuf* m, uint64_t now);
  bool forward(rel::circ::PortId in, const Hop& h, uint64_t now);
  /** @p why: said after "up" or "down" in the log ("" or " (...)"). */
  void link_changed(rel::circ::PortId p, bool up, uint64_t now, const char* why = "");
  void compute_routes();
  void show_routes(const char* why);
  bool loud(rel::circ::PortId p, LogGate& gate, const char* what, uint64_t now);
  /** Log @p p's link state now, after @p why; first how many changes were not (@p quiet). */
  void log_link(rel::circ::PortId p, const char* why, uint64_t quiet);

  rel::NodeId self_ = 0;
  rel::circ::Topology topo_;
  rel::circ::RoutingTable routes_;
  std::vector<bool> dead_;  ///< per topology link, as this node sees it
  rel::circ::LinkHealth health_;
  rel::circ::LinkHealth::Config health_cfg_;
  uint64_t max_wait_ns_ = 0;
  std::vector<Port> ports_;
  std::unique_ptr<rel::circ::CircuitSink> sink_;
  FILE* show_routes_ = nullptr;
  HeldLine routes_log_;  ///< --show-routes: a table per change, at most one per 10 s
  uint16_t burst_ = 32;
  TscClock clock_;
  uint64_t now_tsc_ = 0;
  rte_mbuf* current_ = nullptr;
  EngineLinkCounters lc_;
  CircuitLinkCounters cc_;
  CircuitStats stats_;
};

}  // namespace imago::dp
