/* SPDX-License-Identifier: BSD-3-Clause */
#include "reliability/circuits/circuit_sink.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace imago::rel::circ {

CircuitSink::CircuitSink(const Config& c, NodeId self, const RoutingTable* routes, uint64_t seed,
                         CircuitPorts* ports, CircuitListener* listener)
    : cfg_(c), self_(self), ports_(ports), listener_(listener),
      node_(c.circuits, self, routes, seed, ports, this), scratch_(sizeof(CircuitHeader) + c.max_frame) {}

CircuitSink::Peer* CircuitSink::find(NodeId id) {
  for (Peer& p : peers_)
    if (p.id == id) return &p;
  return nullptr;
}

int CircuitSink::add_peer(NodeId peer, uint64_t now) {
  if (find(peer) != nullptr) return -EEXIST;
  peers_.push_back(Peer{peer, self_ < peer});
  now_ = now;
  if (peers_.back().opener) try_open(peers_.back(), now);
  return 0;
}

void CircuitSink::try_open(Peer& p, uint64_t now) {
  CircuitId id;
  if (node_.open(p.id, now, &id) == 0) {
    p.open = true, p.circuit = id;
    return;
  }
  // No route (yet) or no room: try again later, less and less often.
  p.backoff = std::min(p.backoff == 0 ? cfg_.reopen_ns : 2 * p.backoff, 64 * cfg_.reopen_ns);
  p.reopen_at = now + p.backoff;
}

bool CircuitSink::up(NodeId peer) const {
  for (const Peer& p : peers_)
    if (p.id == peer) return p.up;
  return false;
}

bool CircuitSink::route_to(NodeId peer, PortId* port, uint32_t* vci) const {
  for (const Peer& p : peers_)
    if (p.id == peer) return p.up && node_.data_out(p.circuit, port, vci);
  return false;
}

void CircuitSink::on_circuit_up(CircuitId id, NodeId peer, bool origin) {
  Peer* p = find(peer);
  if (p == nullptr || p->opener != origin || closed_) {  // no peer of ours, opened by the wrong end, or we stop
    if (!origin) node_.close(id, now_);
    return;
  }
  if (origin && id != p->circuit) return;
  // The opener keeps one circuit at a time, so a new one it opened makes ours stale (its
  // TEARDOWN may have been lost, or it saw a hop die first); but a SETUP may be forged or
  // replayed, so the new one waits for proof (deliver_held()) while ours works.
  if (!origin && p->up && p->circuit != id) return hold(*p, id);
  take(*p, id, origin);
}

void CircuitSink::take(Peer& p, CircuitId id, bool origin) {
  p.up = true, p.circuit = id, p.backoff = 0;
  if (listener_ != nullptr) listener_->on_circuit_up(id, p.id, origin);
}

void CircuitSink::hold(Peer& p, CircuitId id) {
  ++c_.setups_held;
  if (p.held) {  // the newer wins: a real opener that moved on has given up the older one
    ++c_.setups_unproven;
    node_.close(p.candidate, now_);
  } else {
    ++held_;
  }
  p.held = true, p.candidate = id;
}

// The held circuit proved itself: it replaces the live one, reported down like any other so
// that both ends tell their application the circuit moved.
void CircuitSink::promote(Peer& p) {
  const CircuitId old = p.circuit;
  p.held = false, --held_;
  node_.close(old, now_);
  if (listener_ != nullptr) listener_->on_circuit_down(old, p.id, CircReason::kReplaced);
  take(p, p.candidate, false);
}

void CircuitSink::on_circuit_down(CircuitId id, NodeId peer, CircReason why) {
  Peer* p = find(peer);
  if (p != nullptr && p->held && p->candidate == id) {  // idle or torn down before any proof
    p->held = false, --held_;
    ++c_.setups_unproven;
    return;
  }
  if (p == nullptr || p->circuit != id || !(p->up || p->open)) return;
  p->up = false, p->open = false;
  if (p->opener) {
    p->backoff = std::min(p->backoff == 0 ? cfg_.reopen_ns : 2 * p->backoff, 64 * cfg_.reopen_ns);
    p->reopen_at = now_ + p->backoff;
  }
  if (listener_ != nullptr) listener_->on_circuit_down(id, peer, why);
  if (p->held) {  // the live one is gone: the held one is all there is
    p->held = false, --held_;
    take(*p, p->candidate, false);
  }
}

void CircuitSink::poll(uint64_t now) {
  now_ = now;
  node_.poll(now);
  for (Peer& p : peers_) {
    if (!p.opener || p.open || now < p.reopen_at || closed_) continue;
    ++c_.reopened;
    try_open(p, now);
  }
}

unsigned CircuitSink::close_all(uint64_t now) {
  now_ = now;
  closed_ = true;
  unsigned n = 0;
  for (Peer& p : peers_) {
    if (p.held) node_.close(p.candidate, now), p.held = false, --held_;
    if (p.up || p.open) n += node_.close(p.circuit, now) == 0;
    p.up = p.open = false;
  }
  return n;
}

bool CircuitSink::send_frame(NodeId peer, std::span<const uint8_t> frame) {
  PortId port;
  uint32_t vci;
  if (!route_to(peer, &port, &vci)) {
    ++c_.no_circuit;
    return false;
  }
  if (frame.size() > cfg_.max_frame) return true;  // the engine never makes one: dropped
  if (held_ != 0) also_on_held(peer, frame);
  if (send_on(port, vci, frame) == 0) return false;
  ++c_.frames_out;
  return true;
}

// A restarted peer proves itself by answering our challenge, which must reach it on the
// circuit it opened: handshakes go on the held circuit too.
void CircuitSink::also_on_held(NodeId peer, std::span<const uint8_t> frame) {
  const Peer* p = find(peer);
  PortId port;
  uint32_t vci;
  if (p == nullptr || !p->held || frame.size() < 2) return;
  const auto type = static_cast<FrameType>(frame[1]);
  if (type != FrameType::kHello && type != FrameType::kHelloAck) return;
  if (node_.data_out(p->candidate, &port, &vci)) send_on(port, vci, frame);
}

int CircuitSink::send_on(PortId port, uint32_t vci, std::span<const uint8_t> frame) {
  uint8_t head[sizeof(CircuitHeader)];
  circ_header(head, CircKind::kData, vci);
  circ_seal(head, 0);
  const int sent = ports_->send_parts(port, head, frame);
  if (sent >= 0) return sent;
  // A port that cannot: joined here.
  std::memcpy(scratch_.data(), head, sizeof head);
  std::memcpy(scratch_.data() + sizeof head, frame.data(), frame.size());
  return ports_->send(port, {scratch_.data(), sizeof head + frame.size()}) ? 1 : 0;
}

void CircuitSink::forward(PortId out, uint32_t vci, std::span<const uint8_t> frame) {
  const size_t n = std::min(frame.size(), scratch_.size());
  std::memcpy(scratch_.data(), frame.data(), n);
  circ_rewrite_vci(scratch_.data(), vci);
  // A full port loses the frame; the ends repair it (a hop keeps nothing per message).
  if (!ports_->send(out, {scratch_.data(), n})) ++c_.forward_refused;
}

void CircuitSink::on_frame(PortId port, std::span<const uint8_t> frame, uint64_t now) {
  now_ = now;
  CircuitHeader h;
  if (!circ_read(frame, &h)) return node_.on_frame(port, frame, now);  // counted there
  if (h.kind != static_cast<uint8_t>(CircKind::kData)) return node_.on_frame(port, frame, now);
  PortId out;
  uint32_t vci;
  CircuitId local;
  switch (node_.route_data(port, h.vci.get(), now, &out, &vci, &local)) {
    case CircuitNode::Verdict::kDrop: return;
    case CircuitNode::Verdict::kForward: return forward(out, vci, frame);
    case CircuitNode::Verdict::kLocal: break;
  }
  deliver(local, frame.subspan(sizeof(CircuitHeader)), now);
}

void CircuitSink::deliver(CircuitId local, std::span<const uint8_t> frame, uint64_t now) {
  if (engine_ == nullptr) return;
  // The sender's node id sits at offset 4 of every engine frame (wire.h): only the far end
  // of this circuit may speak on it.
  const NodeId far = node_.peer_of(local);
  Be32 sender;
  if (frame.size() < 8 || (std::memcpy(&sender, frame.data() + 4, 4), sender.get() != far)) {
    ++c_.wrong_peer;
    return;
  }
  ++c_.frames_in;
  if (held_ != 0)
    if (Peer* p = find(far); p != nullptr && p->held && p->candidate == local)
      return deliver_held(*p, far, frame, now);
  engine_->on_frame(frame, now);
}

// A frame on the held circuit: if the peer's engine takes it (the session's tokens and
// ISNs, or a proven restart), only the peer sent it, so the opener really moved.
void CircuitSink::deliver_held(Peer& p, NodeId far, std::span<const uint8_t> frame, uint64_t now) {
  const PeerCounters* pc = engine_->counters(far);
  const uint64_t before = pc != nullptr ? pc->pkts_received : 0;
  engine_->on_frame(frame, now);
  if (pc != nullptr && pc->pkts_received != before) promote(p);
}

}  // namespace imago::rel::circ
