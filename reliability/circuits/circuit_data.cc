/* SPDX-License-Identifier: BSD-3-Clause */
// The data path of circuits: where a frame that arrived on a circuit goes, and where our own
// ends send. One hash look-up a frame; no allocation.
#include "reliability/circuits/circuit_node.h"

namespace imago::rel::circ {

CircuitNode::Verdict CircuitNode::route_data(PortId port, uint32_t vci, uint64_t now, PortId* out_port,
                                             uint32_t* out_vci, CircuitId* local) {
  int s;
  Circuit* k = find(port, vci, &s);
  if (k == nullptr || k->state != State::kUp) {
    ++c_.unknown_vci;
    return Verdict::kDrop;
  }
  k->last_used = now;
  const Side& o = k->side[1 - s];
  if (!o.on) {  // an end: side 1 only at the origin, side 0 only at the destination
    ++c_.data_local;
    *local = static_cast<CircuitId>(k - table_.data());
    return Verdict::kLocal;
  }
  ++c_.data_forwarded;
  *out_port = o.port;
  *out_vci = o.vci_out;
  return Verdict::kForward;
}

bool CircuitNode::data_out(CircuitId id, PortId* port, uint32_t* vci) const {
  if (id >= table_.size()) return false;
  const Circuit& k = table_[id];
  if (k.state != State::kUp || !is_end(k)) return false;
  const Side& s = k.side[k.origin == self_ ? 1 : 0];
  *port = s.port;
  *vci = s.vci_out;
  return true;
}

}  // namespace imago::rel::circ
