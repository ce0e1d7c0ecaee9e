// SPDX-License-Identifier: BSD-3-Clause
// A deterministic group for the ordering layers (reliability/order/): members whose messages
// reach every other member over reliable FIFO channels (what a group stream gives: each
// source's messages once and in order), each with its own random delay, time moved by hand.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "reliability/order/causal.h"
#include "reliability/order/total.h"
#include "reliability/rng.h"

namespace imago::rel::order::test {

/** A FIFO channel: each message arrives after its own delay, never before the one ahead. */
template <typename M>
struct Chan {
  struct In {
    uint64_t at;
    M m;
  };
  std::deque<In> q;
  uint64_t last = 0;
  void push(uint64_t now, uint64_t delay, M m) {
    last = std::max(last, now + delay);
    q.push_back({last, std::move(m)});
  }
  bool ready(uint64_t now) const { return !q.empty() && q.front().at <= now; }
};

/** A group in its plainest form, to read an ordering's cost: @p members members, every link
 *  @p delay_ns, light load. */
struct FixedGroup {
  uint32_t members;
  uint64_t delay_ns;
};

/** Delay sums over messages at the members that receive them: from the send to the arrival
 *  (what single-source FIFO delivers at) and to the delivery in order. */
struct OrderDelays {
  double arrive_ns = 0, deliver_ns = 0;
  uint64_t n = 0;
  void add(const OrderDelays& o) { arrive_ns += o.arrive_ns, deliver_ns += o.deliver_ns, n += o.n; }
  /** @return "FIFO delivers after A us, ORDER after D us (R.RRx)" (means per message). */
  std::string describe(const char* order) const {
    const double k = 1e3 * static_cast<double>(n ? n : 1);
    char b[160];
    std::snprintf(b, sizeof b, "FIFO delivers after %.0f us, %s after %.0f us (%.2fx)", arrive_ns / k, order,
                  deliver_ns / k, deliver_ns / (arrive_ns > 0 ? arrive_ns : 1));
    return b;
  }
};

/**
 * One seed of the causal property: 2 to 8 members send 20 to 80 messages each at random
 * times, over channels of 1 to 500 us, with hold-backs of 1 to 8 messages per source (so
 * back-pressure is common). The truth is kept by the harness, not the stamps: the deliveries
 * each sender had seen when it sent. Property: every member delivers every message once,
 * only after everything its sender had delivered (and the sender's earlier ones), and the
 * hold-backs end empty.
 */
class CausalRun {
 public:
  using Fixed = FixedGroup;
  using Delays = OrderDelays;
  explicit CausalRun(uint64_t seed) : r_(seed * 0x2545F4914F6CDD1Dull + 3) {}
  /** @p f's members and delay, hold-backs of 8, a message every 2 ms per member. */
  CausalRun(uint64_t seed, Fixed f) : CausalRun(seed) { fixed_ = f; }

  std::string run(uint64_t* delivered, uint64_t* refused, Delays* d = nullptr) {
    const uint32_t n = fixed_.members != 0 ? fixed_.members : 2 + static_cast<uint32_t>(r_.below(7));
    for (uint32_t i = 0; i < n; ++i) ids_.push_back(static_cast<NodeId>(10 + 7 * i + r_.below(7)));
    m_.resize(n);
    const uint32_t per_source = fixed_.members != 0 ? 8 : 1 + static_cast<uint32_t>(r_.below(8));
    for (uint32_t i = 0; i < n; ++i) {
      if (m_[i].co.init(ids_, ids_[i], per_source) != 0) return "init failed";
      m_[i].seen.assign(n, 0);
      m_[i].quota = 20 + static_cast<uint32_t>(r_.below(61));
      m_[i].chans.resize(n);
    }
    for (uint64_t now = 0; now < 10'000'000'000ull; now += 10'000) {
      send(now);
      if (std::string err = receive(now); !err.empty()) return err;
      if (done()) break;
    }
    if (!done()) return "not everything was delivered";
    if (d != nullptr) *d = delays_;
    for (const Member& x : m_) {
      *delivered += x.co.counters().delivered;
      *refused += x.co.counters().refused;
      if (x.co.held() != 0) return "a hold-back is not empty";
    }
    return "";
  }

 private:
  struct Msg {
    uint32_t src;
    std::vector<uint32_t> vt;     ///< the stamp
    std::vector<uint32_t> truth;  ///< what the sender had delivered (its own: sent), by the harness
    uint64_t sent_at = 0, arrived_at = 0;
  };
  struct Member {
    CausalOrder co;
    std::vector<uint32_t> seen;  ///< delivered per source (own: sent), as the harness saw it
    uint32_t quota = 0, sent = 0;
    std::vector<Chan<Msg>> chans;  ///< from each source to this member
    std::vector<Msg> held;         ///< offered messages by handle
  };

  bool done() const {
    for (const Member& x : m_) {
      if (x.sent < x.quota) return false;
      for (uint32_t s = 0; s < m_.size(); ++s)
        if (s != index(x) && x.seen[s] != m_[s].quota) return false;
    }
    return true;
  }
  uint32_t index(const Member& x) const { return static_cast<uint32_t>(&x - m_.data()); }

  void send(uint64_t now) {
    for (uint32_t i = 0; i < m_.size(); ++i) {
      Member& x = m_[i];
      if (x.sent == x.quota || !(fixed_.members != 0 ? now % 2'000'000 == i * 2'000'000 / m_.size() / 10'000 * 10'000 : r_.chance(0.05)))
        continue;
      Msg msg{i, std::vector<uint32_t>(m_.size()), {}, now};
      x.co.stamp(msg.vt);
      ++x.sent, ++x.seen[i];
      msg.truth = x.seen;
      for (uint32_t j = 0; j < m_.size(); ++j)
        if (j != i) m_[j].chans[i].push(now, fixed_.members != 0 ? fixed_.delay_ns : 1'000 + r_.below(500'000), msg);
    }
  }

  std::string receive(uint64_t now) {
    for (uint32_t j = 0; j < m_.size(); ++j) {
      Member& x = m_[j];
      for (auto& ch : x.chans) {
        while (ch.ready(now)) {
          Msg& msg = ch.q.front().m;
          const auto got = x.co.offer(ids_[msg.src], msg.vt, x.held.size());
          if (got == CausalOrder::Offer::kBad) return "a true stamp was refused as bad";
          if (got == CausalOrder::Offer::kFull) break;  // back-pressure: this channel waits
          msg.arrived_at = ch.q.front().at;
          x.held.push_back(std::move(msg));
          ch.q.pop_front();
        }
      }
      std::string err;
      x.co.drain([&](NodeId, uint64_t h) {
        const Msg& msg = x.held[h];
        for (uint32_t s = 0; s < m_.size(); ++s) {
          const uint32_t need = s == msg.src ? msg.truth[s] - 1 : msg.truth[s];
          if (s != j && ((s == msg.src && x.seen[s] != need) || (s != msg.src && x.seen[s] < need)))
            err = "member " + std::to_string(j) + " delivered a message of " + std::to_string(msg.src) +
                  " before its causal past from " + std::to_string(s);
        }
        ++x.seen[msg.src];
        delays_.arrive_ns += static_cast<double>(msg.arrived_at - msg.sent_at);
        delays_.deliver_ns += static_cast<double>(now - msg.sent_at);
        ++delays_.n;
      });
      if (!err.empty()) return err;
    }
    return "";
  }

  Rng r_;
  std::vector<NodeId> ids_;
  std::vector<Member> m_;
  Fixed fixed_{0, 0};
  Delays delays_;
};

/**
 * One seed of the total-order property: 3 to 7 members send 20 to 60 messages each over
 * FIFO channels of 1 to 500 us, windows of 2 to 16, stamps from clocks up to 2 ms apart; up to
 * five members crash at random times (half the runs within 3 ms, so a flush's member dies in
 * its flush, and a second flush in its turn): each member's streams to the others end at a random point, and every
 * member left learns the new view 0.1 to 3 ms later, in the same order. Property: the members
 * left deliver the very same sequence, each source's messages once and in its order; a
 * crashed member delivered a prefix of it (uniform); and every message of a member left is
 * in it.
 */
class TotalRun {
 public:
  explicit TotalRun(uint64_t seed) : r_(seed * 0x9E3779B97F4A7C15ull + 11) {}

  /** The cost in its plainest form (FixedGroup): no crash, a message now and then per
   *  member (the window never fills). */
  using Fixed = FixedGroup;
  TotalRun(uint64_t seed, Fixed f) : TotalRun(seed) { fixed_ = f; }
  /** Over messages of members that never crashed. */
  using Delays = OrderDelays;

  std::string run(uint64_t* delivered, uint64_t* epochs, Delays* d = nullptr) {
    const uint32_t n = fixed_.members != 0 ? fixed_.members : 3 + static_cast<uint32_t>(r_.below(5));
    std::vector<NodeId> ids;
    for (uint32_t i = 0; i < n; ++i) ids.push_back(static_cast<NodeId>(5 + 3 * i + r_.below(3)));
    const uint32_t window = 2 + static_cast<uint32_t>(r_.below(15));
    m_.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      Member& x = m_[i];
      x.id = ids[i], x.out.run = this, x.out.me = i;
      x.quota = 20 + static_cast<uint32_t>(r_.below(41));
      x.skew = fixed_.members != 0 ? 0 : r_.below(2'000'000);  // hosts' clocks differ
      x.chans.resize(n), x.unicast.resize(n);
      x.rx.assign(n, 0), x.arrived_at.resize(n);
      if (x.to.init(ids, ids[i], window, &x.out) != 0) return "init failed";
    }
    for (Member& x : m_) x.to.tell();  // each stream starts with its member's epoch
    const uint32_t crashes = fixed_.members != 0 ? 0 : static_cast<uint32_t>(r_.below(6));
    const uint64_t span = r_.chance(0.5) ? 3'000'000 : 20'000'000;
    for (uint32_t k = 0; k < crashes; ++k) crash_at_.push_back(r_.below(span));
    std::sort(crash_at_.begin(), crash_at_.end());
    for (now_ = 0; now_ < 5'000'000'000ull; now_ += 10'000) {
      step();
      if (quiet()) break;
    }
    for (const Member& x : m_) *epochs += x.to.counters().epochs, *delivered += x.got.size();
    if (d != nullptr && crashes == 0) *d = delays_;
    return check();
  }

 private:
  struct Item {
    bool data;
    TotalCtl c;  ///< data: its stamp in g
  };
  struct Out final : TotalOrder::Out {
    TotalRun* run = nullptr;
    uint32_t me = 0;
    void to_all(const TotalCtl& c) override {
      for (uint32_t j = 0; j < run->m_.size(); ++j)
        if (j != me) run->push(me, j, Item{false, c});
    }
    void to_one(NodeId dst, const TotalCtl& c) override {
      const uint32_t j = run->index_of(dst);
      run->m_[j].unicast[me].push(run->now_, run->delay(), Item{false, c});
    }
  };
  struct Member {
    NodeId id = 0;
    TotalOrder to;
    Out out;
    bool dead = false;
    uint32_t quota = 0, sent = 0;
    uint64_t skew = 0;                ///< its clock's lead over the simulator's (stamps)
    std::vector<Chan<Item>> chans;    ///< each member's group stream to this one
    std::vector<Chan<Item>> unicast;  ///< each member's control to this one alone
    std::vector<uint64_t> rx;       ///< messages taken from each member (the next one's s - 1)
    std::vector<uint64_t> sent_at;  ///< when each of ours was sent
    std::vector<std::vector<uint64_t>> arrived_at;  ///< per member: when each of its arrived
    std::vector<std::pair<uint32_t, uint64_t>> got;  ///< (source index, its s), as delivered
    std::deque<std::pair<uint64_t, std::vector<NodeId>>> views;  ///< (due, view) not yet applied
  };

  uint32_t index_of(NodeId id) const {
    for (uint32_t i = 0; i < m_.size(); ++i)
      if (m_[i].id == id) return i;
    return 0;
  }
  uint64_t delay() { return fixed_.members != 0 ? fixed_.delay_ns : 1'000 + r_.below(500'000); }
  void push(uint32_t from, uint32_t to, Item it) { m_[to].chans[from].push(now_, delay(), std::move(it)); }

  void crash(uint32_t i) {
    m_[i].dead = true;
    for (Member& y : m_) {  // its streams end somewhere: each receiver keeps a prefix
      for (auto* ch : {&y.chans[i], &y.unicast[i]}) ch->q.resize(static_cast<size_t>(r_.below(ch->q.size() + 1)));
    }
    std::vector<NodeId> view;
    for (const Member& y : m_)
      if (!y.dead) view.push_back(y.id);
    for (Member& y : m_)
      if (!y.dead) y.views.emplace_back(now_ + 100'000 + r_.below(2'900'000), view);
  }

  void step() {
    while (!crash_at_.empty() && crash_at_.front() <= now_) {
      crash_at_.erase(crash_at_.begin());
      std::vector<uint32_t> alive;
      for (uint32_t i = 0; i < m_.size(); ++i)
        if (!m_[i].dead) alive.push_back(i);
      if (alive.size() > 1) crash(alive[r_.below(alive.size())]);
    }
    for (uint32_t i = 0; i < m_.size(); ++i) {
      Member& x = m_[i];
      if (x.dead) continue;
      while (!x.views.empty() && x.views.front().first <= now_) {
        x.to.view(x.views.front().second);
        x.views.pop_front();
      }
      const uint64_t ts = x.to.stamp(now_ + x.skew);
      if (x.sent < x.quota && r_.chance(fixed_.members != 0 ? 0.005 : 0.05) && x.to.sent(x.sent + 1, ts)) {
        ++x.sent;
        x.sent_at.push_back(now_);
        for (uint32_t j = 0; j < m_.size(); ++j)
          if (j != i) push(i, j, Item{true, TotalCtl{TotalCtl::kAck, 0, ts, x.id, 0}});
      }
      for (uint32_t f = 0; f < m_.size(); ++f) receive(x, x.chans[f], f), receive(x, x.unicast[f], f);
      x.to.drain([&](NodeId src, uint64_t s) {
        const uint32_t k = index_of(src);
        x.got.emplace_back(k, s);
        if (k == i) return;
        delays_.deliver_ns += static_cast<double>(now_ - m_[k].sent_at[s - 1]);
        delays_.arrive_ns += static_cast<double>(x.arrived_at[k][s - 1] - m_[k].sent_at[s - 1]);
        ++delays_.n;
      });
    }
  }

  void receive(Member& x, Chan<Item>& ch, uint32_t f) {
    while (ch.ready(now_)) {
      const Item& it = ch.q.front().m;
      if (it.data) {
        if (!x.to.on_data(m_[f].id, it.c.g, x.rx[f] + 1)) return;  // cannot be (flow control): checked below
        ++x.rx[f];
        x.arrived_at[f].push_back(now_);
      } else {
        x.to.on_ctl(m_[f].id, it.c);
      }
      ch.q.pop_front();
    }
  }

  bool quiet() const {
    for (const Member& x : m_) {
      if (x.dead) continue;
      if (x.sent < x.quota || !x.views.empty()) return false;
      for (const auto* chs : {&x.chans, &x.unicast})
        for (const auto& ch : *chs)
          if (!ch.q.empty()) return false;
    }
    return crash_at_.empty() && reference() != nullptr && complete(*reference());
  }
  const Member* reference() const {
    for (const Member& x : m_)
      if (!x.dead) return &x;
    return nullptr;
  }
  /** @return true when @p x delivered every message of every member left. */
  bool complete(const Member& x) const {
    std::vector<uint64_t> per(m_.size(), 0);
    for (const auto& [src, s] : x.got) per[src] = std::max(per[src], s);
    for (uint32_t i = 0; i < m_.size(); ++i)
      if (!m_[i].dead && per[i] != m_[i].quota) return false;
    return true;
  }

  std::string check() const {
    const Member* ref = reference();
    if (ref == nullptr) return "";
    if (!complete(*ref)) return "stalled: a member left did not get every message of the members left";
    for (const Member& x : m_) {
      if (x.to.counters().bad != 0) return "node " + std::to_string(x.id) + " counted a bad record or message";
      std::vector<uint64_t> next(m_.size(), 1);
      for (const auto& [src, s] : x.got)
        if (s != next[src]++) return "node " + std::to_string(x.id) + " broke a source's order";
      const bool prefix = x.dead && x.got.size() <= ref->got.size();
      if (!x.dead && x.got != ref->got) return "node " + std::to_string(x.id) + " delivered another sequence";
      if (x.dead && !(prefix && std::equal(x.got.begin(), x.got.end(), ref->got.begin())))
        return "crashed node " + std::to_string(x.id) + " delivered what the others did not";
    }
    return "";
  }

  Rng r_;
  std::vector<Member> m_;
  std::vector<uint64_t> crash_at_;
  Delays delays_;
  Fixed fixed_{0, 0};
  uint64_t now_ = 0;
};

}  // namespace imago::rel::order::test
