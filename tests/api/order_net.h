// SPDX-License-Identifier: BSD-3-Clause
// Members of an ordered group without EAL, for the tests and the fuzz target of
// api/group_order.h: each member's GroupOrder sends into per-source FIFO queues at every
// other member ("streams"), which a member's pull reads interleaved at random (its rx ring).
// Descriptors above IMAGO_MSG_INLINE_MAX bytes live on the heap (a pool buffer), counted in
// Net::buffers until given back.
#pragma once

#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "api/group_order.h"

namespace imago::api::test {

using imago::api::GroupOrder;
using imago::rel::NodeId;
namespace order = imago::api::order;

constexpr uint32_t kMaxN = 6;

struct Net;

/** One member: its ordering, what it delivered, and its Io into the net. */
struct Member final : GroupOrder::Io {
  Net* net = nullptr;
  NodeId id = 0;
  uint32_t slot = 0;
  GroupOrder g;
  bool crashed = false;
  uint32_t sent_msgs = 0;
  uint32_t fast_sends = 0, slow_sends = 0;          ///< messages sent at once, coalesced
  std::vector<uint32_t> delivered;                  ///< per slot
  std::vector<std::pair<NodeId, uint32_t>> log;     ///< (src, seq) in delivery order
  std::vector<std::deque<imago_msg>> in;            ///< per source slot: its stream to us, FIFO
  std::deque<imago_msg> events;                     ///< events due
  int send(std::span<const uint8_t> head, std::span<const uint8_t> body, bool fast) override;
  void drop(imago_msg& m) override;
};

struct Net {
  std::mt19937_64 rng;
  std::vector<std::unique_ptr<Member>> m;
  std::vector<NodeId> ids;
  uint64_t buffers = 0;  ///< heap buffers out (pool-tier descriptors)
  double refuse = 0.1;   ///< a send refused (ring full)
  uint64_t violations = 0;

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
};

inline imago_msg make(Net& net, NodeId src, std::span<const uint8_t> a, std::span<const uint8_t> b) {
  imago_msg d{};
  d.src = src;
  d.len = static_cast<uint32_t>(a.size() + b.size());
  uint8_t* to = d.u.inline_data;
  if (d.len > IMAGO_MSG_INLINE_MAX) {
    d.tier = IMAGO_TIER_POOL;
    to = new uint8_t[d.len];
    d.u.ext.data = to, d.u.ext.owner = to;
    ++net.buffers;
  }
  if (!a.empty()) std::memcpy(to, a.data(), a.size());
  if (!b.empty()) std::memcpy(to + a.size(), b.data(), b.size());
  return d;
}

inline void give_back(Net& net, imago_msg& d) {
  if (d.tier == IMAGO_TIER_POOL) {
    delete[] static_cast<uint8_t*>(d.u.ext.owner);
    --net.buffers;
  }
  d.tier = IMAGO_TIER_INLINE;
}

inline int Member::send(std::span<const uint8_t> head, std::span<const uint8_t> body, bool fast) {
  if (net->chance(net->refuse)) return -EAGAIN;
  ++(fast ? fast_sends : slow_sends);
  for (auto& o : net->m)
    if (o.get() != this) o->in[slot].push_back(make(*net, id, head, body));
  return 0;
}

inline void Member::drop(imago_msg& d) { give_back(*net, d); }

inline imago_msg event(uint32_t kind, NodeId source, NodeId member, uint32_t reason = 0) {
  imago_group_event ev{kind, 1, source, member, 0, reason, 0, 0};
  imago_msg d{};
  d.src = source, d.len = sizeof ev, d.flags = IMAGO_MSG_F_EVENT;
  std::memcpy(d.u.inline_data, &ev, sizeof ev);
  return d;
}

/** Build @p n members 1..n; every one sees the others join its stream. @return false if an
 *  init failed. */
inline bool build(Net& net, uint32_t n, order::Mode mode, uint32_t window) {
  for (uint32_t i = 0; i < n; ++i) net.ids.push_back(i + 1);
  for (uint32_t i = 0; i < n; ++i) {
    auto mem = std::make_unique<Member>();
    mem->net = &net, mem->id = i + 1, mem->slot = i;
    mem->delivered.assign(n, 0), mem->in.resize(n);
    if (mem->g.init(mode, net.ids, mem->id, window, 64, mem.get()) != 0) return false;
    for (NodeId o : net.ids)
      if (o != mem->id) mem->events.push_back(event(IMAGO_GROUP_JOINED, mem->id, o));
    net.m.push_back(std::move(mem));
  }
  return true;
}

/** Every member closes: what its ordering holds, and what its streams still carry, goes back.
 *  Afterwards Net::buffers is 0 unless a buffer was lost. */
inline void close_all(Net& net) {
  for (auto& x : net.m) {
    x->g.clear();
    for (auto& q : x->in)
      for (auto& d : q) give_back(net, d);
    for (auto& d : x->events) give_back(net, d);
    x->in.assign(x->in.size(), {}), x->events.clear();
  }
}

/** The member's rx ring: its events first, then any source's next, at random. */
inline unsigned pull(Member& me, imago_msg* out, unsigned max) {
  unsigned k = 0;
  while (k < max && !me.events.empty()) out[k++] = me.events.front(), me.events.pop_front();
  std::vector<uint32_t> live;
  for (uint32_t s = 0; s < me.in.size(); ++s)
    if (!me.in[s].empty()) live.push_back(s);
  while (k < max && !live.empty()) {
    const size_t pick = me.net->rng() % live.size();
    auto& q = me.in[live[pick]];
    out[k++] = q.front(), q.pop_front();
    if (q.empty()) live.erase(live.begin() + static_cast<long>(pick));
    if (me.net->chance(0.3)) break;  // bursts of every size
  }
  return k;
}

}  // namespace imago::api::test
