// SPDX-License-Identifier: BSD-3-Clause
// Engines of N nodes on a test-controlled wire with groups: unicast frames and group frames
// (fanned out to every node subscribed), each droppable per receiver before it is delivered.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "reliability/engine.h"

namespace imago::rel::test {

struct GNode;

/** What is on the wire: frames not yet delivered, oldest first. */
struct GWire {
  struct Frame {
    NodeId from, to;  ///< to: the receiver (a group frame is queued once per subscriber)
    bool group;
    std::vector<uint8_t> bytes;
  };
  std::deque<Frame> q;
  std::vector<GNode*> nodes;  ///< by node id (0 unused)
  /** Drop a frame before delivery when this says so. */
  std::function<bool(const Frame&)> drop = [](const Frame&) { return false; };
};

struct GNode : FrameSink, AppSink {
  GWire* w = nullptr;
  NodeId id = 0;
  std::unique_ptr<Engine> e;
  bool mcast = true;
  bool accept = true;
  std::set<GroupId> subscribed;
  struct Got {
    NodeId src;
    GroupId g;
    std::vector<uint8_t> msg;
  };
  std::vector<Got> got;
  std::vector<GroupEvent> events;

  ~GNode() override { e.reset(); }
  bool send_frame(NodeId peer, std::span<const uint8_t> f) override {
    w->q.push_back({id, peer, false, {f.begin(), f.end()}});
    return true;
  }
  bool multicast() const override { return mcast; }
  bool send_group(GroupId g, std::span<const uint8_t> f) override {
    for (GNode* n : w->nodes)
      if (n != nullptr && n != this && n->subscribed.count(g)) w->q.push_back({id, n->id, true, {f.begin(), f.end()}});
    return true;
  }
  void subscribe(GroupId g, bool on) override {
    if (on)
      subscribed.insert(g);
    else
      subscribed.erase(g);
  }
  bool deliver(NodeId, std::span<const uint8_t>) override { return true; }
  bool deliver_group(NodeId src, GroupId g, std::span<const uint8_t> m) override {
    if (!accept) return false;
    got.push_back({src, g, {m.begin(), m.end()}});
    return true;
  }
  void on_group_event(const GroupEvent& ev) override { events.push_back(ev); }
  bool on_group_report(const GroupEvent& ev) override {  // refused as messages are
    if (!accept) return false;
    events.push_back(ev);
    return true;
  }
  size_t count(GroupEvent::Kind k, NodeId member = 0) const {
    size_t n = 0;
    for (const GroupEvent& ev : events) n += ev.kind == k && (member == 0 || ev.member == member);
    return n;
  }
};

/** @p n nodes (ids 1..n), every pair peers, groups on, timers of the fast-link preset. */
class GroupPair : public ::testing::Test {
 protected:
  /** Changes a test makes to every node's configuration before make(). */
  std::function<void(Config&)> tune = [](Config&) {};
  Config config(NodeId id) const {
    Config c = fast_link_preset();
    c.node_id = id;
    c.seed = 7 + id;
    c.send_window = 256;
    c.recv_window = 256;
    c.max_message_size = 64 * 1024;
    c.send_buffer_bytes = 256 * 1024;
    c.group_sources = 2;
    c.group_streams = 4;
    c.group_window = 256;
    c.group_expire_ns = 50 * kMs;
    tune(c);
    return c;
  }
  void make(size_t n) {
    nodes.clear();
    w.nodes.assign(n + 1, nullptr);
    for (size_t i = 1; i <= n; ++i) {
      auto node = std::make_unique<GNode>();
      node->w = &w;
      node->id = static_cast<NodeId>(i);
      ASSERT_EQ(Engine::create(config(node->id), node.get(), node.get(), &node->e), 0);
      w.nodes[i] = node.get();
      nodes.push_back(std::move(node));
    }
    for (auto& a : nodes)
      for (auto& b : nodes)
        if (a != b) {
          ASSERT_EQ(a->e->add_peer(b->id, now), 0);
        }
  }
  GNode& node(NodeId id) { return *w.nodes[id]; }
  /** Deliver what is on the wire (and what that makes) until it is quiet. */
  void settle() {
    // Those asleep read what waited for them once awake, before what came since.
    w.q.insert(w.q.begin(), std::make_move_iterator(held.begin()), std::make_move_iterator(held.end()));
    held.clear();
    for (int i = 0; i < 100000 && !w.q.empty(); ++i) {
      GWire::Frame f = std::move(w.q.front());
      w.q.pop_front();
      if (asleep(f.to, now)) {
        // Its port's queue takes held_cap frames; the rest overflow.
        if (held_cap == ~size_t{0} || held_for(f.to) < held_cap)
          held.push_back(std::move(f));
        else
          ++overflowed;
        continue;
      }
      if (w.drop(f) || w.nodes[f.to] == nullptr || !w.nodes[f.to]->e) continue;
      w.nodes[f.to]->e->on_frame(f.bytes, now);
    }
  }
  /** Move time to the next deadline (at most @p max_ns ahead), poll every engine, settle. */
  void tick(uint64_t max_ns = 1'000'000) {
    uint64_t d = ~uint64_t{0};
    for (auto& n : nodes)
      if (n->e) d = std::min(d, asleep(n->id, now) ? now + 50'000 : n->e->next_deadline());  // 50 us steps until it wakes
    now = std::max(now, std::min(d, now + max_ns));
    for (auto& n : nodes)
      if (n->e && !asleep(n->id, now)) n->e->poll(now);
    settle();
  }
  void run_for(uint64_t ns) {
    const uint64_t until = now + ns;
    for (int still = 0; now < until;) {
      const uint64_t before = now;
      tick(until - now);
      still = now == before ? still + 1 : 0;
      ASSERT_LT(still, 1000) << "an engine's deadline stays in the past: it would spin";
    }
  }

  GWire w;
  std::vector<std::unique_ptr<GNode>> nodes;
  uint64_t now = 1'000'000;
  /** A node off its core at a time (a loaded machine): not polled, its frames held for it. */
  std::function<bool(NodeId, uint64_t)> asleep = [](NodeId, uint64_t) { return false; };
  std::deque<GWire::Frame> held;
  size_t held_cap = ~size_t{0};  ///< frames held for each node asleep at most
  uint64_t overflowed = 0;       ///< frames dropped beyond held_cap
  size_t held_for(NodeId id) const {
    size_t n = 0;
    for (const GWire::Frame& f : held) n += f.to == id;
    return n;
  }
};

static constexpr GroupId kG = 0x10;
/** Give GROUP_CTL frame @p f (taken off the wire) number @p n and its CRC again: a forger
 *  without the cluster key numbers its frames as it likes (a replay keeps its own). */
inline void renumber_ctl(std::vector<uint8_t>& f, uint32_t n) {
  for (int k = 0; k < 4; ++k) f[32 + k] = static_cast<uint8_t>(n >> (24 - 8 * k));
  std::fill(f.begin() + 44, f.begin() + 48, uint8_t{0});
  finish_frame(f.data(), f.size(), true);
}
/** @return GROUP_CTL frame @p f's number. */
inline uint32_t ctl_number(const std::vector<uint8_t>& f) {
  return uint32_t{f[32]} << 24 | uint32_t{f[33]} << 16 | uint32_t{f[34]} << 8 | f[35];
}

inline std::vector<uint8_t> gmsg(size_t n, uint32_t i) {
  std::vector<uint8_t> b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(i * 31 + k * 7);
  return b;
}

/** Node 1 a source of group kG, the others its members. */
class GroupStreamTest : public GroupPair {
 protected:
  /** Node 1 opens kG (a NACK stream with @p nack), nodes 2..n join it; sessions up, streams started. */
  void start(size_t n, bool mcast = true, bool nack = false) {
    make(n);
    for (auto& nd : nodes) nd->mcast = mcast;
    run_for(20 * kMs);  // handshakes
    ASSERT_EQ(node(1).e->group_open(kG, now, nack), 0);
    for (NodeId i = 2; i <= n; ++i) ASSERT_EQ(node(i).e->group_join(kG, false, now), 0);
    run_for(40 * kMs);
    NodeId m[16];
    ASSERT_EQ(node(1).e->group_members(kG, m, 16), n - 1);
  }
  /** Send @p count messages of @p size from node 1, fast, pumping as the window allows. */
  void send(uint32_t count, size_t size, uint32_t first = 0) {
    for (uint32_t i = first; i < first + count;) {
      const int rc = node(1).e->group_send(kG, gmsg(size, i), send_flag::kFastpath, now);
      if (rc == 0) {
        ++i;
        continue;
      }
      ASSERT_EQ(rc, -EAGAIN);
      tick(100 * kUs);
    }
  }
  void expect_all(NodeId id, uint32_t count, size_t size, uint32_t first = 0) {
    const GNode& n = node(id);
    ASSERT_EQ(n.got.size(), count) << "node " << id;
    for (uint32_t i = 0; i < count; ++i) {
      EXPECT_EQ(n.got[i].src, 1u);
      ASSERT_EQ(n.got[i].msg, gmsg(size, first + i)) << "node " << id << " message " << i;
    }
  }
};

}  // namespace imago::rel::test
