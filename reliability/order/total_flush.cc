/* SPDX-License-Identifier: BSD-3-Clause */
// Total order across a view change: the lowest member left asks everyone what they hold of
// each source, cuts each member gone at the lowest count held, and starts a new epoch. See
// total.h for why that is safe.
#include <algorithm>

#include "reliability/order/total.h"

namespace imago::rel::order {

void TotalOrder::view(std::span<const NodeId> members) {
  bool changed = false;
  for (Src& x : srcs_) {
    const bool in = std::find(members.begin(), members.end(), x.id) != members.end();
    if (x.alive && !in && x.id != self_) x.alive = false, changed = true;
  }
  if (changed && coordinator()) start_flush();  // else the lowest member left's FLUSH_REQ comes
}

// Epoch numbers: a round times 64 plus the index of the member whose flush made it.
bool TotalOrder::epoch_of(uint32_t e, NodeId from) const {
  const Src* x = find(from);
  return x != nullptr && e % kMaxMembers == index(*x);
}

void TotalOrder::start_flush() {
  const uint32_t top = std::max({epoch_, promised_, flush_epoch_});
  flush_epoch_ = (top / kMaxMembers + 1) * kMaxMembers + self_ix_;
  flushing_ = true, promised_ = flush_epoch_;
  std::fill(reps_.begin(), reps_.end(), Rep{});
  for (const Src& x : srcs_) reps_[self_ix_ * srcs_.size() + index(x)] = Rep{true, epoch_, x.arrived, x.cut};
  out_->to_all(TotalCtl{TotalCtl::kFlushReq, flush_epoch_, 0, self_, 0});
  finish_flush();  // a view of one
}

void TotalOrder::on_flush_req(NodeId from, const TotalCtl& c) {
  if (!epoch_of(c.epoch, from) || from == self_) {
    ++c_.bad;
    return;
  }
  // Stale, asked again, or from a member gone from our view: a promise to it would hold us
  // back for good (its flush can only end by leaving us out).
  if (c.epoch <= epoch_ || c.epoch == promised_ || !find(from)->alive) return;
  if (c.epoch < promised_) return out_->to_one(from, TotalCtl{TotalCtl::kPromised, promised_, 0, self_, 0});
  // A promise: we deliver nothing until an epoch at least this new is installed, so what we
  // report is all we delivered.
  promised_ = c.epoch;
  flushing_ = false;  // a flush of ours, if any, is older: its members answer this one
  for (const Src& x : srcs_) out_->to_one(from, TotalCtl{TotalCtl::kFlushRep, c.epoch, epoch_, x.id, x.arrived, x.cut});
}

void TotalOrder::on_flush_rep(NodeId from, const TotalCtl& c) {
  Src* m = find(from);
  Src* x = find(c.src);
  if (m == nullptr || x == nullptr) {
    ++c_.bad;
    return;
  }
  if (!flushing_ || c.epoch != flush_epoch_ || !m->alive) return;
  reps_[index(*m) * srcs_.size() + index(*x)] = Rep{true, static_cast<uint32_t>(c.g), c.s, c.d};
  finish_flush();
}

// Once every member left answered for every source: a cut the newest epoch among the answers
// made is kept (its members may have delivered by it); a member gone since is cut at the
// lowest count any member left holds (whatever was delivered anywhere every member held).
void TotalOrder::finish_flush() {
  const size_t n = srcs_.size();
  uint32_t newest = 0;
  for (uint32_t m = 0; m < n; ++m) {
    if (!srcs_[m].alive) continue;
    for (uint32_t x = 0; x < n; ++x)
      if (!reps_[m * n + x].got) return;  // not everyone yet
    newest = std::max(newest, reps_[m * n].epoch);
  }
  for (uint32_t x = 0; x < n; ++x) {
    uint64_t cut = kLive, low = kLive;
    for (uint32_t m = 0; m < n; ++m) {
      if (!srcs_[m].alive) continue;
      const Rep& r = reps_[m * n + x];
      if (r.epoch == newest && r.cut != kLive) cut = r.cut;
      low = std::min(low, r.held);
    }
    cuts_[x] = cut != kLive || srcs_[x].alive ? cut : low;
  }
  flushing_ = false;
  for (uint32_t x = 0; x < n; ++x) out_->to_all(TotalCtl{TotalCtl::kNewEpoch, flush_epoch_, 0, srcs_[x].id, 0, cuts_[x]});
  install(flush_epoch_);
}

// NEW_EPOCH comes as one record per source, in id order, in the flush member's stream.
void TotalOrder::on_new_epoch(NodeId from, const TotalCtl& c) {
  Src* x = find(c.src);
  if (!epoch_of(c.epoch, from) || x == nullptr || from == self_) {
    ++c_.bad;
    return;
  }
  if (c.epoch <= epoch_ || c.epoch < promised_) return;  // stale: we answered a newer flush
  if (c.epoch != incoming_epoch_) incoming_epoch_ = c.epoch, incoming_n_ = 0;
  if (index(*x) != incoming_n_) {  // not the next source: a broken NEW_EPOCH
    ++c_.bad;
    incoming_epoch_ = 0;
    return;
  }
  // A cut below what we delivered, or above what we hold, was never any flush's.
  if (c.d != kLive && (c.d < x->delivered || c.d > x->arrived || x->id == self_)) {
    ++c_.bad;
    incoming_epoch_ = 0;
    return;
  }
  cuts_[incoming_n_++] = c.d;
  if (incoming_n_ == srcs_.size()) install(c.epoch);
}

void TotalOrder::install(uint32_t epoch) {
  for (uint32_t k = 0; k < srcs_.size(); ++k) {
    Src& x = srcs_[k];
    if (cuts_[k] == kLive) continue;
    x.alive = false;  // the epoch says it is gone: so it is for us
    if (x.cut != kLive) continue;
    x.cut = std::max(cuts_[k], x.delivered);  // never below what we delivered (on_new_epoch checks)
    const uint64_t keep = x.cut - x.delivered;  // its messages beyond the cut never come
    c_.dropped_departed += x.arrived - x.cut;
    for (uint64_t i = keep; i < x.q_len; ++i) dropped_.push_back(x.q[(x.q_head + i) % x.q.size()].handle);
    x.q_len = static_cast<uint32_t>(std::min<uint64_t>(x.q_len, keep));
    x.arrived = x.cut;
  }
  epoch_ = epoch, promised_ = std::max(promised_, epoch), incoming_epoch_ = 0;
  me().installed = epoch, said_ = true;
  ++c_.epochs;
  // With our clock: the ACKs we held back in the flush may have been the last to carry it.
  out_->to_all(TotalCtl{TotalCtl::kInstalled, epoch, clock_, self_, 0});
  if (!settled() && coordinator()) start_flush();  // we saw a member go that the flush did not
}

}  // namespace imago::rel::order
