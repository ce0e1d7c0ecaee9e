/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An engine over virtual circuits: the engine's FrameSink that sends each peer's frames on
 * the circuit to it, and the receive side that forwards frames of other nodes' circuits and
 * hands those of ours to the engine. The reliability engine so runs end to end over the
 * circuit (unlike Barrelfish, which trusts each link): a frame lost on any hop is repaired
 * by the two ends, and the hops in between keep no per-message state.
 *
 * Circuits: the end with the lower node id opens the circuit to a peer when the peer is added
 * and again, after `reopen_ns` (doubling up to 64 times it), whenever it goes down (a ring
 * finds the other way round); the other end uses the circuit it accepts. Until one is up,
 * frames to the peer are refused (back-pressure: the engine sends them again later). A node
 * with no engine (a router) only forwards.
 *
 * A SETUP proves nothing (anyone on a link can forge or replay one), so a circuit accepted
 * while the peer's is up is held, not used: it replaces the live one only when the peer's
 * engine takes a frame that came on it (its session's, or a proven restart), or when the
 * live one goes down. One is held per peer; a newer one replaces it.
 *
 * Pure like the engine: time comes in as an argument; frames go out through CircuitPorts.
 * Forwarding copies a frame here to rewrite its header; the dataplane rewrites the mbuf.
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reliability/circuits/circuit_node.h"
#include "reliability/engine.h"
#include "reliability/frame_sink.h"

namespace imago::rel::circ {

struct CircuitSinkCounters {
  uint64_t frames_out = 0;   ///< engine frames sent on a circuit
  uint64_t frames_in = 0;    ///< engine frames handed to the engine
  uint64_t no_circuit = 0;   ///< engine frames refused: no circuit to the peer up (yet)
  uint64_t forward_refused = 0;  ///< forwarded frames the next port refused (lost: the ends repair)
  uint64_t reopened = 0;     ///< circuits opened again after they went down
  uint64_t wrong_peer = 0;   ///< engine frames on a circuit naming another sender than its far end
  uint64_t setups_held = 0;  ///< circuits accepted from a peer whose circuit was up: held until proven
  uint64_t setups_unproven = 0;  ///< of them, let go unproven (a newer set-up, idle, torn down):
                                 ///< forged or replayed SETUPs
};

class CircuitSink final : public FrameSink, public CircuitListener {
 public:
  struct Config {
    CircuitConfig circuits;
    uint64_t reopen_ns = 10'000'000;  ///< first wait before opening a circuit that went down
    uint32_t max_frame = 9216;        ///< largest engine frame (the circuit header comes on top)
  };
  CircuitSink(const Config& c, NodeId self, const RoutingTable* routes, uint64_t seed, CircuitPorts* ports,
              CircuitListener* listener = nullptr);

  /** Engine frames received go to @p e (which must use this sink). None: a router. */
  void attach(Engine* e) { engine_ = e; }
  /** Reach @p peer over a circuit (control path). @return 0, -EEXIST. */
  int add_peer(NodeId peer, uint64_t now);
  /** A frame received on @p port (link header removed). */
  void on_frame(PortId port, std::span<const uint8_t> frame, uint64_t now);
  /** An engine frame @p frame (circuit header removed) arrived on our end @p local
   *  (CircuitNode::route_data()'s kLocal): to the engine, if it names the circuit's far end as
   *  its sender (a frame in another node's name is dropped and counted). */
  void deliver(CircuitId local, std::span<const uint8_t> frame, uint64_t now);
  /** The circuits' timers, and circuits to open again. */
  void poll(uint64_t now);
  /** The node stops: close every circuit of ours (its far end is told *closed*, 3.10.4) and
   *  open none again. @return circuits closed. */
  unsigned close_all(uint64_t now);
  /** Time for frames sent outside on_frame()/poll(). */
  void set_now(uint64_t now) { now_ = now; }
  /** @return whether the circuit to @p peer is up. */
  bool up(NodeId peer) const;
  /** Where frames to @p peer go now: our port and the next node's VCI. @return false unless
   *  its circuit is up. */
  bool route_to(NodeId peer, PortId* port, uint32_t* vci) const;

  CircuitNode& node() { return node_; }
  const CircuitSinkCounters& counters() const { return c_; }

  // FrameSink.
  bool send_frame(NodeId peer, std::span<const uint8_t> frame) override;
  // CircuitListener (from node()).
  void on_circuit_up(CircuitId id, NodeId peer, bool origin) override;
  void on_circuit_down(CircuitId id, NodeId peer, CircReason why) override;

 private:
  struct Peer {
    NodeId id;
    bool opener;                ///< we open its circuit (the lower id)
    bool up = false;
    bool open = false;          ///< a circuit of ours to it exists (pending or up)
    CircuitId circuit = 0;
    uint64_t reopen_at = 0;     ///< opener, none open: when to try
    uint64_t backoff = 0;
    bool held = false;          ///< accepted while up, not proven yet
    CircuitId candidate = 0;    ///< the held circuit
  };
  Peer* find(NodeId id);
  void try_open(Peer& p, uint64_t now);
  void take(Peer& p, CircuitId id, bool origin);
  void hold(Peer& p, CircuitId id);
  void promote(Peer& p);
  void deliver_held(Peer& p, NodeId far, std::span<const uint8_t> frame, uint64_t now);
  void also_on_held(NodeId peer, std::span<const uint8_t> frame);
  int send_on(PortId port, uint32_t vci, std::span<const uint8_t> frame);
  void forward(PortId out, uint32_t vci, std::span<const uint8_t> frame);

  Config cfg_;
  NodeId self_;
  CircuitPorts* ports_;
  CircuitListener* listener_;
  CircuitNode node_;
  Engine* engine_ = nullptr;
  std::vector<Peer> peers_;
  uint32_t held_ = 0;             ///< peers holding a circuit: the data path looks only then
  bool closed_ = false;           ///< close_all(): nothing is opened again
  std::vector<uint8_t> scratch_;  ///< a header and a frame being sent or forwarded
  uint64_t now_ = 0;
  CircuitSinkCounters c_;
};

}  // namespace imago::rel::circ
