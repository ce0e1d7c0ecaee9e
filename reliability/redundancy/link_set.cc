/* SPDX-License-Identifier: BSD-3-Clause */
#include "reliability/redundancy/link_set.h"

#include <cerrno>
#include <cstring>

namespace imago::rel::red {

namespace {

constexpr uint8_t bit(uint8_t n) { return static_cast<uint8_t>(1u << n); }
constexpr uint8_t kAllNets = bit(0) | bit(1);
constexpr size_t kShim = sizeof(Shim);

/** The shim's net field for a set of networks: the one, or both. */
uint8_t shim_net(uint8_t mask) { return mask == bit(0) ? 0 : mask == bit(1) ? 1 : kBothNets; }

}  // namespace

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kActiveStandby: return "active-standby";
    case Mode::kDuplicate: return "duplicate";
    case Mode::kPingPong: return "ping-pong";
  }
  return "?";
}

bool parse_mode(const char* s, Mode* out) {
  for (Mode m : {Mode::kActiveStandby, Mode::kDuplicate, Mode::kPingPong})
    if (std::strcmp(s, mode_name(m)) == 0) return *out = m, true;
  return false;
}

LinkSet::LinkSet(const Config& c, NodeId self, uint32_t epoch, FrameSink* a, FrameSink* b)
    : cfg_(c), self_(self), epoch_(epoch), nets_{a, b}, scratch_(kShim + c.max_frame) {
  // A configuration made by hand, not through the option rows, must not divide by zero.
  if (cfg_.health.heartbeat_miss < 2) cfg_.health.heartbeat_miss = 2;
  if (cfg_.health.heartbeat_ns == 0) cfg_.health.heartbeat_ns = 1;
}

int LinkSet::add_peer(NodeId id, uint64_t now) {
  if (index_.count(id) != 0) return -EEXIST;
  auto p = std::make_unique<Peer>();
  p->id = id;
  for (auto& h : p->health) h.start(now);
  index_[id] = p.get();
  peers_.push_back(std::move(p));
  next_poll_ = now;  // greet it on both networks at once
  return 0;
}

LinkSet::Peer* LinkSet::find(NodeId id) {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : it->second;
}

const LinkSet::Peer* LinkSet::find(NodeId id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : it->second;
}

const NetCounters& LinkSet::counters(uint8_t net) const { return c_[net < kMaxNets ? net : 0]; }

NetState LinkSet::state(NodeId peer, uint8_t net) const {
  const Peer* p = find(peer);
  return p != nullptr && net < kMaxNets ? p->health[net].state() : NetState::kDown;
}

uint8_t LinkSet::active(NodeId peer) const {
  const Peer* p = find(peer);
  return p != nullptr && cfg_.mode == Mode::kActiveStandby ? p->active : 0;
}

bool LinkSet::peer_heard(const Peer& p) const {
  return !p.health[0].quiet(cfg_.health, now_) || !p.health[1].quiet(cfg_.health, now_);
}

uint8_t LinkSet::heard_bits(const Peer& p) const {
  const bool heard = peer_heard(p);
  uint8_t b = 0;
  for (uint8_t n = 0; n < kMaxNets; ++n)
    if (p.health[n].heard_lately(heard)) b |= bit(n);
  return b;
}

// The networks usable toward @p p: those not down; with both down, one that is healthy again
// (its heal time only guards against flapping when there is another); else one that works
// both ways now (failures took it down: a lossy network, not a dead one); else both, for
// the mode to choose one of (never to send on both: that doubles the load when congestion
// is what took them down).
uint8_t LinkSet::usable(const Peer& p) const {
  uint8_t up = 0, healing = 0, working = 0;
  const bool heard = peer_heard(p);
  for (uint8_t n = 0; n < kMaxNets; ++n) {
    if (!p.health[n].down()) up |= bit(n);
    if (p.health[n].healing()) healing |= bit(n);
    if (p.health[n].both_ways(heard)) working |= bit(n);
  }
  if (up != 0) return up;
  if (healing != 0) return healing;
  return working != 0 ? working : kAllNets;
}

// Which networks a frame to @p p goes on.
uint8_t LinkSet::nets_for(Peer& p, bool answer, uint8_t last) {
  if (cfg_.mode == Mode::kDuplicate) return kAllNets;
  const uint8_t usable = this->usable(p);
  // An answer after a silence toward the peer (a keep-alive, mostly: we sent it something
  // before, then nothing for a down-detection time) goes on both when both are usable (neither
  // found down, or both down and both working): one that goes where a network is down but not
  // yet found down, or failing lossy (flapping in phase with the refresh), would be lost every
  // time, and the session die while the other network works. Rare by construction: at most
  // one a down-detection time per peer.
  const uint64_t quiet = cfg_.health.heartbeat_ns * cfg_.health.heartbeat_miss;
  if (answer && usable == kAllNets && p.last_tx != 0 && now_ - p.last_tx >= quiet) return kAllNets;
  if (cfg_.mode == Mode::kActiveStandby) return usable & bit(p.active) ? bit(p.active) : usable;
  if (usable != kAllNets) return usable;
  if (answer) {
    // Where its data last came in; but an answer into silence (a keep-alive nothing came back
    // for) goes on the other network than the last: a network that loses every one (down at
    // each refresh, in phase with it) must not cut the peer off while the other works.
    p.answer_net = p.answer_unheard ? p.answer_net ^ 1 : p.rx_net;
    p.answer_unheard = true;
    return bit(p.answer_net);
  }
  if (last == bit(0) || last == bit(1)) return last ^ kAllNets;  // a resend: the other one
  // Runs of cfg_.pingpong_run frames per network: a PMD that makes a syscall per burst
  // (net_af_packet) would otherwise cut every burst in two.
  const uint8_t n = p.flip;
  if (++p.run >= cfg_.pingpong_run) p.flip ^= 1, p.run = 0;
  return bit(n);
}

// A group frame goes on a network usable toward every peer (usable(): one down toward
// all of them counts as usable, it says nothing); when none is, on both (some members are
// reached on A only, others on B only). A network down toward one member and not the others
// must not carry the stream for all: that member would live on repairs alone.
uint8_t LinkSet::group_nets() {
  if (cfg_.mode == Mode::kDuplicate) return kAllNets;
  uint8_t usable = kAllNets;
  for (const auto& p : peers_) usable &= this->usable(*p);
  if (usable != kAllNets) return usable == 0 ? kAllNets : usable;
  if (cfg_.mode == Mode::kActiveStandby) return bit(0);
  group_flip_ ^= 1;
  return bit(group_flip_);
}

void LinkSet::event(NetEvent::Kind k, NodeId peer, uint8_t net, NetState s) {
  if (listener_ != nullptr) listener_->on_net_event({k, peer, net, s, now_});
}

// A heartbeat of the peer's epoch numbered more than a second's worth beyond what either
// network carried, while the peer is heard, counts as a second's worth beyond: forged, or
// damaged past the CRC, believed whole it would leave the other network lagging and its own
// never lagging (so never found down), and heartbeats_lost stuck, until the peer restarts.
// Clamped, the harm ends within a second; the peer's own after a long loss of heartbeats on
// both catch up a second's worth each, and are never dropped.
void LinkSet::clamp_heartbeat(const Peer& p, Shim& s, bool back) const {
  if (static_cast<ShimKind>(s.kind) != ShimKind::kHeartbeat || back || s.epoch.get() != p.level_epoch) return;
  const uint32_t top = static_cast<int32_t>(p.level[0] - p.level[1]) > 0 ? p.level[0] : p.level[1];
  const auto second = static_cast<uint32_t>(1'000'000'000 / cfg_.health.heartbeat_ns + 1);
  if (static_cast<int32_t>(s.seq.get() - top) > static_cast<int64_t>(second)) s.seq.set(top + second);
}

// A heartbeat lifts its network to the peer's number (a new epoch: both networks start level
// there); anything else lifts its network level with the other, as it is alive now too.
void LinkSet::raise_level(Peer& p, uint8_t net, const Shim& s) {
  const auto ahead = [](uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; };
  if (static_cast<ShimKind>(s.kind) != ShimKind::kHeartbeat) {
    if (ahead(p.level[net ^ 1], p.level[net])) p.level[net] = p.level[net ^ 1];
  } else if (s.epoch.get() != p.level_epoch) {
    p.level_epoch = s.epoch.get();
    p.level[0] = p.level[1] = s.seq.get();
  } else if (ahead(s.seq.get(), p.level[net])) {
    p.level[net] = s.seq.get();
  }
}

void LinkSet::evaluate(Peer& p, uint64_t now) {
  const bool silent = !peer_heard(p);  // on every network: the peer's silence (NetHealth)
  for (uint8_t n = 0; n < kMaxNets; ++n) {
    NetHealth& h = p.health[n];
    const auto lag = static_cast<int32_t>(p.level[n ^ 1] - p.level[n]);
    if (!h.update(cfg_.health, now, silent, lag > 0 ? static_cast<uint32_t>(lag) : 0)) continue;
    event(NetEvent::kState, p.id, n, h.state());
    if (h.down() && !p.health[n ^ 1].down()) ++c_[n].failovers;
  }
  if (cfg_.mode != Mode::kActiveStandby) return;
  const uint8_t a = p.active, b = a ^ 1;
  if (p.health[a].down() && !(usable(p) & bit(a))) {
    p.active = b;
    event(NetEvent::kFailover, p.id, b, p.health[b].state());
  } else if (a != 0 && cfg_.failback_ns != 0 && !p.health[0].down() &&
             now - p.health[0].up_since() >= cfg_.failback_ns) {
    p.active = 0;
    ++c_[0].failbacks;
    event(NetEvent::kFailback, p.id, 0, NetState::kUp);
  }
}

// Send on the networks of @p mask; when the one chosen refuses (its queue full, its link
// down), on the other: a frame never waits on a network that cannot take it while the other
// can. @return the networks that took it (0: back-pressure).
template <typename Fn>
uint8_t LinkSet::send_on(uint8_t mask, Fn&& fn) {
  uint8_t sent = 0;
  for (int round = 0; round < 2 && sent == 0 && mask != 0; ++round) {
    for (uint8_t n = 0; n < kMaxNets; ++n) {
      if (!(mask & bit(n))) continue;
      if (fn(n)) {
        sent |= bit(n);
        ++c_[n].frames_sent;
      } else {
        ++c_[n].tx_refused;
      }
    }
    mask ^= kAllNets;  // the other one, if it was one
  }
  return sent;
}

std::span<const uint8_t> LinkSet::wrap(ShimKind kind, uint8_t mask, uint8_t heard, uint32_t seq,
                                       std::span<const uint8_t> frame) {
  shim_write(scratch_.data(), kind, shim_net(mask), heard, self_, epoch_, seq);
  std::memcpy(scratch_.data() + kShim, frame.data(), frame.size());
  return {scratch_.data(), kShim + frame.size()};
}

// Frames to a peer take one path in active/standby (the other network only after a fail-over,
// when RACK had better compare frames across the two) and in duplicate mode (the first copy
// to arrive counts); in ping-pong each network is a path of its own (FrameSink::sent_path()).
void LinkSet::took(uint8_t sent) { sent_path_ = cfg_.mode == Mode::kPingPong && sent == bit(1) ? 1 : 0; }

bool LinkSet::send_copy(Peer& p, uint8_t mask, std::span<const uint8_t> frame) {
  if (frame.size() > cfg_.max_frame) return true;  // the engine never makes one: dropped
  const auto wire = wrap(ShimKind::kFrame, mask, heard_bits(p), ++p.seq, frame);
  const uint8_t sent = send_on(mask, [&](uint8_t n) { return nets_[n]->send_frame(p.id, wire); });
  took(sent);
  if (sent != 0) p.last_tx = now_;
  return sent != 0;
}

bool LinkSet::send_frame(NodeId peer, std::span<const uint8_t> frame) {
  Peer* p = find(peer);
  if (p == nullptr) return true;  // add_peer() first: as a link with no address for it
  // An answer (an ACK; group control: a member's NACK or ACK, a source's STATUS or LOST)
  // goes back where the peer's data last came in: when one network loses, the opposite of
  // the one the missed frames went on (NASA KSC's NACK rule).
  const bool answer = frame.size() > 1 && (frame[1] == static_cast<uint8_t>(FrameType::kAck) ||
                                           frame[1] == static_cast<uint8_t>(FrameType::kGroupCtl));
  return send_copy(*p, nets_for(*p, answer, 0), frame);
}

FrameRoom LinkSet::frame_room() const {
  const FrameRoom a = nets_[0]->frame_room(), b = nets_[1]->frame_room();
  return {static_cast<uint32_t>(sizeof(SlotOwn)) + a.priv,
          static_cast<uint32_t>(kShim) + (a.head > b.head ? a.head : b.head),
          a.tail > b.tail ? a.tail : b.tail};
}

// Held slots are network A's memory when it has some (network B sends them too: both are the
// same kind of link); else the link set's own, sent by copy on either.
uint8_t* LinkSet::frame_memory_alloc(size_t bytes) {
  if (uint8_t* m = nets_[0]->frame_memory_alloc(bytes)) return inner_memory_ = true, m;
  OwnMemory m{std::make_unique<uint8_t[]>(bytes + 64), nullptr};  // zeroed
  m.aligned = m.raw.get() + (64 - reinterpret_cast<uintptr_t>(m.raw.get()) % 64) % 64;
  own_memory_.push_back(std::move(m));
  inner_memory_ = false;
  return own_memory_.back().aligned;
}

void LinkSet::frame_memory_free(uint8_t* mem) {
  for (size_t i = 0; i < own_memory_.size(); ++i) {
    if (own_memory_[i].aligned != mem) continue;
    own_memory_.erase(own_memory_.begin() + static_cast<ptrdiff_t>(i));
    return;
  }
  nets_[0]->frame_memory_free(mem);
}

bool LinkSet::slot_busy(const uint8_t* slot) const {
  return inner_memory_ && nets_[0]->slot_busy(slot + sizeof(SlotOwn));
}

bool LinkSet::send_held(NodeId peer, uint8_t* slot, std::span<uint8_t> frame, uint8_t again) {
  Peer* p = find(peer);
  if (p == nullptr) return true;
  auto* own = reinterpret_cast<SlotOwn*>(slot);
  if (again == send_why::kFirst) {
    own->held_net = kNoNet;
    own->last = 0;
  }
  const uint8_t last = own->last;
  if (again == send_why::kLost && last != 0) {
    // Lost: the networks it last went on failed it (NASA's failure count), once per loss (a
    // retry after back-pressure counts nothing more). A tail-loss probe, or the resend of a
    // retransmission timeout, is a guess, and counts against none. In duplicate mode neither:
    // the copy on the other network was lost too, which says more of the peer (off its core)
    // than of either network; the heartbeats judge them.
    for (uint8_t n = 0; n < kMaxNets; ++n) {
      if (!(last & bit(n))) continue;
      ++c_[n].resent;
      if (cfg_.mode != Mode::kDuplicate) p->health[n].failure(cfg_.health, now_);
    }
    own->last = 0;
    evaluate(*p, now_);
  }
  const uint8_t mask = nets_for(*p, false, last);
  // A fresh shim every sending: a resend is a new copy the receiver must not drop as a
  // duplicate of one it already has (its ACK may be what was lost).
  uint8_t* wire = frame.data() - kShim;
  shim_write(wire, ShimKind::kFrame, shim_net(mask), heard_bits(*p), self_, epoch_, ++p->seq);
  const std::span<uint8_t> out(wire, kShim + frame.size());
  const uint8_t sent = send_on(mask, [&](uint8_t n) {
    bool took;
    if (inner_memory_ && (own->held_net == kNoNet || own->held_net == n)) {
      took = nets_[n]->send_held(peer, slot + sizeof(SlotOwn), out, send_why::kFirst);  // new shim: new header, tag
      if (took) own->held_net = n;
    } else {
      took = nets_[n]->send_frame(peer, out);  // another network's header: a copy
    }
    return took;
  });
  if (sent != 0) own->last = sent, p->last_tx = now_;
  took(sent);
  return sent != 0;
}

void* LinkSet::hold_frame() {
  void* h = nets_[rx_net_]->hold_frame();
  if (h == nullptr) return nullptr;
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(h) | rx_net_);  // holds are aligned
}

void LinkSet::release_frame(void* held) {
  const auto v = reinterpret_cast<uintptr_t>(held);
  nets_[v & 1]->release_frame(reinterpret_cast<void*>(v & ~uintptr_t{1}));
}

bool LinkSet::multicast() const { return nets_[0]->multicast() && nets_[1]->multicast(); }

bool LinkSet::send_group(GroupId g, std::span<const uint8_t> frame) {
  if (frame.size() > cfg_.max_frame) return true;
  const uint8_t mask = group_nets();
  const auto wire = wrap(ShimKind::kGroup, mask, 0, ++group_seq_, frame);
  return send_on(mask, [&](uint8_t n) { return nets_[n]->send_group(g, wire); }) != 0;
}

void LinkSet::subscribe(GroupId g, bool on) {
  for (auto* n : nets_) n->subscribe(g, on);
}

// A gap in the peer's numbers on this network is its heartbeats lost there, however long the
// outage (a restart of the peer is a new epoch, not a gap: a second's worth was the limit
// before, so an outage of more than a second counted nothing).
void LinkSet::on_heartbeat(Peer& p, uint8_t net, uint32_t epoch, uint32_t seq) {
  ++c_[net].heartbeats_received;
  const auto gap = static_cast<int32_t>(seq - p.hb_rx[net]);
  const bool same = p.hb_rx_seen[net] && p.hb_rx_epoch[net] == epoch;
  if (same && gap > 1) {
    c_[net].heartbeats_lost += static_cast<uint32_t>(gap) - 1;
    p.health[net].failure(cfg_.health, now_);
  }
  if (!same || gap > 0) p.hb_rx[net] = seq;
  p.hb_rx_epoch[net] = epoch;
  p.hb_rx_seen[net] = true;
}

void LinkSet::on_frame(uint8_t net, std::span<const uint8_t> frame, uint64_t now) {
  now_ = now;
  Shim s;
  if (net >= kMaxNets || !shim_read(frame, &s)) {
    ++bad_shim_;
    return;
  }
  Peer* p = find(s.src_node.get());
  if (p == nullptr) {
    ++not_peer_;
    return;
  }
  // Heard again after a silence on every network: that was the peer's (or ours toward it),
  // and each network's lag counts from now, so one that stays silent while the other
  // carries frames is found down, and neither is for the silence they shared.
  // A network already found behind stays so: its silence is its own, and made level it
  // would look alive for --net-miss heartbeats after each stall of the peer (a network that
  // fails one way flapped so on the node whose frames it lost).
  const bool back = !peer_heard(*p);
  clamp_heartbeat(*p, s, back);
  for (uint8_t n = 0; back && n < kMaxNets; ++n)
    if (!p->health[n].behind()) p->health[n].peer_back(now);
  p->health[net].heard(now);
  raise_level(*p, net, s);
  if (back && !p->health[net ^ 1].behind()) p->level[net ^ 1] = p->level[net];
  const auto kind = static_cast<ShimKind>(s.kind);
  // A group frame's shim is the same for every member: no news. A peer that hears us on
  // neither network heard our silence (a stall of ours), which says nothing of either.
  if (kind != ShimKind::kGroup && (s.heard & kAllNets) != 0)
    for (uint8_t n = 0; n < kMaxNets; ++n) p->health[n].peer_hears((s.heard & bit(n)) != 0);
  if (kind == ShimKind::kHeartbeat) return on_heartbeat(*p, net, s.epoch.get(), s.seq.get());
  DedupWindow& w = kind == ShimKind::kGroup ? p->groups : p->frames;
  switch (w.check(s.epoch.get(), s.seq.get())) {
    case DedupWindow::kDuplicate: ++c_[net].duplicates_dropped; return;
    case DedupWindow::kStale: ++c_[net].stale_passed; break;  // the engine judges it
    case DedupWindow::kNew: break;
  }
  ++c_[net].frames_received;
  p->answer_unheard = false;
  const std::span<const uint8_t> inner = frame.subspan(kShim);
  if (inner.size() > 1 && (inner[1] == static_cast<uint8_t>(FrameType::kData) ||
                            inner[1] == static_cast<uint8_t>(FrameType::kGroupData)))
    p->rx_net = net;
  rx_net_ = net;
  if (engine_ != nullptr) engine_->on_frame(inner, now);
}

uint32_t LinkSet::heartbeat(Peer& p, uint8_t net) {
  uint8_t hb[kShim];
  shim_write(hb, ShimKind::kHeartbeat, net, heard_bits(p), self_, epoch_, ++p.hb_tx[net]);
  if (!nets_[net]->send_frame(p.id, std::span<const uint8_t>(hb, kShim))) return 0;
  ++c_[net].heartbeats_sent;
  return 1;
}

void LinkSet::credit_absence(uint64_t now, uint64_t ns) {
  for (auto& p : peers_)
    for (auto& h : p->health) h.credit(now, ns);
}

uint32_t LinkSet::poll(uint64_t now) {
  now_ = now;
  if (!polled_) {  // the lcore starts after the peers were added: silence counts from here
    polled_ = true;
    for (auto& p : peers_)
      for (auto& h : p->health) h.start(now);
  }
  if (now < next_poll_) return 0;
  uint32_t sent = 0;
  NetState worst[kMaxNets] = {};
  for (auto& p : peers_) {
    for (uint8_t n = 0; n < kMaxNets; ++n) sent += heartbeat(*p, n);
    evaluate(*p, now);
    for (uint8_t n = 0; n < kMaxNets; ++n)
      if (p->health[n].state() > worst[n]) worst[n] = p->health[n].state();
  }
  for (uint8_t n = 0; n < kMaxNets; ++n) c_[n].state = worst[n];
  next_poll_ = now + cfg_.health.heartbeat_ns;
  return sent;
}

}  // namespace imago::rel::red
