/* SPDX-License-Identifier: BSD-3-Clause */
// Total order: the member's side (messages held per source, ORDER records in a ring, delivery
// up to the stable number, HOLD to the sequencer), the sequencer's (numbering, stability) and
// the flush that makes a new epoch after a view change.
#include "reliability/order/total.h"

#include <algorithm>
#include <cerrno>

namespace imago::rel::order {

int TotalOrder::init(std::span<const NodeId> members, NodeId self, uint32_t window, Out* out) {
  CausalOrder check;  // the same rules for a view
  if (window == 0 || out == nullptr || check.init(members, self, 1) != 0) return -EINVAL;
  members_.assign(members.begin(), members.end());
  std::sort(members_.begin(), members_.end());
  srcs_.clear();
  for (NodeId n : members_) srcs_.push_back(Src{n, true, false, 0, 0, 0, std::vector<uint64_t>(size_t{2} * window), 0, 0});
  self_ = self, window_ = window, out_ = out;
  ring_.assign(size_t{2} * window, Slot{});
  holds_.assign(members_.size(), 0);
  reps_.assign(members_.size(), TotalCtl{});
  epoch_ = 0, epoch_seq_ = members_.front(), promised_ = 0, start_ = 1, deliver_ = 1;
  stable_ = hold_ = told_hold_ = 0, next_g_ = 1, flushing_ = false, flush_epoch_ = 0, turn_ = 0, c_ = {};
  return 0;
}

TotalOrder::Src* TotalOrder::find(NodeId n) {
  auto it = std::lower_bound(srcs_.begin(), srcs_.end(), n, [](const Src& x, NodeId v) { return x.id < v; });
  return it == srcs_.end() || it->id != n ? nullptr : &*it;
}

uint64_t TotalOrder::own_pending() const {
  const auto it = std::lower_bound(srcs_.begin(), srcs_.end(), self_, [](const Src& x, NodeId v) { return x.id < v; });
  return it->arrived - it->delivered;
}

bool TotalOrder::may_send() const { return own_pending() < window_; }

uint32_t TotalOrder::index(const Src& x) const { return static_cast<uint32_t>(&x - srcs_.data()); }

bool TotalOrder::push(Src& x, uint64_t handle) {
  if (x.q_len == x.q.size()) {
    ++c_.bad;  // flow control says this cannot be: the source sent too much
    return false;
  }
  x.q[(x.q_head + x.q_len) % x.q.size()] = handle;
  ++x.q_len, ++x.arrived;
  return true;
}

bool TotalOrder::sent(uint64_t handle) {
  Src& me = *find(self_);
  if (me.arrived - me.delivered >= window_) {
    ++c_.refused;
    return false;
  }
  return on_message(me, handle);
}

bool TotalOrder::on_data(NodeId src, uint64_t handle) {
  Src* x = find(src);
  if (x == nullptr || src == self_) {
    ++c_.bad;
    dropped_.push_back(handle);
    return true;
  }
  if (x->closed) {  // gone from the view, and past what was numbered before it went
    ++c_.dropped_departed;
    dropped_.push_back(handle);
    return true;
  }
  return on_message(*x, handle);
}

bool TotalOrder::on_message(Src& x, uint64_t handle) {
  if (!push(x, handle)) return false;
  advance_hold();
  number_pending();
  return true;
}

void TotalOrder::number_pending() {
  if (epoch_seq_ != self_ || flushing_) return;
  // Each source's messages in its order, one of each source in turn from the one after the
  // last numbered, never more than a window past the stable number (what the slowest member
  // can hold). Source by source, the lower ids took every window a small one left, and the
  // highest member's messages waited as long as the others sent.
  const auto n = static_cast<uint32_t>(srcs_.size());
  for (uint32_t idle = 0; idle < n && next_g_ <= stable_ + window_; turn_ = (turn_ + 1) % n) {
    Src& x = srcs_[turn_];
    if (!x.live || x.ordered >= x.arrived) {
      ++idle;
      continue;
    }
    idle = 0;
    const uint64_t g = next_g_++;
    slot(g) = Slot{g, turn_, ++x.ordered};
    ++c_.ordered;
    out_->to_all(TotalCtl{TotalCtl::kOrder, epoch_, g, x.id, x.ordered});
  }
  advance_hold();
}

void TotalOrder::advance_hold() {
  while (hold_ + 1 < deliver_ + window_) {
    const Slot& o = slot(hold_ + 1);
    if (o.g != hold_ + 1 || srcs_[o.src].arrived < o.s) break;
    ++hold_;
  }
  if (hold_ <= told_hold_ || promised_ > epoch_) return;  // nothing new, or mid-flush
  told_hold_ = hold_;
  // To every member, not to the sequencer alone: each counts the holds itself and delivers
  // as soon as all its view holds a number, a trip sooner than waiting for STABLE.
  const TotalCtl h{TotalCtl::kHold, epoch_, hold_, self_, 0};
  out_->to_all(h);
  on_hold(self_, h);
}

void TotalOrder::on_hold(NodeId from, const TotalCtl& c) {
  Src* x = find(from);
  if (flushing_ || c.epoch != epoch_ || promised_ > epoch_ || x == nullptr) return;
  const bool seq = epoch_seq_ == self_;
  if (seq && c.g >= next_g_) {  // holds what was never numbered: a lie
    ++c_.bad;
    return;
  }
  holds_[index(*x)] = std::max(holds_[index(*x)], c.g);
  // Stable: every member of our view holds it. Never beyond what we hold ourselves (another
  // member may have an ORDER we do not have yet).
  uint64_t low = hold_;
  for (NodeId m : members_) low = std::min(low, holds_[index(*find(m))]);
  if (low <= stable_) return;
  stable_ = low;
  if (!seq) return;
  out_->to_all(TotalCtl{TotalCtl::kStable, epoch_, stable_, self_, 0});
  number_pending();  // the window moved
}

void TotalOrder::on_order(NodeId from, const TotalCtl& c) {
  Src* x = find(c.src);
  if (from != epoch_seq_ || c.epoch != epoch_ || promised_ > epoch_) return;  // not this epoch's
  if (x == nullptr || c.g != next_g_ || c.s != x->ordered + 1 || c.g >= deliver_ + ring_.size()) {
    ++c_.bad;
    return;
  }
  slot(c.g) = Slot{c.g, index(*x), c.s};
  ++next_g_, ++x->ordered;
  advance_hold();
}

void TotalOrder::on_ctl(NodeId from, const TotalCtl& c) {
  switch (c.kind) {
    case TotalCtl::kOrder: return on_order(from, c);
    case TotalCtl::kStable:
      if (from == epoch_seq_ && c.epoch == epoch_ && promised_ <= epoch_) stable_ = std::max(stable_, std::min(c.g, hold_));
      return;
    case TotalCtl::kHold: return on_hold(from, c);
    case TotalCtl::kFlushReq: return on_flush_req(from, c);
    case TotalCtl::kFlushRep: return on_flush_rep(from, c);
    case TotalCtl::kNewEpoch:
      if (c.epoch <= epoch_ || c.epoch < promised_ || find(from) == nullptr) return;  // stale
      // H is the lowest hold of the flush, ours included: never above what we hold, never
      // below what we delivered. Anything else is a lie.
      if (c.g > hold_ || c.g + 1 < deliver_) break;
      return install(from, c.epoch, c.g);
  }
  ++c_.bad;
}

}  // namespace imago::rel::order
