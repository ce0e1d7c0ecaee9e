/* SPDX-License-Identifier: BSD-3-Clause */
#include "reliability/order/causal.h"

#include <algorithm>
#include <cerrno>

namespace imago::rel::order {

int CausalOrder::init(std::span<const NodeId> members, NodeId self, uint32_t per_source) {
  if (members.empty() || members.size() > kMaxMembers || per_source == 0) return -EINVAL;
  std::vector<NodeId> m(members.begin(), members.end());
  std::sort(m.begin(), m.end());
  if (std::adjacent_find(m.begin(), m.end()) != m.end()) return -EINVAL;
  const auto it = std::lower_bound(m.begin(), m.end(), self);
  if (it == m.end() || *it != self) return -EINVAL;
  members_ = std::move(m);
  self_ = static_cast<uint32_t>(it - members_.begin());
  const size_t w = members_.size();
  v_.assign(w, 0), offered_.assign(w, 0);
  head_.assign(w, kNone), tail_.assign(w, kNone), share_.assign(w, 0), gone_.assign(w, 0);
  per_source_ = per_source;
  const auto holdback = static_cast<uint32_t>(per_source * (w - 1 ? w - 1 : 1));
  pool_.assign(holdback, Held{0, kNone});
  stamps_.assign(size_t{holdback} * w, 0);
  for (uint32_t h = 0; h < holdback; ++h) pool_[h].next = h + 1 < holdback ? h + 1 : kNone;
  free_ = 0, held_ = 0, c_ = {};
  return 0;
}

int CausalOrder::slot_of(NodeId n) const {
  const auto it = std::lower_bound(members_.begin(), members_.end(), n);
  return it == members_.end() || *it != n ? -1 : static_cast<int>(it - members_.begin());
}

void CausalOrder::stamp(std::span<uint32_t> vt) {
  ++v_[self_];
  std::copy_n(v_.begin(), std::min(vt.size(), v_.size()), vt.begin());
}

bool CausalOrder::deliverable(uint32_t src, uint32_t h) const {
  // Its source's next (the streams keep each source's order), and nothing of anyone else's
  // it depends on still undelivered here.
  const uint32_t* vt = vt_of(h);
  if (vt[src] != v_[src] + 1) return false;
  // A member that left: once what we got of it is delivered, nothing more of it will come.
  for (uint32_t k = 0; k < members_.size(); ++k)
    if (k != src && vt[k] > v_[k] && !(gone_[k] && head_[k] == kNone)) return false;
  return true;
}

bool CausalOrder::gone(NodeId n) {
  const int s = slot_of(n);
  if (s < 0 || static_cast<uint32_t>(s) == self_) return false;
  gone_[static_cast<size_t>(s)] = 1;
  return true;
}

CausalOrder::Offer CausalOrder::offer(NodeId src, std::span<const uint32_t> vt, uint64_t handle) {
  const int s = slot_of(src);
  if (s < 0 || static_cast<uint32_t>(s) == self_ || vt.size() != members_.size() ||
      vt[static_cast<size_t>(s)] != offered_[static_cast<size_t>(s)] + 1) {
    ++c_.bad;
    return Offer::kBad;
  }
  if (share_[static_cast<size_t>(s)] >= per_source_ || free_ == kNone) {
    ++c_.refused;
    return Offer::kFull;
  }
  const uint32_t h = free_;
  free_ = pool_[h].next;
  pool_[h] = Held{handle, kNone};
  std::copy(vt.begin(), vt.end(), vt_of(h));
  const auto u = static_cast<uint32_t>(s);
  if (tail_[u] == kNone) {
    head_[u] = h;
  } else {
    pool_[tail_[u]].next = h;
  }
  tail_[u] = h;
  ++offered_[u], ++held_, ++share_[u];
  if (!deliverable(u, h)) ++c_.held_back;
  return Offer::kTaken;
}

}  // namespace imago::rel::order
