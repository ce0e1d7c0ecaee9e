/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Whether each link of a node is alive, as its neighbour's frames say: every port sends a
 * HELLO (wire.h, CircKind::kHello) each `hello_ns` and any frame received on it counts as
 * heard; a port that sent `miss` HELLOs since it last heard anything is down, and up again
 * at the next frame. Counting our own HELLOs rather than time makes our own stalls harmless:
 * a process kept off its core for a while sends nothing either, so it does not take its
 * links down for a silence it caused. A link's
 * carrier says nothing of the node behind it (a forwarder killed leaves its veth up), so the
 * hellos are what tells a node to route around a dead neighbour (routing.h) and to tear down
 * the circuits through it (CircuitNode::link_down()).
 *
 * Pure: time comes in as an argument. Ports start up (heard at start), so a node's first
 * routes use every link of the topology.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "reliability/circuits/topology.h"

namespace imago::rel::circ {

class LinkHealth {
 public:
  struct Config {
    uint64_t hello_ns = 1'000'000;  ///< a HELLO on every port this often
    uint32_t miss = 100;            ///< HELLOs unanswered that take a link down
  };

  void init(const Config& c, size_t ports, uint64_t now) {
    cfg_ = c;
    ports_.assign(ports, Port{0, now, true});
  }
  /** A frame came in on @p p. @return true when that brings the link back up. */
  bool heard(PortId p) {
    if (p >= ports_.size()) return false;
    Port& x = ports_[p];
    x.unanswered = 0;
    if (x.up) return false;
    x.up = true;
    return true;
  }
  /** @return true when a HELLO is due on @p p now (and counts it unanswered, unless we are
   *  not @p listening: a port we stopped reading for a while cannot hear the answer). */
  bool hello_due(PortId p, uint64_t now, bool listening = true) {
    if (p >= ports_.size() || now < ports_[p].next_hello) return false;
    ports_[p].next_hello = now + cfg_.hello_ns;
    ports_[p].unanswered += listening;
    return true;
  }
  /** @return true when @p p has just gone down (`miss` HELLOs unanswered). */
  bool went_down(PortId p) {
    if (p >= ports_.size() || !ports_[p].up || ports_[p].unanswered < cfg_.miss) return false;
    ports_[p].up = false;
    return true;
  }
  /** @p p is down whatever it hears (its neighbour is not the topology's). @return true when
   *  it was up. */
  bool force_down(PortId p) {
    if (p >= ports_.size() || !ports_[p].up) return false;
    ports_[p].up = false;
    return true;
  }
  bool up(PortId p) const { return p < ports_.size() && ports_[p].up; }
  size_t ports() const { return ports_.size(); }

 private:
  struct Port {
    uint32_t unanswered;  ///< HELLOs sent since anything was heard
    uint64_t next_hello;
    bool up;
  };
  Config cfg_;
  std::vector<Port> ports_;
};

}  // namespace imago::rel::circ
