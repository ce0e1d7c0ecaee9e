/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * One node's virtual circuits (docs/PROTOCOL.md 3.10, after "Routing in Barrelfish"): the
 * circuits it opened or accepted (its ends) and those it forwards for others (its hops), the
 * hop-by-hop set-up and tear-down that creates and removes them, and the forwarding lookup
 * of the data path: (port in, VCI) -> (port out, VCI), or a local end.
 *
 * Set-up (the seed's bind, hop by hop): the origin sends SETUP toward the destination along
 * its routing table, naming the VCI it wants frames back with; every hop on the way keeps a
 * pending entry, picks a VCI of its own for the next link and passes SETUP on; the destination
 * accepts and answers SETUP_OK with the VCI it wants frames with, and every hop on the way
 * back installs both directions and passes SETUP_OK on with its own. A hop without a route or
 * without room answers SETUP_FAIL, which frees the pending entries back to the origin.
 *
 * Links lose frames, so nothing here trusts a single control frame: the origin repeats SETUP
 * (same nonce) until it hears, a hop that sees a SETUP again passes it on (pending) or repeats
 * its SETUP_OK (up), and every entry is soft state: one nothing crossed for `idle_ns` is let
 * go, so a TEARDOWN that was lost leaves nothing behind for long. Every table is bounded and
 * allocated at construction: a flood of set-ups is refused (SETUP_FAIL, counted), never grown.
 *
 * Pure like the engine: time comes in as an argument, frames go out through CircuitPorts.
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reliability/circuits/flat_map.h"
#include "reliability/circuits/routing.h"
#include "reliability/recent.h"
#include "reliability/circuits/wire.h"
#include "reliability/rng.h"

namespace imago::rel::circ {

/** A circuit's name at one node: an index into its table (valid while the circuit lives). */
using CircuitId = uint32_t;

struct CircuitConfig {
  uint32_t max_circuits = 4096;          ///< circuits a node takes part in (ends and hops)
  uint32_t max_pending = 256;            ///< of them, set-ups not answered yet
  uint64_t setup_retry_ns = 20'000'000;  ///< the origin repeats SETUP this often...
  uint32_t setup_tries = 5;              ///< ...this many times, then gives up (kTimeout)
  uint64_t idle_ns = 5'000'000'000;      ///< an entry nothing crossed this long is let go (0: never)
  uint8_t max_hops = 64;                 ///< a SETUP further than this fails (kHops)
};

struct CircuitCounters {
  uint64_t setups_sent = 0, setups_received = 0, setups_ok = 0, setups_failed = 0;
  uint64_t teardowns_sent = 0, teardowns_received = 0;
  uint64_t data_forwarded = 0, data_local = 0;
  uint64_t bad_frame = 0;     ///< not a circuit frame: short, bad magic, kind, length or CRC
  uint64_t unknown_vci = 0;   ///< a frame for no circuit at (port, VCI): forged, or a late one
  uint64_t bad_setup = 0;     ///< a SETUP from or for ourselves, or for an unknown node
  uint64_t refused_full = 0;  ///< SETUPs refused for room (max_circuits, max_pending)
  uint64_t no_route = 0, too_far = 0;
  uint64_t expired_idle = 0, expired_setup = 0;
  uint64_t send_refused = 0;  ///< a port refused a control frame (it is repeated or expires)
};

/** Where a node's circuit frames go out. */
class CircuitPorts {
 public:
  virtual ~CircuitPorts() = default;
  /** Transmit @p frame on @p port. @return false when the port cannot take it now. */
  virtual bool send(PortId port, std::span<const uint8_t> frame) = 0;
  /**
   * Transmit @p header (a sealed circuit header) and then @p body as one frame on @p port,
   * so that a port can build it where it sends from (one copy). @return 1 sent, 0 when the
   * port cannot take it now, -1 when it cannot do this (the default: the caller joins the
   * two and calls send()).
   */
  virtual int send_parts(PortId /*port*/, std::span<const uint8_t> /*header*/, std::span<const uint8_t> /*body*/) {
    return -1;
  }
};

/** What a node's ends of circuits learn. */
class CircuitListener {
 public:
  virtual ~CircuitListener() = default;
  /** Circuit @p id to @p peer is up: opened by us (@p origin) or accepted from @p peer. */
  virtual void on_circuit_up(CircuitId id, NodeId peer, bool origin) = 0;
  /** Circuit @p id to @p peer is gone (or never came up) because of @p why: once per
   *  circuit, except one this node closed. Its entries are free by then. */
  virtual void on_circuit_down(CircuitId id, NodeId peer, CircReason why) = 0;
};

class CircuitNode {
 public:
  /** @param routes this node's routing table (kept by the caller; recompute it at will). */
  CircuitNode(const CircuitConfig& c, NodeId self, const RoutingTable* routes, uint64_t seed,
              CircuitPorts* ports, CircuitListener* listener);

  /**
   * Open a circuit to @p dst (control path). The answer comes as on_circuit_up() or
   * on_circuit_down() with the same @p *id.
   * @return 0; -EINVAL (dst is this node); -EHOSTUNREACH (no route); -ENOSPC (no room).
   */
  int open(NodeId dst, uint64_t now, CircuitId* id);
  /** Close an end of a circuit: TEARDOWN toward the other end. @return 0, -ENOENT. */
  int close(CircuitId id, uint64_t now);
  /** A link died (port @p p): every circuit through it goes down, both ways. */
  void link_down(PortId p, uint64_t now);

  /** A circuit frame received on @p port. Data frames: route_data() instead. */
  void on_frame(PortId port, std::span<const uint8_t> frame, uint64_t now);
  /** Repeat unanswered set-ups, let idle entries go. */
  void poll(uint64_t now);

  enum class Verdict : uint8_t { kDrop, kForward, kLocal };
  /**
   * The data path: a kData frame arrived on @p port with @p vci. kForward: send it on
   * *out_port with *out_vci in its header; kLocal: it is for our end *local; kDrop: no
   * circuit (counted).
   */
  Verdict route_data(PortId port, uint32_t vci, uint64_t now, PortId* out_port, uint32_t* out_vci,
                     CircuitId* local);
  /** Where our end @p id sends its data: @return false unless it is up. */
  bool data_out(CircuitId id, PortId* port, uint32_t* vci) const;

  const CircuitCounters& counters() const { return c_; }
  uint32_t in_use() const { return used_; }
  /** @return the bytes its tables take (all allocated at construction, for max_circuits). */
  size_t memory_bytes() const {
    return table_.size() * sizeof(Circuit) + free_.capacity() * sizeof(CircuitId) + by_vci_.memory_bytes() +
           by_setup_.memory_bytes();
  }
  uint32_t pending() const { return pending_; }
  /** @return the peer (other end) of our end @p id, 0 when it is no end of ours. */
  NodeId peer_of(CircuitId id) const;

 private:
  enum class State : uint8_t { kFree, kPending, kUp };
  /** Side 0 faces the origin, side 1 the destination; an origin has side 1 only, the
   *  destination side 0 only, a hop both. */
  struct Side {
    bool on = false;
    PortId port = 0;
    uint32_t vci_in = 0;   ///< what we chose: frames from this side carry it
    uint32_t vci_out = 0;  ///< what the neighbour chose: frames to this side carry it
  };
  struct Circuit {
    State state = State::kFree;
    NodeId origin = 0, dst = 0;
    uint32_t nonce = 0;
    Side side[2];
    uint8_t hops = 0;        ///< kSetup's hops left, as passed on
    uint32_t tries = 0;      ///< SETUPs sent (origin)
    uint64_t deadline = 0;   ///< pending: next repeat or expiry
    uint64_t last_used = 0;
  };

  static uint64_t key(PortId p, uint32_t vci) { return uint64_t{p} << 32 | vci; }
  static uint64_t setup_key(NodeId origin, uint32_t nonce) { return uint64_t{origin} << 32 | nonce; }
  bool is_end(const Circuit& k) const { return k.origin == self_ || k.dst == self_; }
  Circuit* find(PortId p, uint32_t vci, int* side);
  int alloc(bool pending);
  void release(CircuitId id);
  uint32_t pick_vci(PortId p);
  void bind_in(CircuitId id, int s, PortId p);
  bool send_ctl(PortId p, CircKind k, uint32_t vci, uint32_t fwd_vci, CircReason r);
  bool send_setup(const Circuit& k);
  void end_down(CircuitId id, CircReason why);
  void teardown_side(Circuit& k, int s, CircReason why);
  void on_setup(PortId port, const CircuitHeader& h, const SetupBody& b, uint64_t now);
  void setup_again(CircuitId id, uint64_t now);
  bool setup_route(const SetupBody& b, PortId port, uint8_t hops, Route* r);
  void on_setup_ok(PortId port, uint32_t vci, const ReplyBody& b, uint64_t now);
  void on_setup_fail(PortId port, uint32_t vci, CircReason why);
  void on_teardown(PortId port, uint32_t vci, CircReason why);
  void poll_one(CircuitId id, uint64_t now);

  CircuitConfig cfg_;
  NodeId self_;
  const RoutingTable* routes_;
  Rng rng_;
  CircuitPorts* ports_;
  CircuitListener* listener_;
  std::vector<Circuit> table_;
  std::vector<CircuitId> free_;
  FlatMap by_vci_;    ///< (port, vci_in) -> circuit; vci_in is never 0, so no key is 0
  FlatMap by_setup_;  ///< (origin, nonce) -> circuit; origin and nonce are never 0
  uint32_t used_ = 0, pending_ = 0;
  uint64_t next_poll_ = 0;
  CircuitCounters c_;
  /** Destinations whose last set-up of ours a hop refused with no-route, and the port it
   *  left by: the next open() goes out of another (a link beyond our own died, which our
   *  table cannot know). The latest 16; a circuit up clears its entry. */
  Recent<NodeId, PortId, 16> refused_;
};

}  // namespace imago::rel::circ
