/* SPDX-License-Identifier: BSD-3-Clause */
// Total order in steady state: messages held per source, ACKs out and in, delivery in
// (stamp, source) order once every member left holds a message and has passed its stamp.
#include "reliability/order/total.h"

#include <algorithm>
#include <cerrno>

namespace imago::rel::order {

int TotalOrder::init(std::span<const NodeId> members, NodeId self, uint32_t window, Out* out) {
  std::vector<NodeId> ids(members.begin(), members.end());
  std::sort(ids.begin(), ids.end());
  const bool distinct = std::adjacent_find(ids.begin(), ids.end()) == ids.end();
  if (window == 0 || out == nullptr || ids.empty() || ids.size() > kMaxMembers || !distinct ||
      !std::binary_search(ids.begin(), ids.end(), self))
    return -EINVAL;
  const size_t n = ids.size();
  srcs_.clear();
  for (NodeId id : ids) {
    Src x{};
    x.id = id, x.alive = true, x.cut = kLive;
    x.q.resize(size_t{2} * window);
    srcs_.push_back(std::move(x));
  }
  self_ = self, window_ = window, out_ = out;
  self_ix_ = static_cast<uint32_t>(std::lower_bound(ids.begin(), ids.end(), self) - ids.begin());
  held_.assign(n * n, 0), done_.assign(n * n, 0), told_held_.assign(n, 0), told_done_.assign(n, 0);
  reps_.assign(n * n, Rep{}), cuts_.assign(n, kLive), dropped_.clear();
  clock_ = 0, said_ = false, epoch_ = 0, promised_ = 0, flushing_ = false, flush_epoch_ = 0;
  incoming_epoch_ = 0, incoming_n_ = 0, c_ = {};
  return 0;
}

const TotalOrder::Src* TotalOrder::find(NodeId n) const {
  auto it = std::lower_bound(srcs_.begin(), srcs_.end(), n, [](const Src& x, NodeId v) { return x.id < v; });
  return it == srcs_.end() || it->id != n ? nullptr : &*it;
}

uint64_t TotalOrder::own_pending() const {
  const Src& s = me();
  uint64_t low = s.delivered;
  for (uint32_t m = 0; m < srcs_.size(); ++m)
    if (m != self_ix_ && srcs_[m].cut == kLive && srcs_[m].alive) low = std::min(low, done_[m * srcs_.size() + self_ix_]);
  return s.arrived - low;
}

bool TotalOrder::coordinator() const {
  for (const Src& x : srcs_)
    if (x.alive) return x.id == self_;
  return false;
}

bool TotalOrder::take(Src& x, uint64_t handle, uint64_t ts) {
  if (x.q_len == x.q.size()) {
    ++c_.bad;  // flow control says this cannot be: the source sent too much
    return false;
  }
  x.q[(x.q_head + x.q_len) % x.q.size()] = Held{handle, ts};
  ++x.q_len, ++x.arrived;
  x.last_ts = ts, x.clock = std::max(x.clock, ts);
  clock_ = std::max(clock_, ts);
  return true;
}

bool TotalOrder::sent(uint64_t handle, uint64_t ts) {
  if (!may_send() || ts <= clock_) {
    ++c_.refused;
    return false;
  }
  return take(me(), handle, ts);
}

bool TotalOrder::on_data(NodeId src, uint64_t ts, uint64_t handle) {
  Src* x = find(src);
  if (x == nullptr || src == self_ || ts <= x->last_ts) {
    ++c_.bad;
    dropped_.push_back(handle);
    return true;
  }
  if (x->cut != kLive) {  // gone, and past the cut a new epoch made of it
    ++c_.dropped_departed;
    dropped_.push_back(handle);
    return true;
  }
  return take(*x, handle, ts);
}

// One ACK per source whose count here moved since we last said: it carries our clock and what
// we hold (the others' wait for it: at once), and what we delivered (the source's window:
// every half window, at once when the source may be waiting for us, and when idle).
void TotalOrder::tell(bool idle) {
  if (!said_) out_->to_all(TotalCtl{TotalCtl::kInstalled, epoch_, clock_, self_, 0}), said_ = true;
  // Mid-flush we hold no more than we reported: an ACK of more would let a member deliver
  // beyond the cut the flush takes from our report.
  if (promised_ > epoch_) return;
  const uint64_t step = std::max<uint64_t>(1, window_ / 2);
  for (Src& x : srcs_) {
    const uint32_t k = index(x);
    if (k == self_ix_ || x.cut != kLive) continue;
    const uint64_t news = x.delivered - told_done_[k];
    const bool waits = x.arrived - told_done_[k] >= window_;
    if (x.arrived <= told_held_[k] && news < step && !(news > 0 && (idle || waits))) continue;
    told_held_[k] = x.arrived, told_done_[k] = x.delivered;
    out_->to_all(TotalCtl{TotalCtl::kAck, epoch_, clock_, x.id, x.arrived, x.delivered});
  }
}

void TotalOrder::on_ack(NodeId from, const TotalCtl& c) {
  Src* m = find(from);
  Src* x = find(c.src);
  // What it delivered it holds; of ours it cannot hold more than we sent.
  if (m == nullptr || x == nullptr || m == x || from == self_ || c.d > c.s ||
      (x == &me() && c.s > me().arrived)) {
    ++c_.bad;
    return;
  }
  m->clock = std::max(m->clock, c.g);
  uint64_t& h = held(index(*m), index(*x));
  uint64_t& d = done(index(*m), index(*x));
  h = std::max(h, c.s), d = std::max(d, c.d);
}

bool TotalOrder::settled() const {
  for (const Src& x : srcs_)
    if (x.alive != (x.cut == kLive)) return false;
  return true;
}

// Nothing is delivered while a flush we answered is not installed, while our view is not our
// epoch's, before every member left said it installed our epoch, or while one is in a newer
// one (its NEW_EPOCH is on its way to us, or we were left out).
bool TotalOrder::frozen() const {
  if (promised_ > epoch_ || !settled()) return true;
  for (const Src& x : srcs_)
    if (x.cut == kLive && &x != &me() && (!x.said || x.installed != epoch_)) return true;
  return false;
}

// The lowest (stamp, source id) we hold.
const TotalOrder::Src* TotalOrder::next_in_order() const {
  const Src* best = nullptr;
  for (const Src& x : srcs_) {
    if (x.q_len == 0) continue;
    if (best == nullptr || x.q[x.q_head].ts < best->q[best->q_head].ts) best = &x;
  }
  return best;
}

// Whether x's next message can be delivered: every other member left holds it (a member gone
// is within its cut, which every member left holds) and has a clock at its stamp or beyond
// (its later messages come above it). Ties between stamps go to the lower id: sources are
// visited in id order above, and a member with the same clock sends above it.
bool TotalOrder::placed(const Src& x) {
  const uint64_t ts = x.q[x.q_head].ts, s = x.delivered + 1;
  const uint32_t k = index(x);
  for (uint32_t m = 0; m < srcs_.size(); ++m) {
    if (m == k || m == self_ix_ || srcs_[m].cut != kLive) continue;
    if (srcs_[m].clock < ts) return false;
    if (x.cut == kLive && held(m, k) < s) return false;
  }
  return true;
}

void TotalOrder::on_ctl(NodeId from, const TotalCtl& c) {
  switch (c.kind) {
    case TotalCtl::kAck: return on_ack(from, c);
    case TotalCtl::kFlushReq: return on_flush_req(from, c);
    case TotalCtl::kFlushRep: return on_flush_rep(from, c);
    case TotalCtl::kNewEpoch: return on_new_epoch(from, c);
    case TotalCtl::kInstalled:
      if (Src* m = find(from); m != nullptr) {
        m->installed = std::max(m->installed, c.epoch), m->said = true;
        m->clock = std::max(m->clock, c.g);
        return;
      }
      break;
    case TotalCtl::kPromised:
      // A member answered a newer flush than ours: ask again above it.
      if (flushing_ && find(from) != nullptr && c.epoch > flush_epoch_ && c.epoch >= promised_) {
        promised_ = c.epoch;
        start_flush();
      }
      return;
  }
  ++c_.bad;
}

}  // namespace imago::rel::order
