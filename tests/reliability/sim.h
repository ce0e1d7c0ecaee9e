// SPDX-License-Identifier: BSD-3-Clause
// Deterministic network simulator for the reliability engine: N nodes, per-link faults
// (loss, burst loss, reordering, duplication, bit-flip corruption, delay and jitter, a
// bounded link queue that pushes back), partitions and ACK-loss windows, virtual time, one
// seed for everything. Tests only: it allocates freely.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <queue>
#include <span>
#include <vector>

#include "reliability/engine.h"
#include "reliability/rng.h"

namespace imago::sim {

using rel::NodeId;

/** Faults on one direction of a link. Probabilities are per frame. */
struct LinkFaults {
  double loss = 0;
  double burst_enter = 0;   ///< Gilbert-Elliott: chance to enter the bad state per frame
  double burst_exit = 0.3;  ///< chance to leave it per frame (bad state drops every frame)
  double reorder = 0;       ///< chance a frame is held back by reorder_ns extra
  uint64_t reorder_ns = 50'000;
  double dup = 0;
  double corrupt = 0;  ///< chance of 1..3 random bit flips
  uint64_t delay_ns = 10'000;
  uint64_t jitter_ns = 0;
  double ns_per_byte = 0.8;         ///< 10 Gb/s serialization
  uint64_t max_queue_ns = 200'000;  ///< deeper than this: send_frame() returns false
};

/** A time window [from, to) during which frames matching a filter are dropped. */
struct DropWindow {
  uint64_t from = 0, to = 0;
  NodeId a = 0, b = 0;     ///< the link (both directions); a == b == 0: every link
  bool acks_only = false;  ///< drop only ACK-only frames
  bool all_links = false;
  bool refuse = false;     ///< refuse the frames instead (transmit() false: a link that is down)
};

class Network {
 public:
  Network(uint64_t seed, uint32_t nodes) : rng_(seed), n_(nodes), links_(nodes * nodes) {}

  LinkFaults& link(NodeId from, NodeId to) { return links_[index(from, to)].f; }
  /** @return the frames from @p from to @p to this network dropped (losses and drop windows). */
  uint64_t lost_on(NodeId from, NodeId to) const { return links_[index(from, to)].lost; }
  /** @return how long a frame put on the link from @p from to @p to at or after
   *  queue_stats_from() waited in its queue and took to serialize, on average (ns). */
  uint64_t mean_queue_ns(NodeId from, NodeId to) const {
    const Link& l = links_[index(from, to)];
    return l.queued != 0 ? l.queued_ns / l.queued : 0;
  }
  void queue_stats_from(uint64_t t) { queue_from_ = t; }
  void set_all(const LinkFaults& f) {
    for (auto& l : links_) l.f = f;
  }
  void add_drop(const DropWindow& w) { drops_.push_back(w); }
  Rng& rng() { return rng_; }

  /** Put a frame on the wire. @return false when the link queue is full (back-pressure). */
  bool transmit(NodeId from, NodeId to, std::span<const uint8_t> frame, uint64_t now) {
    for (const auto& w : drops_)
      if (w.refuse && now >= w.from && now < w.to &&
          (w.all_links || (w.a == from && w.b == to) || (w.a == to && w.b == from)))
        return false;
    Link& l = links_[index(from, to)];
    l.busy_until = std::max(l.busy_until, now);
    if (l.busy_until - now > l.f.max_queue_ns) return false;
    l.busy_until += static_cast<uint64_t>(static_cast<double>(frame.size()) * l.f.ns_per_byte);
    if (now >= queue_from_) l.queued_ns += l.busy_until - now, ++l.queued;
    ++sent_;
    if (dropped(l, from, to, frame, now)) return true;
    int copies = rng_.chance(l.f.dup) ? 2 : 1;
    dups_ += copies - 1;
    for (int i = 0; i < copies; ++i) {
      uint64_t t = l.busy_until + l.f.delay_ns + (l.f.jitter_ns ? rng_.below(l.f.jitter_ns) : 0);
      if (rng_.chance(l.f.reorder)) t += l.f.reorder_ns, ++reordered_;
      Event e{t, seq_++, from, to, buffer()};
      e.bytes->assign(frame.begin(), frame.end());
      if (rng_.chance(l.f.corrupt)) corrupt(*e.bytes);
      q_.push(std::move(e));
    }
    return true;
  }

  /** @return time of the next arrival (UINT64_MAX: none). */
  uint64_t next_time() const { return q_.empty() ? ~uint64_t{0} : q_.top().t; }

  /** Pop every arrival due at or before @p now into @p fn(from, to, bytes). */
  template <typename Fn>
  void deliver_due(uint64_t now, Fn&& fn) {
    while (!q_.empty() && q_.top().t <= now) {
      Event e = std::move(const_cast<Event&>(q_.top()));
      q_.pop();
      fn(e.from, e.to, std::span<const uint8_t>(*e.bytes));
      pool_.push_back(std::move(e.bytes));
    }
  }

  uint64_t sent() const { return sent_; }
  uint64_t lost() const { return lost_; }
  uint64_t dups() const { return dups_; }
  uint64_t reordered() const { return reordered_; }
  uint64_t corrupted() const { return corrupted_; }

 private:
  struct Link {
    LinkFaults f;
    uint64_t busy_until = 0;
    bool bad = false;  // Gilbert-Elliott state
    uint64_t lost = 0;  // frames this link dropped
    uint64_t queued = 0, queued_ns = 0;  // frames put on it (mean_queue_ns()) and their time before the wire's end
  };
  struct Event {
    uint64_t t;
    uint64_t id;
    NodeId from, to;
    std::unique_ptr<std::vector<uint8_t>> bytes;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.t != b.t ? a.t > b.t : a.id > b.id;  // FIFO among equal times: deterministic
    }
  };

  size_t index(NodeId from, NodeId to) const { return size_t{from} * n_ + to; }

  bool dropped(Link& l, NodeId from, NodeId to, std::span<const uint8_t> frame, uint64_t now) {
    for (const auto& w : drops_) {
      if (w.refuse || now < w.from || now >= w.to) continue;
      bool on_link = w.all_links || (w.a == from && w.b == to) || (w.a == to && w.b == from);
      bool is_ack = frame.size() > 1 && frame[1] == static_cast<uint8_t>(rel::FrameType::kAck);
      if (on_link && (!w.acks_only || is_ack)) return ++lost_, ++l.lost, true;
    }
    if (l.bad)
      l.bad = !rng_.chance(l.f.burst_exit);
    else
      l.bad = rng_.chance(l.f.burst_enter);
    if (l.bad || rng_.chance(l.f.loss)) return ++lost_, ++l.lost, true;
    return false;
  }

  void corrupt(std::vector<uint8_t>& b) {
    if (b.empty()) return;
    ++corrupted_;
    int flips = 1 + static_cast<int>(rng_.below(3));
    for (int i = 0; i < flips; ++i)
      b[rng_.below(b.size())] ^= static_cast<uint8_t>(1u << rng_.below(8));
  }

  std::unique_ptr<std::vector<uint8_t>> buffer() {
    if (pool_.empty()) return std::make_unique<std::vector<uint8_t>>();
    auto b = std::move(pool_.back());
    pool_.pop_back();
    return b;
  }

  Rng rng_;
  uint32_t n_;
  std::vector<Link> links_;
  std::vector<DropWindow> drops_;
  std::priority_queue<Event, std::vector<Event>, Later> q_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> pool_;
  uint64_t seq_ = 0, sent_ = 0, lost_ = 0, dups_ = 0, reordered_ = 0, corrupted_ = 0;
  uint64_t queue_from_ = 0;  // queue_stats_from()
};

}  // namespace imago::sim
