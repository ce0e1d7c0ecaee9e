// SPDX-License-Identifier: BSD-3-Clause
// Group streams over the deterministic simulator: one source (node 0) and 1 to 64 members,
// independent faults on every link, members that join late (from now or from the oldest
// message held), leave, crash or fall silent mid-stream. The property (check()): every
// member that was not expired and did not leave delivers every message from its first one
// on, exactly once, in order and intact; each expiry and each leave is reported once at the
// source; the source's buffers stay bounded (memory constant, nothing allocated in the
// engine's calls). A NACK stream (GroupScenario::nack) may lose what its source freed: there
// a member delivers in order, once and intact, and every message it skips (a gap, or the
// tail) comes after a LOST event that reported it. Tests only: it allocates freely.
#pragma once

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "reliability/redundancy/link_set.h"
#include "tests/reliability/sim.h"
#include "tests/reliability/redundant_sim.h"
#include "tests/reliability/sim_cluster.h"

namespace imago::sim {

struct GroupScenario {
  uint32_t members = 3;
  uint32_t msgs = 400;
  uint32_t max_size = 300;  ///< most messages; a few are fragmented up to 4000 bytes
  double big = 0.03;
  LinkFaults mcast;    ///< source to each member (loss independent per member)
  LinkFaults unicast;  ///< every other direction
  struct Change {
    uint32_t member;  ///< index 1..members
    uint64_t at;
    enum Kind { kLateJoin, kLateJoinOldest, kLeave, kCrash, kSilent } kind;
    uint64_t for_ns = 0;  ///< kSilent: how long nothing from it arrives
  };
  std::vector<Change> changes;
  rel::Config cfg;
  bool nack = false;  ///< a NACK-based stream (cfg.group_nack_hold_ns)
  /** Two networks: every node's engine sends through a LinkSet in red.mode over network A
   *  (mcast, unicast, drops) and network B (the same faults, drawn apart; drops_b). */
  bool redundant = false;
  rel::red::Config red;
  std::vector<DropWindow> drops, drops_b;
};

class GroupCluster {
 public:
  static constexpr rel::GroupId kG = 0x6B;

  GroupCluster(uint64_t seed, const GroupScenario& sc)
      : sc_(sc), net_(seed, sc.members + 1), net_b_(mix(seed ^ 0xB), sc.members + 1), rng_(seed ^ 0x5EED),
        n_(sc.members + 1), nodes_(n_), last_{std::vector<uint64_t>(n_), std::vector<uint64_t>(n_)},
        lost_mark_{std::vector<uint64_t>(n_), std::vector<uint64_t>(n_)}, cut_(n_) {
    for (Network* net : {&net_, &net_b_}) {
      net->set_all(sc.unicast);
      for (NodeId m = 1; m < n_; ++m) net->link(0, m) = sc.mcast;
    }
    for (const auto& w : sc.drops) net_.add_drop(w);
    for (const auto& w : sc.drops_b) net_b_.add_drop(w);
    for (NodeId i = 0; i < n_; ++i) start(i);
  }

  /** Run to completion. @return "" when the property held, else what broke. */
  std::string run() {
    step_until(50 * rel::kMs);  // handshakes
    {
      TrackAllocs on(false);
      if (nodes_[0].e->group_open(kG, now_, sc_.nack) != 0) return "group_open failed";
    }
    size_t initial = 0;
    for (NodeId m = 1; m < n_; ++m)
      if (!late(m)) join(m, false), ++initial;
    // As an application would: start once the initial members are in the view (a JOIN, or
    // a session, held up by loss would otherwise start its stream after the first messages).
    const uint64_t give_up = now_ + 2 * rel::kSec;
    while (joined_.size() < initial && now_ < give_up && error_.empty()) step(give_up);
    uint64_t next_app = now_;
    while (sent_ < sc_.msgs && error_.empty() && now_ < 60 * rel::kSec) {
      apply_changes();
      if (now_ >= next_app) {
        send_some();
        next_app = now_ + 1000 + rng_.below(40'000);
      }
      step(next_app);
    }
    // Quiet time: repairs, tails, expiries.
    // A member that declared the source's session dead late in it (loss alone can silence a
    // link that long) is expired once the source's side dies too, up to dead_after_ns on.
    const uint64_t end = now_ + 3 * std::max(sc_.cfg.group_expire_ns, sc_.cfg.dead_after_ns) + 500 * rel::kMs;
    while (now_ < std::max(end, gone_until_) && error_.empty()) {
      apply_changes();
      step(std::max(end, gone_until_));
    }
    std::string err = error_.empty() ? check() : error_;
    return err.empty() ? err : err + describe();
  }

  /** @return every live node's group counters and rejects, for a failing seed. */
  std::string describe() const {
    std::string s;
    for (const Node& n : nodes_) {
      if (!n.up) continue;
      const rel::GroupCounters& g = n.e->group_counters();
      const rel::PeerCounters c = n.e->total_counters();
      s += "\n  node " + std::to_string(n.id) + ": sent " + std::to_string(g.msgs_sent) + " frames " +
           std::to_string(g.data_frames) + " repairs " + std::to_string(g.repair_frames) + " status " +
           std::to_string(g.status_sent) + " received " + std::to_string(g.msgs_received) + " acks " +
           std::to_string(g.acks_sent) + " nacks " + std::to_string(g.nacks_sent) + " dups " +
           std::to_string(g.dup_received) + " overflow " + std::to_string(g.overflow) + " due in " +
           std::to_string(static_cast<int64_t>(n.e->next_deadline() - now_)) + " ns";
      for (size_t r = 1; r < static_cast<size_t>(rel::Reject::kCount); ++r)
        if (c.reject[r] != 0)
          s += std::string(" ") + rel::reject_name(static_cast<rel::Reject>(r)) + "=" + std::to_string(c.reject[r]);
    }
    return s;
  }

  uint64_t delivered() const { return delivered_; }
  /** @return frames the link sets failed over or counted as duplicates, over all nodes. */
  uint64_t failovers() const {
    uint64_t n = 0;
    for (const Node& x : nodes_)
      if (x.set) n += x.set->counters(0).failovers + x.set->counters(1).failovers;
    return n;
  }
  uint64_t lost_units() const { return lost_units_; }
  uint64_t expiries() const { return expired_.size(); }
  const rel::GroupCounters& source_counters() const { return nodes_[0].e->group_counters(); }
  /** @return the frames members rebuilt from parity (live nodes). */
  uint64_t rebuilt() const {
    uint64_t n = 0;
    for (NodeId m = 1; m < n_; ++m)
      if (nodes_[m].e) n += nodes_[m].e->group_counters().parity_rebuilt;
    return n;
  }

 private:
  struct Node;
  /** One of a node's two networks as its link set sees it (GroupScenario::redundant). */
  struct NetPort final : NetPortOf<Node> {
    bool multicast() const override { return true; }
    bool send_group(rel::GroupId g, std::span<const uint8_t> f) override { return n->fan_out(*net, g, f); }
    void subscribe(rel::GroupId g, bool on) override { n->subscribe(g, on); }
  };

  struct Node : rel::FrameSink, rel::AppSink {
    GroupCluster* c = nullptr;
    NodeId id = 0;
    uint64_t time() const { return c->now_; }
    std::unique_ptr<rel::Engine> e;
    NetPort ports[2];
    std::unique_ptr<rel::red::LinkSet> set;  ///< GroupScenario::redundant: between e and ports
    bool up = false;
    bool joined = false;
    size_t memory = 0;
    std::set<rel::GroupId> subs;
    // What it delivered: index of the first message, then how many in a row.
    bool started = false;
    uint64_t first = 0, count = 0;
    bool ended = false;
    bool restarted = false;    ///< its stream started again after it ended: joined late
    uint64_t last = 0;         ///< NACK stream: one past the last message delivered
    bool lost_since = false;   ///< NACK stream: a LOST event since that delivery

    ~Node() override { e.reset(); }
    bool send_frame(NodeId peer, std::span<const uint8_t> f) override {
      TrackAllocs off(false);
      return c->net_.transmit(id, peer, f, c->now_);
    }
    bool multicast() const override { return true; }
    bool send_group(rel::GroupId g, std::span<const uint8_t> f) override { return fan_out(c->net_, g, f); }
    /** A group frame to every node subscribed to @p g, on @p net. */
    bool fan_out(Network& net, rel::GroupId g, std::span<const uint8_t> f) {
      TrackAllocs off(false);
      for (Node& n : c->nodes_)
        if (n.id != id && n.subs.count(g) != 0) net.transmit(id, n.id, f, c->now_);
      return true;
    }
    void subscribe(rel::GroupId g, bool on) override {
      TrackAllocs off(false);
      if (on)
        subs.insert(g);
      else
        subs.erase(g);
    }
    bool deliver(NodeId, std::span<const uint8_t>) override { return true; }
    bool deliver_group(NodeId src, rel::GroupId g, std::span<const uint8_t> m) override {
      TrackAllocs off(false);
      c->on_message(*this, src, g, m);
      return true;
    }
    void on_group_event(const rel::GroupEvent& ev) override {
      TrackAllocs off(false);
      c->on_event(*this, ev);
    }
  };

  static bool seq_lt_time(uint64_t a, uint64_t b) { return a < b; }
  /** @return true when @p m fell silent for longer than a member may. */
  bool silenced_long(NodeId m) const {
    for (const auto& ch : sc_.changes)
      if (ch.member == m && ch.kind == GroupScenario::Change::kSilent && ch.for_ns >= sc_.cfg.group_expire_ns / 2)
        return true;
    return false;
  }

  bool late(NodeId m) const {
    for (const auto& ch : sc_.changes)
      if (ch.member == m && (ch.kind == GroupScenario::Change::kLateJoin ||
                             ch.kind == GroupScenario::Change::kLateJoinOldest))
        return true;
    return false;
  }

  void start(NodeId i) {
    Node& n = nodes_[i];
    n.c = this;
    n.id = i;
    rel::Config cfg = sc_.cfg;
    cfg.node_id = i;
    cfg.epoch = 1;
    cfg.seed = 77 + i;
    rel::FrameSink* sink = &n;
    if (sc_.redundant) {
      rel::red::fit_engine(sc_.red, &cfg);
      n.ports[0].n = &n, n.ports[0].net = &net_;
      n.ports[1].n = &n, n.ports[1].net = &net_b_;
      n.set = std::make_unique<rel::red::LinkSet>(sc_.red, i, static_cast<uint32_t>(mix(cfg.seed)), &n.ports[0],
                                                  &n.ports[1]);
      sink = n.set.get();
    }
    if (rel::Engine::create(cfg, sink, &n, &n.e) != 0) {
      error_ = "Engine::create failed";
      return;
    }
    if (n.set) n.set->attach(n.e.get());
    // The source and each member are peers; members need not know each other.
    for (NodeId j = 0; j < n_; ++j)
      if (j != i && (i == 0 || j == 0)) {
        n.e->add_peer(j, now_);
        if (n.set) n.set->add_peer(j, now_);
      }
    n.memory = n.e->memory_bytes();
    n.up = true;
  }

  void join(NodeId m, bool oldest) {
    TrackAllocs off(false);  // control path: may allocate
    if (int rc = nodes_[m].e->group_join(kG, oldest, now_); rc != 0) error_ = "group_join failed: " + std::to_string(rc);
    nodes_[m].joined = true;
  }

  void apply_changes() {
    applied_.resize(sc_.changes.size());
    for (size_t k = 0; k < sc_.changes.size(); ++k) {
      const auto& ch = sc_.changes[k];
      if (applied_[k] || seq_lt_time(now_, ch.at)) continue;
      applied_[k] = true;
      Node& n = nodes_[ch.member];
      using K = GroupScenario::Change;
      if (!n.up) continue;
      switch (ch.kind) {
        case K::kLateJoin:
        case K::kLateJoinOldest:
          join(ch.member, ch.kind == K::kLateJoinOldest);
          break;
        case K::kLeave: {
          TrackAllocs off(false);
          n.e->group_leave(kG, now_);
          left_.insert(ch.member);
          break;
        }
        case K::kCrash:
          n.e.reset();
          n.up = false;
          crashed_.insert(ch.member);
          break;
        case K::kSilent:
          net_.add_drop({now_, now_ + ch.for_ns, ch.member, ch.member, false, false});
          silent_.insert(ch.member);
          for (NodeId j = 0; j < n_; ++j)
            if (j != ch.member) net_.add_drop({now_, now_ + ch.for_ns, ch.member, j, false, false});
          break;
      }
    }
  }

  std::vector<uint8_t> message(uint64_t i) const {
    Rng r(mix(i) ^ 0xA11);
    const size_t len = r.chance(sc_.big) ? 1000 + r.below(3000) : 8 + r.below(sc_.max_size);
    std::vector<uint8_t> m(len);
    std::memcpy(m.data(), &i, 8);
    for (size_t k = 8; k < len; ++k) m[k] = static_cast<uint8_t>(mix(i * 131 + k));
    return m;
  }

  void send_some() {
    const uint32_t burst = 1 + static_cast<uint32_t>(rng_.below(32));
    for (uint32_t b = 0; b < burst && sent_ < sc_.msgs; ++b) {
      const std::vector<uint8_t> m = message(sent_);
      int rc;
      {
        TrackAllocs on(true);
        rc = nodes_[0].e->group_send(kG, m, rng_.chance(0.3) ? rel::send_flag::kFastpath : 0, now_);
      }
      if (rc == -EAGAIN) return;
      if (rc != 0) return void(error_ = "group_send returned " + std::to_string(rc));
      ++sent_;
    }
  }

  void on_message(Node& n, NodeId src, rel::GroupId g, std::span<const uint8_t> m) {
    if (src != 0 || g != kG) return void(error_ = "a message from a stream never joined");
    uint64_t i = ~uint64_t{0};
    if (m.size() >= 8) std::memcpy(&i, m.data(), 8);
    if (i >= sent_ || message(i) != std::vector<uint8_t>(m.begin(), m.end()))
      return void(error_ = "member " + std::to_string(n.id) + ": a corrupt message");
    if (!n.started) return void(error_ = "member " + std::to_string(n.id) + ": a message before its stream started");
    if (n.count == 0 && n.first == ~uint64_t{0}) n.first = i, n.last = i;
    if (sc_.nack) return on_nack_message(n, i);
    if (i != n.first + n.count)
      return void(error_ = "member " + std::to_string(n.id) + ": message " + std::to_string(i) + " where " +
                           std::to_string(n.first + n.count) + " was due");
    ++n.count;
    ++delivered_;
  }

  // A NACK stream's member: in order and once; a skip only after a LOST event.
  void on_nack_message(Node& n, uint64_t i) {
    const std::string who = "member " + std::to_string(n.id);
    if (i < n.last) return void(error_ = who + ": message " + std::to_string(i) + " again or out of order");
    if (i > n.last && !n.lost_since)
      return void(error_ = who + ": messages " + std::to_string(n.last) + ".." + std::to_string(i - 1) +
                           " skipped without a LOST event");
    n.last = i + 1;
    n.lost_since = false;
    ++n.count;
    ++delivered_;
  }

  void on_event(Node& n, const rel::GroupEvent& ev) {
    using E = rel::GroupEvent;
    if (n.id == 0) {
      if (ev.kind == E::kJoined) joined_.insert(ev.member), ++joins_[ev.member];
      // A session between them died: nothing arrived one way for dead_after_ns (loss alone
      // can do that: keep-alives are 50 ms apart), and the member is rightly expired.
      if (ev.kind == E::kExpired && ev.member < n_) {
        note_gap(ev.member, 0, 0);  // silences still going on
        note_gap(0, ev.member, 1);
        if (cut_[ev.member]) cut_off_.insert(ev.member);
      }
      // Twice only if it joined again in between (its session with the source revived).
      if (ev.kind == E::kExpired && ++expired_[ev.member] > joins_[ev.member])
        error_ = "member " + std::to_string(ev.member) + " expired twice";
      if (ev.kind == E::kLeft && ++left_seen_[ev.member] > 1)
        error_ = "member " + std::to_string(ev.member) + " left twice";
      return;
    }
    if (ev.kind == E::kStarted) {
      // Again only after it ended (its session with the source died and revived: it joins
      // anew); the END said what followed was lost.
      if (n.started && !n.ended) error_ = "member " + std::to_string(n.id) + ": its stream started twice";
      if (n.ended) n.lost_since = n.restarted = true, ++restarts_;
      n.started = true;
      n.ended = false;
      n.first = ~uint64_t{0};
      n.count = 0;
    }
    if (ev.kind == E::kEnded) n.ended = true;
    if (ev.kind == E::kEnded && ev.why == E::kGone)
      gone_until_ = std::max(gone_until_, now_ + sc_.cfg.dead_after_ns + 100 * rel::kMs);
    if (ev.kind == E::kLost) {
      if (!sc_.nack) error_ = "member " + std::to_string(n.id) + ": a LOST event on an ACK-based stream";
      if (ev.count == 0) error_ = "member " + std::to_string(n.id) + ": a LOST event of nothing";
      n.lost_since = true;
      lost_units_ += ev.count;
    }
  }

  void step(uint64_t until) {
    uint64_t t = std::min({until, net_.next_time(), net_b_.next_time()});
    for (const Node& n : nodes_)
      if (n.up) t = std::min({t, n.e->next_deadline(), n.set ? n.set->next_deadline() : t});
    for (const auto& ch : sc_.changes)
      if (ch.at > now_) t = std::min(t, ch.at);
    now_ = std::max(now_, t);
    for (uint8_t k = 0; k < 2; ++k)
      (k == 0 ? net_ : net_b_).deliver_due(now_, [&](NodeId from, NodeId to, std::span<const uint8_t> f) {
        Node& n = nodes_[to];
        if (to == 0 || from == 0) arrived(from, to);
        if (!n.up) return;
        TrackAllocs on(true);
        if (n.set)
          n.set->on_frame(k, f, now_);
        else
          n.e->on_frame(f, now_);
      });
    for (Node& n : nodes_) {
      if (!n.up) continue;
      if (n.set) {
        TrackAllocs on(true);
        n.set->set_now(now_);
        if (n.set->next_deadline() <= now_) n.set->poll(now_);
      }
      if (n.e->next_deadline() <= now_) {
        TrackAllocs on(true);
        n.e->poll(now_);
      }
      if (n.e->memory_bytes() != n.memory) error_ = "engine memory grew";
    }
    if (g_engine_allocs != 0) error_ = "heap allocation inside the engine";
    if (++steps_ > 20'000'000) error_ = "no progress (too many steps)";
  }
  void step_until(uint64_t t) {
    while (now_ < t && error_.empty()) step(t);
  }

  std::string check() const {
    rel::NodeId view[128];
    const size_t in_view = nodes_[0].e->group_members(kG, view, 128);
    std::set<NodeId> members(view, view + in_view);
    for (NodeId m = 1; m < n_; ++m) {
      const Node& n = nodes_[m];
      const std::string who = "member " + std::to_string(m);
      const bool gone = crashed_.count(m) || left_.count(m);
      if (crashed_.count(m) && expired_.count(m) != 1) return who + " crashed and was not expired once";
      if (left_.count(m) && !expired_.count(m) && !left_seen_.count(m)) return who + " left and the source never knew";
      if (expired_.count(m) && !gone && !silenced_long(m) && !cut_off_.count(m))
        return who + " was expired while it was alive and heard";
      if (gone || expired_.count(m)) continue;
      if (!members.count(m))
        return who + " is neither in the view nor expired (its session with the source: " +
               n.e->debug_state(nodes_[0].id) + "; the source's with it: " + nodes_[0].e->debug_state(n.id) + ")";
      if (!n.started) return who + ": its stream never started";
      if (n.ended) return who + ": its stream ended without an expiry";
      // Joined before the first message: from message 0; late: from where it started on.
      const uint64_t from = n.count == 0 ? sent_ : n.first;
      if (sc_.nack) {  // the tail delivered, or reported lost
        if (n.count != 0 && n.last != sent_ && !n.lost_since)
          return who + " delivered up to " + std::to_string(n.last) + " of " + std::to_string(sent_) + ", no LOST after";
        continue;
      }
      if (!late(m) && !n.restarted && n.count != 0 && n.first != 0)
        return who + " started at message " + std::to_string(n.first);
      if (n.count != 0 && from + n.count != sent_)
        return who + " delivered " + std::to_string(n.count) + " from " + std::to_string(from) + " of " +
               std::to_string(sent_);
      if (n.count == 0 && !late(m) && !n.restarted && sent_ != 0) return who + " delivered nothing";
    }
    return "";
  }

  GroupScenario sc_;
  Network net_;
  Network net_b_;  ///< network B (GroupScenario::redundant)
  Rng rng_;
  uint32_t n_;
  std::vector<Node> nodes_;
  uint64_t now_ = 1'000'000;
  uint64_t sent_ = 0, delivered_ = 0, steps_ = 0, lost_units_ = 0;
  std::set<NodeId> left_, crashed_, silent_, joined_;
  uint64_t gone_until_ = 0;  ///< run the quiet time to here: a member's session with the source died
  std::set<NodeId> cut_off_;  ///< expired after the networks cut them apart
  // Per member and way (0: from it to the source, 1: back): when a frame last arrived, and how
  // many the networks had dropped that way by then.
  std::vector<uint64_t> last_[2], lost_mark_[2];
  std::vector<bool> cut_;  ///< per member: a way went dead_after_ns without a frame, lost ones only
  uint64_t lost_way(NodeId from, NodeId to) const { return net_.lost_on(from, to) + net_b_.lost_on(from, to); }
  /** The time since a frame from @p from last reached @p to (one of them the source): a session
   *  dies of that long a silence, and the networks, not the sender, made it when they dropped
   *  a keep-alive's worth of frames in it. */
  void note_gap(NodeId from, NodeId to, int way) {
    const NodeId m = way == 0 ? from : to;
    const uint64_t tries = sc_.cfg.dead_after_ns / sc_.cfg.ack_refresh_ns;
    if (last_[way][m] != 0 && now_ - last_[way][m] >= sc_.cfg.dead_after_ns &&
        lost_way(from, to) - lost_mark_[way][m] + 1 >= tries)
      cut_[m] = true;
  }
  void arrived(NodeId from, NodeId to) {
    const int way = to == 0 ? 0 : 1;
    const NodeId m = way == 0 ? from : to;
    note_gap(from, to, way);
    last_[way][m] = now_;
    lost_mark_[way][m] = lost_way(from, to);
  }
  std::map<NodeId, int> expired_, left_seen_, joins_;
  uint64_t restarts_ = 0;  ///< streams started again at a member after they ended
  std::vector<bool> applied_;
  std::string error_;
};

/** The scenario of @p seed: members, faults and mid-stream changes drawn from it. */
inline GroupScenario make_group_scenario(uint64_t seed) {
  Rng r(mix(seed) ^ 0x6E0);
  GroupScenario sc;
  const uint64_t size_draw = r.below(100);
  sc.members = size_draw < 70 ? 1 + static_cast<uint32_t>(r.below(8))
               : size_draw < 95 ? 9 + static_cast<uint32_t>(r.below(16))
                                : 25 + static_cast<uint32_t>(r.below(40));
  sc.msgs = sc.members > 24 ? 150 : 400;
  sc.cfg = rel::fast_link_preset();
  sc.cfg.send_window = 256;
  sc.cfg.recv_window = 256;
  sc.cfg.max_message_size = 64 * 1024;
  sc.cfg.send_buffer_bytes = 256 * 1024;
  sc.cfg.max_peers = sc.members + 1;
  sc.cfg.group_sources = 1;
  sc.cfg.group_streams = 1;
  sc.cfg.group_window = r.chance(0.5) ? 512 : 128;
  sc.cfg.group_expire_ns = (50 + r.below(150)) * rel::kMs;
  sc.cfg.crc = true;
  // Repairs at once (unicast each), or NACKs gathered for up to 300 us (a frame several lost
  // goes once to the group).
  sc.cfg.group_repair_delay_ns = r.chance(0.3) ? 0 : r.below(300) * rel::kUs;
  // Members ask at once, or after a random back-off of up to 2 ms (repairs then all go to
  // the group).
  sc.cfg.group_nack_backoff_ns = r.chance(0.7) ? 0 : r.below(2000) * rel::kUs;
  // A crashed member that had everything holds nothing back: its session's death (peer
  // dead) is what expires it. Keep-alives often enough for that not to hit the living.
  sc.cfg.ack_refresh_ns = 50 * rel::kMs;
  sc.cfg.dead_after_ns = 400 * rel::kMs;
  sc.mcast.loss = r.chance(0.2) ? 0 : r.below(150) / 1000.0;
  sc.mcast.reorder = r.below(3) / 100.0;
  sc.mcast.dup = r.below(3) / 100.0;
  sc.mcast.corrupt = r.below(2) / 100.0;
  // No burst loss: counted per frame, a bad state outlasts quiet times (one keep-alive in
  // 50 ms) and becomes a partition that kills the session (the unicast simulator has bursts).
  sc.unicast.loss = r.below(50) / 1000.0;
  sc.unicast.reorder = r.below(3) / 100.0;
  sc.unicast.dup = r.below(2) / 100.0;
  // Mid-stream changes, for a few members: late joins, leaves, crashes, silences longer or
  // shorter than the expiry.
  const uint32_t changes = static_cast<uint32_t>(r.below(std::min<uint32_t>(sc.members, 4) + 1));
  std::set<uint32_t> used;
  for (uint32_t k = 0; k < changes; ++k) {
    const auto m = 1 + static_cast<uint32_t>(r.below(sc.members));
    if (!used.insert(m).second) continue;
    GroupScenario::Change ch{m, 200 * rel::kMs + r.below(300) * rel::kMs, GroupScenario::Change::kLeave};
    ch.kind = static_cast<GroupScenario::Change::Kind>(r.below(5));
    ch.for_ns = r.chance(0.5) ? sc.cfg.group_expire_ns / 4 : 2 * sc.cfg.group_expire_ns;
    sc.changes.push_back(ch);
  }
  // Parity blocks (docs/PROTOCOL.md 3.7.7), drawn apart so the draws above stay the seed's:
  // off for a quarter; small blocks often, so that short lossy runs switch parity on.
  Rng pr(mix(seed) ^ 0x9A7);
  const uint64_t parity_draw = pr.below(4);
  sc.cfg.group_parity_frames = parity_draw == 0   ? 0
                               : parity_draw == 1 ? 2 + static_cast<uint32_t>(pr.below(63))
                                                  : 2 + static_cast<uint32_t>(pr.below(7));
  sc.cfg.group_parity_fit = pr.below(2) == 0;  // blocks sized to the losses, or fixed
  return sc;
}

/**
 * Seed @p seed's group scenario on two networks: a mode (active/standby, duplicate,
 * ping-pong) and a schedule that keeps one network up throughout (both clean, A or B dies,
 * A flaps, both lossy), so that nothing excuses an expiry of a member alive and heard.
 */
inline GroupScenario make_group_scenario_two_networks(uint64_t seed, int* kind, rel::red::Mode* mode) {
  static constexpr int kOneUp[] = {0, 1, 2, 4, 5};  // redundant_sim.h's schedules
  GroupScenario sc = make_group_scenario(seed);
  Rng r(mix(seed) ^ 0x62E);
  *kind = kOneUp[seed % std::size(kOneUp)];
  *mode = static_cast<rel::red::Mode>(1 + (seed / std::size(kOneUp)) % 3);
  sc.redundant = true;
  draw_link_set(r, *mode, &sc.red);
  draw_net_schedule(r, *kind, 60 * rel::kMs + r.below(200 * rel::kMs), &sc.drops, &sc.drops_b, {&sc.mcast, &sc.unicast});
  // Both lossy: the scenario's own loss toward members, at most, on top of the drawn one.
  sc.unicast.loss = std::min(sc.unicast.loss, 0.05);
  sc.unicast.burst_enter = 0;  // bursts outlast quiet times (see make_group_scenario)
  sc.mcast.burst_enter = 0;
  return sc;
}

}  // namespace imago::sim
