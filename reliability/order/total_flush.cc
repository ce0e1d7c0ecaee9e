/* SPDX-License-Identifier: BSD-3-Clause */
// Total order across a view change: the lowest member left asks everyone how far they hold,
// takes the lowest (H), and starts a new epoch at H + 1. See total.h for why that is safe.
#include <algorithm>

#include "reliability/order/total.h"

namespace imago::rel::order {

void TotalOrder::view(std::span<const NodeId> members) {
  std::vector<NodeId> next;
  for (NodeId m : members)
    if (std::binary_search(members_.begin(), members_.end(), m)) next.push_back(m);
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  if (next == members_ || !std::binary_search(next.begin(), next.end(), self_)) return;
  members_ = std::move(next);
  for (Src& x : srcs_) x.live = std::binary_search(members_.begin(), members_.end(), x.id);
  if (sequencer()) start_flush();  // else the new sequencer's FLUSH_REQ comes
}

void TotalOrder::start_flush() {
  flushing_ = true;
  flush_epoch_ = std::max({flush_epoch_, epoch_, promised_}) + 1;
  promised_ = flush_epoch_;
  std::fill(reps_.begin(), reps_.end(), TotalCtl{});
  reps_[index(*find(self_))] = TotalCtl{TotalCtl::kFlushRep, flush_epoch_, hold_, epoch_, start_};
  out_->to_all(TotalCtl{TotalCtl::kFlushReq, flush_epoch_, 0, self_, 0});
  finish_flush();  // a view of one
}

void TotalOrder::on_flush_req(NodeId from, const TotalCtl& c) {
  if (c.epoch <= epoch_ || c.epoch < promised_ || find(from) == nullptr) return;  // stale
  // A promise: nothing of an older epoch is taken from now on (no STABLE, no ORDER), so
  // what we report is all we will ever deliver of it.
  promised_ = c.epoch;
  out_->to_one(from, TotalCtl{TotalCtl::kFlushRep, c.epoch, hold_, epoch_, start_});
}

void TotalOrder::on_flush_rep(NodeId from, const TotalCtl& c) {
  Src* x = find(from);
  if (!flushing_ || c.epoch != flush_epoch_ || x == nullptr || !x->live) return;
  reps_[index(*x)] = c;
  finish_flush();
}

// Once every member answered: H is the lowest hold, a member still in an older epoch counted
// only up to where the newest epoch began (numbers above that of its epoch are void).
void TotalOrder::finish_flush() {
  uint32_t newest = 0;
  uint64_t newest_start = 1;
  for (NodeId m : members_) {
    const TotalCtl& r = reps_[index(*find(m))];
    if (r.kind != TotalCtl::kFlushRep) return;  // not everyone yet
    if (r.src >= newest) newest = static_cast<uint32_t>(r.src), newest_start = r.s;
  }
  uint64_t h = ~uint64_t{0};
  for (NodeId m : members_) {
    const TotalCtl& r = reps_[index(*find(m))];
    h = std::min(h, r.src == newest ? r.g : std::min<uint64_t>(r.g, newest_start - 1));
  }
  flushing_ = false;
  out_->to_all(TotalCtl{TotalCtl::kNewEpoch, flush_epoch_, h, self_, 0});
  install(self_, flush_epoch_, h);
}

void TotalOrder::install(NodeId seq, uint32_t epoch, uint64_t h) {
  // Numbers above h are void; what each source had numbered up to h is what counts.
  for (uint64_t g = h + 1; g < next_g_ && g < deliver_ + ring_.size(); ++g)
    if (slot(g).g == g) slot(g) = Slot{};
  for (Src& x : srcs_) x.ordered = x.delivered;
  for (uint64_t g = deliver_; g <= h && g < deliver_ + ring_.size(); ++g)
    if (slot(g).g == g) srcs_[slot(g).src].ordered = std::max(srcs_[slot(g).src].ordered, slot(g).s);
  for (Src& x : srcs_) {
    if (x.live || x.closed) continue;
    const uint64_t keep = x.ordered - x.delivered;  // a departed source: the rest never comes
    c_.dropped_departed += x.arrived - x.ordered;
    for (uint64_t i = keep; i < x.q_len; ++i) dropped_.push_back(x.q[(x.q_head + i) % x.q.size()]);
    x.q_len = static_cast<uint32_t>(std::min<uint64_t>(x.q_len, keep));
    x.arrived = x.ordered, x.closed = true;
  }
  epoch_ = epoch, epoch_seq_ = seq, promised_ = std::max(promised_, epoch);
  start_ = h + 1, next_g_ = h + 1;
  hold_ = std::min(hold_, h), stable_ = std::max(stable_, h), told_hold_ = 0;
  std::fill(holds_.begin(), holds_.end(), h);
  ++c_.epochs;
  advance_hold();
  number_pending();
}

}  // namespace imago::rel::order
