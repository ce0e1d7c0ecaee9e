// SPDX-License-Identifier: BSD-3-Clause
// A deterministic group for the ordering layers (reliability/order/): members whose messages
// reach every other member over reliable FIFO channels (what a group stream gives: each
// source's messages once and in order), each with its own random delay, time moved by hand.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "reliability/order/causal.h"
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
  explicit CausalRun(uint64_t seed) : r_(seed * 0x2545F4914F6CDD1Dull + 3) {}

  std::string run(uint64_t* delivered, uint64_t* refused) {
    const uint32_t n = 2 + static_cast<uint32_t>(r_.below(7));
    for (uint32_t i = 0; i < n; ++i) ids_.push_back(static_cast<NodeId>(10 + 7 * i + r_.below(7)));
    m_.resize(n);
    const uint32_t per_source = 1 + static_cast<uint32_t>(r_.below(8));
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
      if (x.sent == x.quota || !r_.chance(0.05)) continue;
      Msg msg{i, std::vector<uint32_t>(m_.size()), {}};
      x.co.stamp(msg.vt);
      ++x.sent, ++x.seen[i];
      msg.truth = x.seen;
      for (uint32_t j = 0; j < m_.size(); ++j)
        if (j != i) m_[j].chans[i].push(now, 1'000 + r_.below(500'000), msg);
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
      });
      if (!err.empty()) return err;
    }
    return "";
  }

  Rng r_;
  std::vector<NodeId> ids_;
  std::vector<Member> m_;
};

}  // namespace imago::rel::order::test
