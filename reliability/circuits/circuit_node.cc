/* SPDX-License-Identifier: BSD-3-Clause */
#include "reliability/circuits/circuit_node.h"

#include <cerrno>
#include <cstring>

namespace imago::rel::circ {

const char* reason_name(CircReason r) {
  switch (r) {
    case CircReason::kNone: return "none";
    case CircReason::kClosed: return "closed";
    case CircReason::kNoRoute: return "no-route";
    case CircReason::kFull: return "full";
    case CircReason::kHops: return "hops";
    case CircReason::kHopDead: return "hop-dead";
    case CircReason::kTimeout: return "timeout";
    case CircReason::kIdle: return "idle";
    case CircReason::kReplaced: return "replaced";
  }
  return "?";
}

CircuitNode::CircuitNode(const CircuitConfig& c, NodeId self, const RoutingTable* routes, uint64_t seed,
                         CircuitPorts* ports, CircuitListener* listener)
    : cfg_(c), self_(self), routes_(routes), rng_(seed), ports_(ports), listener_(listener), table_(c.max_circuits),
      by_vci_(2 * size_t{c.max_circuits}), by_setup_(c.max_circuits) {
  free_.reserve(c.max_circuits);
  for (uint32_t i = c.max_circuits; i-- > 0;) free_.push_back(i);
}

// ---- the table

int CircuitNode::alloc(bool pending) {
  if (free_.empty() || (pending && pending_ >= cfg_.max_pending)) return -1;
  const CircuitId id = free_.back();
  free_.pop_back();
  table_[id] = Circuit{};
  table_[id].state = pending ? State::kPending : State::kUp;
  ++used_;
  pending_ += pending;
  return static_cast<int>(id);
}

void CircuitNode::release(CircuitId id) {
  Circuit& k = table_[id];
  if (k.state == State::kFree) return;
  for (const Side& s : k.side) {
    const uint32_t* v = s.on && s.vci_in != 0 ? by_vci_.find(key(s.port, s.vci_in)) : nullptr;
    if (v != nullptr && *v == id) by_vci_.erase(key(s.port, s.vci_in));
  }
  const uint64_t sk = setup_key(k.origin, k.nonce);
  if (const uint32_t* v = sk != 0 ? by_setup_.find(sk) : nullptr; v != nullptr && *v == id) by_setup_.erase(sk);
  pending_ -= k.state == State::kPending;
  --used_;
  k = Circuit{};
  free_.push_back(id);
}

uint32_t CircuitNode::pick_vci(PortId p) {
  // Random, so a frame with a forged VCI must guess 32 bits (the seed's defence); 0 is "none".
  uint32_t v;
  do v = static_cast<uint32_t>(rng_.next());
  while (v == 0 || by_vci_.contains(key(p, v)));
  return v;
}

void CircuitNode::bind_in(CircuitId id, int s, PortId p) {
  Side& sd = table_[id].side[s];
  sd.on = true;
  sd.port = p;
  sd.vci_in = pick_vci(p);
  by_vci_.put(key(p, sd.vci_in), id);  // room: two per circuit, and circuits are bounded
}

CircuitNode::Circuit* CircuitNode::find(PortId p, uint32_t vci, int* side) {
  const uint32_t* v = vci != 0 ? by_vci_.find(key(p, vci)) : nullptr;
  if (v == nullptr) return nullptr;
  Circuit& k = table_[*v];
  for (int s = 0; s < 2; ++s)
    if (k.side[s].on && k.side[s].port == p && k.side[s].vci_in == vci) return *side = s, &k;
  return nullptr;
}

NodeId CircuitNode::peer_of(CircuitId id) const {
  if (id >= table_.size()) return 0;
  const Circuit& k = table_[id];
  if (k.state == State::kFree) return 0;
  return k.origin == self_ ? k.dst : k.dst == self_ ? k.origin : 0;
}

// ---- frames out

bool CircuitNode::send_ctl(PortId p, CircKind kind, uint32_t vci, uint32_t fwd_vci, CircReason r) {
  uint8_t f[sizeof(CircuitHeader) + sizeof(ReplyBody)];
  circ_header(f, kind, vci);
  ReplyBody b{};
  b.fwd_vci.set(fwd_vci);
  b.reason = static_cast<uint8_t>(r);
  std::memcpy(f + sizeof(CircuitHeader), &b, sizeof b);
  circ_seal(f, sizeof b);
  if (ports_->send(p, {f, sizeof f})) return true;
  ++c_.send_refused;
  return false;
}

bool CircuitNode::send_setup(const Circuit& k) {
  uint8_t f[kMaxControl];
  circ_header(f, CircKind::kSetup, 0, k.hops);
  SetupBody b;
  b.origin.set(k.origin);
  b.dst.set(k.dst);
  b.nonce.set(k.nonce);
  b.back_vci.set(k.side[1].vci_in);
  std::memcpy(f + sizeof(CircuitHeader), &b, sizeof b);
  circ_seal(f, sizeof b);
  ++c_.setups_sent;
  if (ports_->send(k.side[1].port, {f, sizeof f})) return true;
  ++c_.send_refused;
  return false;
}

// Tell the neighbour on side @p s that the circuit is gone: TEARDOWN when it was up; while
// pending, SETUP_FAIL back toward the origin (the hop there knows it by the VCI it gave).
void CircuitNode::teardown_side(Circuit& k, int s, CircReason why) {
  const Side& sd = k.side[s];
  if (!sd.on) return;
  if (k.state == State::kUp) {
    ++c_.teardowns_sent;
    send_ctl(sd.port, CircKind::kTeardown, sd.vci_out, 0, why);
  } else if (s == 0) {
    send_ctl(sd.port, CircKind::kSetupFail, sd.vci_out, 0, why);
  }
}

// Our end @p id is gone: free it first, so the listener may open or close at will.
void CircuitNode::end_down(CircuitId id, CircReason why) {
  const NodeId peer = peer_of(id);
  release(id);
  if (listener_ != nullptr) listener_->on_circuit_down(id, peer, why);
}

// ---- the control path

int CircuitNode::open(NodeId dst, uint64_t now, CircuitId* id) {
  if (dst == self_ || dst == 0) return -EINVAL;
  Route r;
  // After a refusal beyond our first hop, another way if there is one; else the same way
  // again (the refusing hop's link may be up by now: a far end started after us).
  const PortId* no = refused_.find(dst);
  if (!(no != nullptr && routes_->lookup_avoiding(dst, *no, &r)) && !routes_->lookup(dst, &r)) return -EHOSTUNREACH;
  const int i = alloc(true);
  if (i < 0) return -ENOSPC;
  Circuit& k = table_[i];
  k.origin = self_;
  k.dst = dst;
  do k.nonce = static_cast<uint32_t>(rng_.next());
  while (k.nonce == 0 || by_setup_.contains(setup_key(self_, k.nonce)));
  by_setup_.put(setup_key(self_, k.nonce), static_cast<CircuitId>(i));
  k.hops = cfg_.max_hops;
  bind_in(static_cast<CircuitId>(i), 1, r.port);
  k.tries = 1;
  k.deadline = now + cfg_.setup_retry_ns;
  k.last_used = now;
  send_setup(k);
  *id = static_cast<CircuitId>(i);
  return 0;
}

int CircuitNode::close(CircuitId id, uint64_t /*now*/) {
  if (id >= table_.size() || table_[id].state == State::kFree || !is_end(table_[id])) return -ENOENT;
  Circuit& k = table_[id];
  teardown_side(k, k.origin == self_ ? 1 : 0, CircReason::kClosed);
  release(id);  // a pending set-up's hops let go of it when it expires
  return 0;
}

void CircuitNode::link_down(PortId p, uint64_t /*now*/) {
  for (CircuitId id = 0; id < table_.size(); ++id) {
    Circuit& k = table_[id];
    if (k.state == State::kFree) continue;
    const int s = k.side[0].on && k.side[0].port == p ? 0 : k.side[1].on && k.side[1].port == p ? 1 : -1;
    if (s < 0) continue;
    teardown_side(k, 1 - s, CircReason::kHopDead);
    if (is_end(k)) {
      end_down(id, CircReason::kHopDead);
    } else {
      release(id);
    }
  }
}

void CircuitNode::on_frame(PortId port, std::span<const uint8_t> frame, uint64_t now) {
  CircuitHeader h;
  if (!circ_read(frame, &h)) {
    ++c_.bad_frame;
    return;
  }
  const uint8_t* body = frame.data() + sizeof h;
  const auto kind = static_cast<CircKind>(h.kind);
  if (kind == CircKind::kData || kind == CircKind::kHello) return;  // route_data()'s, the link's
  if (kind == CircKind::kSetup) {
    SetupBody b;
    std::memcpy(&b, body, sizeof b);
    ++c_.setups_received;
    return on_setup(port, h, b, now);
  }
  ReplyBody b;
  std::memcpy(&b, body, sizeof b);
  if (b.reason > static_cast<uint8_t>(CircReason::kIdle) || b.pad[0] || b.pad[1] || b.pad[2]) {
    ++c_.bad_frame;
    return;
  }
  const auto why = static_cast<CircReason>(b.reason);
  if (kind == CircKind::kSetupOk) return on_setup_ok(port, h.vci.get(), b, now);
  if (kind == CircKind::kSetupFail) return on_setup_fail(port, h.vci.get(), why);
  on_teardown(port, h.vci.get(), why);
}

}  // namespace imago::rel::circ
