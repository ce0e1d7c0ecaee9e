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
 * A link is used only both ways: each HELLO says whether its sender hears us (hears()), and
 * a link whose neighbour does not is down here too, though its frames still come in (a link
 * that fails one way only: otherwise this side would go on routing circuits over it, and
 * their frames would be lost at the other, which has routed round it).
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
    ports_.assign(ports, Port{0, now, true, false, 0});
  }
  /** A frame came in on @p p. @return true when that brings the link back up. */
  bool heard(PortId p) {
    if (p >= ports_.size()) return false;
    Port& x = ports_[p];
    x.unanswered = 0;
    if (x.up || x.peer_deaf) return false;
    x.up = true;
    return true;
  }
  /** @return whether we hear @p p's neighbour (fewer than `miss` HELLOs unanswered): what
   *  our HELLOs on it say. */
  bool hears(PortId p) const { return p < ports_.size() && ports_[p].unanswered < cfg_.miss; }
  /** @p p's neighbour said (its HELLO) whether it hears us (@p heard). @return true when that takes
   *  the link down or brings it back up (up() says which). Deafness counts once we have sent
   *  `miss` HELLOs on @p p: a neighbour that started before us, and heard nothing for a
   *  while, says so until our first HELLOs reach it, which is no failure of the link. */
  bool peer_hears(PortId p, bool heard) {
    if (p >= ports_.size()) return false;
    Port& x = ports_[p];
    x.peer_deaf = !heard && settled(p);
    const bool up = !x.peer_deaf && hears(p);
    if (up == x.up) return false;
    x.up = up;
    return true;
  }
  /** @p p's neighbour said it stops (its last HELLO): the link is down until it speaks again
   *  and hears us (a neighbour that starts says first that it hears nothing, peer_hears()).
   *  @return true when that takes the link down. */
  bool peer_left(PortId p) {
    if (p >= ports_.size()) return false;
    ports_[p].peer_deaf = true;
    return force_down(p);
  }
  /** @return true when a HELLO is due on @p p now (and counts it unanswered, unless we are
   *  not @p listening: a port we stopped reading for a while cannot hear the answer). */
  bool hello_due(PortId p, uint64_t now, bool listening = true) {
    if (p >= ports_.size() || now < ports_[p].next_hello) return false;
    ports_[p].next_hello = now + cfg_.hello_ns;
    ports_[p].unanswered += listening;
    ports_[p].said += ports_[p].said < cfg_.miss;
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
  /** @return whether @p p has sent `miss` HELLOs: what it hears now is of its own link. */
  bool settled(PortId p) const { return p < ports_.size() && ports_[p].said >= cfg_.miss; }
  size_t ports() const { return ports_.size(); }

 private:
  struct Port {
    uint32_t unanswered;  ///< HELLOs sent since anything was heard
    uint64_t next_hello;
    bool up;
    bool peer_deaf;  ///< its last HELLO said it hears nothing of us
    uint32_t said;   ///< HELLOs we sent on it, up to `miss`
  };
  Config cfg_;
  std::vector<Port> ports_;
};

}  // namespace imago::rel::circ
