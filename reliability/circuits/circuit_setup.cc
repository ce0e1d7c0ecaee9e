/* SPDX-License-Identifier: BSD-3-Clause */
// Circuit set-up and tear-down as they arrive from neighbours (SETUP, SETUP_OK, SETUP_FAIL,
// TEARDOWN), and the timers: set-ups repeated or given up, idle entries let go.
#include "reliability/circuits/circuit_node.h"

namespace imago::rel::circ {

void CircuitNode::on_setup(PortId port, const CircuitHeader& h, const SetupBody& b, uint64_t now) {
  const NodeId origin = b.origin.get(), dst = b.dst.get();
  const uint32_t nonce = b.nonce.get(), back = b.back_vci.get();
  // A node outside the topology is a forgery (or another fabric's): dropped unanswered,
  // so a flood of them earns its sender nothing.
  if (origin == self_ || origin == dst || origin == 0 || dst == 0 || nonce == 0 || back == 0 || h.hops == 0 ||
      !routes_->knows(origin) || !routes_->knows(dst)) {
    ++c_.bad_setup;
    return;
  }
  if (const uint32_t* it = by_setup_.find(setup_key(origin, nonce)); it != nullptr) {
    const Side& up = table_[*it].side[0];
    // The same set-up again (a retry of the origin's): passed on, or answered again. Under
    // the same name from elsewhere: a forgery or a copy from an older route.
    if (up.on && up.port == port && up.vci_out == back) return setup_again(*it, now);
    ++c_.bad_setup;
    return;
  }
  Route r;
  if (dst != self_ && !setup_route(b, port, h.hops, &r)) return;
  const int i = alloc(dst != self_);
  if (i < 0) {
    ++c_.refused_full;
    send_ctl(port, CircKind::kSetupFail, back, 0, CircReason::kFull);
    return;
  }
  const auto id = static_cast<CircuitId>(i);
  Circuit& k = table_[id];
  k.origin = origin, k.dst = dst, k.nonce = nonce;
  k.side[0].on = true, k.side[0].port = port, k.side[0].vci_out = back;
  k.last_used = now;
  by_setup_.put(setup_key(origin, nonce), id);
  if (dst == self_) {  // ours: accept, and tell the way back which VCI to send us
    bind_in(id, 0, port);
    ++c_.setups_ok;
    send_ctl(port, CircKind::kSetupOk, back, k.side[0].vci_in, CircReason::kNone);
    if (listener_ != nullptr) listener_->on_circuit_up(id, origin, false);
    return;
  }
  k.hops = static_cast<uint8_t>(h.hops - 1);
  bind_in(id, 1, r.port);
  k.deadline = now + cfg_.setup_retry_ns * (cfg_.setup_tries + 1);  // the origin has given up by then
  send_setup(k);
}

bool CircuitNode::setup_route(const SetupBody& b, PortId port, uint8_t hops, Route* r) {
  CircReason why = CircReason::kNone;
  if (hops <= 1) {
    ++c_.too_far, why = CircReason::kHops;
  } else if (!routes_->lookup(b.dst.get(), r) || r->port == port) {
    // No route, or one back where it came from (tables in the middle of a change).
    ++c_.no_route, why = CircReason::kNoRoute;
  }
  if (why == CircReason::kNone) return true;
  send_ctl(port, CircKind::kSetupFail, b.back_vci.get(), 0, why);
  return false;
}

void CircuitNode::setup_again(CircuitId id, uint64_t now) {
  Circuit& k = table_[id];
  if (k.state == State::kPending) {  // still on its way: the retry goes on, and so do we
    k.deadline = now + cfg_.setup_retry_ns * (cfg_.setup_tries + 1);
    send_setup(k);
    return;
  }
  const Side& up = k.side[0];  // up: our answer was lost on the way back
  send_ctl(up.port, CircKind::kSetupOk, up.vci_out, up.vci_in, CircReason::kNone);
}

void CircuitNode::on_setup_ok(PortId port, uint32_t vci, const ReplyBody& b, uint64_t now) {
  int s;
  Circuit* k = find(port, vci, &s);
  const uint32_t fwd = b.fwd_vci.get();
  if (k == nullptr || s != 1 || fwd == 0) {
    ++c_.unknown_vci;
    return;
  }
  const auto id = static_cast<CircuitId>(k - table_.data());
  if (k->state == State::kUp) {  // a repeat: the origin retried, an answer of ours may be lost
    if (k->side[0].on && k->side[1].vci_out == fwd)
      send_ctl(k->side[0].port, CircKind::kSetupOk, k->side[0].vci_out, k->side[0].vci_in, CircReason::kNone);
    return;
  }
  k->side[1].vci_out = fwd;
  k->state = State::kUp;
  --pending_;
  k->last_used = now;
  ++c_.setups_ok;
  if (k->origin == self_) {
    refused_.erase(k->dst);
    if (listener_ != nullptr) listener_->on_circuit_up(id, k->dst, true);
    return;
  }
  bind_in(id, 0, k->side[0].port);
  send_ctl(k->side[0].port, CircKind::kSetupOk, k->side[0].vci_out, k->side[0].vci_in, CircReason::kNone);
}

void CircuitNode::on_setup_fail(PortId port, uint32_t vci, CircReason why) {
  int s;
  Circuit* k = find(port, vci, &s);
  if (k == nullptr || s != 1 || k->state != State::kPending) {
    ++c_.unknown_vci;
    return;
  }
  const auto id = static_cast<CircuitId>(k - table_.data());
  ++c_.setups_failed;
  if (k->origin == self_ && why == CircReason::kNoRoute) {
    // Refused beyond our first hop: the next set-up goes out another way (and, refused there
    // too, back this one).
    refused_.put(k->dst, k->side[1].port);
  }
  if (k->origin == self_) return end_down(id, why);
  teardown_side(*k, 0, why);
  release(id);
}

void CircuitNode::on_teardown(PortId port, uint32_t vci, CircReason why) {
  int s;
  Circuit* k = find(port, vci, &s);
  if (k == nullptr) {
    ++c_.unknown_vci;
    return;
  }
  const auto id = static_cast<CircuitId>(k - table_.data());
  ++c_.teardowns_received;
  teardown_side(*k, 1 - s, why);
  if (is_end(*k)) return end_down(id, why);
  release(id);
}

void CircuitNode::poll(uint64_t now) {
  if (now < next_poll_) return;
  uint64_t tick = cfg_.setup_retry_ns;
  if (cfg_.idle_ns != 0 && cfg_.idle_ns / 4 < tick) tick = cfg_.idle_ns / 4;
  next_poll_ = now + (tick > 0 ? tick : 1);
  for (CircuitId id = 0; id < table_.size(); ++id)
    if (table_[id].state != State::kFree) poll_one(id, now);
}

void CircuitNode::poll_one(CircuitId id, uint64_t now) {
  Circuit& k = table_[id];
  if (k.state == State::kPending && now >= k.deadline) {
    if (k.origin == self_ && k.tries < cfg_.setup_tries) {
      ++k.tries;
      k.deadline = now + cfg_.setup_retry_ns;
      send_setup(k);
      return;
    }
    ++c_.expired_setup;
    if (k.origin == self_) return end_down(id, CircReason::kTimeout);
    teardown_side(k, 0, CircReason::kTimeout);
    return release(id);
  }
  if (k.state == State::kUp && cfg_.idle_ns != 0 && now - k.last_used >= cfg_.idle_ns) {
    ++c_.expired_idle;  // soft state: a TEARDOWN that was lost leaves nothing for long
    if (is_end(k)) return end_down(id, CircReason::kIdle);
    release(id);
  }
}

}  // namespace imago::rel::circ
