// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the dual-network layer (reliability/redundancy/link_set.h) between two real
// engines, on two networks the input controls.
//
// The world: node 1 and node 2, each a real rel::Engine whose FrameSink is a red::LinkSet
// (both in the same mode) over two ports, one on network A (0), one on network B (1). Each
// network is a wire with a queue per direction; ops carry the oldest frame of a queue to the
// other node's link set, lose it, carry a copy and keep it (a duplicate), or swap the two
// oldest (reordering). A port can refuse (its link is down: send_frame() returns false). Node
// 1 also takes hostile frames: raw bytes, and shims with a valid CRC and fuzzed fields (kind,
// network, heard bits, source, epoch, sequence number) before fuzzed bytes. The applications
// send each other numbered messages whose bytes can be checked.
//
// Input: a set-up byte (mode, heartbeat interval, fail-back, failure threshold, heartbeat
// misses, handshake before the ops or not: link_config()), then ops: one byte each, then the
// op's fields (enum Op). Time moves by the advance op (then both link sets and both engines
// poll), and by kHopNs for each frame carried.
//
// Invariants (any break aborts):
// - no crash, no sanitizer report;
// - no link set or engine allocates in on_frame(), poll() or send() (the harness's ports and
//   applications, called from inside, may);
// - each node delivers the other's messages exactly once, in order, unaltered (after a reset
//   or death of the session: in order and once, with gaps); nothing else is delivered,
//   whatever the hostile frames (they are blind to the engine's session: they never carry
//   node 2's engine token or node 1's ISNs, blind(); they may carry node 2's link-set epoch
//   and any shim number, which moves node 1's duplicate window but must cost no frame);
// - what a link set puts on a port is a valid shim of its own: a heartbeat alone, marked
//   with the port's network, or a frame after it. A frame's shim sequence number goes out
//   once, on both networks only in duplicate mode or (its shim saying so) as an answer after
//   a silence toward the peer, never with one network down and the other not;
//   active/standby sends on the active network, and no mode but duplicate on a down network
//   while the other is not down, unless the other network's port refuses;
// - counters are what the ports and wires saw: frames_sent, heartbeats_sent and tx_refused
//   per network; frames_received (stale ones included) + duplicates_dropped +
//   heartbeats_received = frames with the peer's valid shim handed in on that network;
//   bad_shim() and not_peer() = the hostile frames without a valid shim / from another node
//   (node 2 gets none); node 2 hands its engine every distinct sequence number it got, and
//   more only as stale copies; after a poll, state is the peer's state;
// - once the wires are fair and the ports take everything, every message Engine::send()
//   accepted arrives (unless the session reset or died).
#include <sanitizer/allocator_interface.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "reliability/codec.h"
#include "reliability/engine.h"
#include "reliability/redundancy/link_set.h"
#include "tests/fuzz/capture.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/reliability/held_frames.h"

namespace imago::fuzz {
namespace {

using rel::NodeId;
namespace red = rel::red;

constexpr NodeId kOne = 1, kTwo = 2;
constexpr uint8_t kNets = red::kMaxNets;
constexpr size_t kShim = sizeof(red::Shim);
constexpr uint32_t kEpoch[2] = {0x5EED0001, 0x5EED0002};  // the link sets' epochs
constexpr size_t kWireCap = 128;       // frames queued per network and direction; older ones are lost
constexpr size_t kMaxMessages = 256;   // per direction
constexpr int kMaxOps = 4096;
constexpr uint64_t kHopNs = 1000;      // one way across a network
constexpr uint32_t kNearSeq = 64;      // a forged shim number this close to node 2's is "near"
// Frames the wires carry for the ops (heartbeats too), then for the liveness check.
constexpr uint32_t kOpsFrameBudget = 4000;
constexpr uint32_t kLivenessFrameBudget = 60000;
constexpr int kLivenessSteps = 12000;

// --- allocations inside calls into the nodes (none after add_peer) ---

thread_local bool g_inside = false;  // a call into a link set or an engine is running
thread_local uint64_t g_allocs = 0;  // what it allocated
void count_alloc(const volatile void*, size_t) { g_allocs += g_inside; }
void ignore_free(const volatile void*) {}

/** Run @p call as a call into a node: it must not allocate. */
template <typename Fn>
void inside(Fn&& call) {
  g_inside = true;
  call();
  g_inside = false;
  FUZZ_CHECK(g_allocs == 0);
}

/** In the harness's callbacks (ports, applications): their allocations are not the node's. */
class Outside {
 public:
  Outside() : was_(g_inside) { g_inside = false; }
  ~Outside() { g_inside = was_; }

 private:
  bool was_;
};

// --- the input ---

enum Op : uint8_t {
  kAdvance,  // u8: how far time moves (advance_ns); then link sets and engines poll
  kWire,     // u8: bit 0 the network, bit 1 from node 2, bits 2-3 carry / lose / duplicate / reorder
  kLink,     // u8: bit 0 the network, bit 1 node 2's port: it refuses frames, or takes them again
  kRaw,      // u8 network (2: none), u16 length, bytes: to node 1 as they are
  kForge,    // shim fields, u16 length, bytes: to node 1 behind a valid shim (forge())
  kSend12,   // u8 length selector (bit 0: fast path): node 1 sends node 2 a message
  kSend21,   // the same, node 2 to node 1
  kSettle,   // every queued frame crosses
  kOpCount,
};

// Set-up byte: bits 0-1 the mode (duplicate, active/standby, ping-pong, ping-pong), bits 2-3
// the heartbeat interval, then fail-back after 2 ms, a failure threshold of 2 in 20 ms (else
// 10 in 100 ms), heartbeat_miss 2 (else 3); bit 7 leaves the handshake to the ops.
constexpr uint8_t kFailback = 0x10, kTwoFailures = 0x20, kTwoMisses = 0x40, kNoWarmUp = 0x80;

red::Config link_config(uint8_t s) {
  static constexpr red::Mode kMode[4] = {red::Mode::kDuplicate, red::Mode::kActiveStandby,
                                         red::Mode::kPingPong, red::Mode::kPingPong};
  static constexpr uint64_t kHeartbeat[4] = {200 * rel::kUs, 100 * rel::kUs, 500 * rel::kUs, 1 * rel::kMs};
  red::Config c;
  c.mode = kMode[s & 3];
  c.health.heartbeat_ns = kHeartbeat[(s >> 2) & 3];
  c.health.heal_ns = 5 * c.health.heartbeat_ns;
  c.health.heartbeat_miss = s & kTwoMisses ? 2 : 3;
  if (s & kTwoFailures) c.health.fail_threshold = 2, c.health.fail_window_ns = 20 * rel::kMs;
  c.failback_ns = s & kFailback ? 2 * rel::kMs : 0;
  c.max_frame = small_engine_config(kOne).mtu;  // the engine never sends more
  return c;
}

rel::Config engine_config(NodeId id, const red::Config& rc) {
  rel::Config c = small_engine_config(id);
  c.ack_delay_ns = 500 * rel::kUs;  // timers of a fast link: the liveness check ends sooner
  c.rto_min_ns = 2 * rel::kMs;
  c.rto_initial_ns = 10 * rel::kMs;
  c.rto_max_ns = 50 * rel::kMs;
  red::fit_engine(rc, &c);  // as imagod and the simulator do
  return c;
}

uint64_t advance_ns(uint8_t m) {
  static constexpr uint64_t kUnit[8] = {rel::kUs, 10 * rel::kUs, 50 * rel::kUs, 100 * rel::kUs,
                                        500 * rel::kUs, rel::kMs, 10 * rel::kMs, rel::kSec};
  return kUnit[m >> 5] * (1 + (m & 31) % 10);
}

// --- messages ---

/** Message @p k from @p from: its number, its sender, then bytes that depend on both and on
 *  the position, so a mixed-up or misplaced piece does not compare equal. */
Bytes message(NodeId from, uint32_t k, uint8_t sel) {
  const size_t len = 8 + (sel < 192 ? sel : size_t(sel - 191) * 60);  // up to ~3.8 KiB: fragments
  Bytes m(len);
  std::memcpy(m.data(), &k, 4);
  std::memcpy(m.data() + 4, &from, 4);
  for (size_t i = 8; i < len; ++i) m[i] = static_cast<uint8_t>(k * 31 + i * 7 + from * 101 + (i >> 8));
  return m;
}

/** What one application accepted for the other (the length selector of each message), and
 *  how far the other has received it. */
struct Stream {
  NodeId from;
  std::vector<uint8_t> sels;
  size_t received = 0;
  bool done() const { return received == sels.size(); }
};

/** Message @p m of stream @p s arrived (@p gaps: the session was reset or died since). */
void arrived(Stream& s, std::span<const uint8_t> m, bool gaps) {
  uint32_t k = UINT32_MAX;
  if (m.size() >= 8) std::memcpy(&k, m.data(), 4);
  // Never invented, never twice, never backwards; in order unless the session broke.
  FUZZ_CHECK(k < s.sels.size() && k >= s.received);
  FUZZ_CHECK(gaps || k == s.received);
  FUZZ_CHECK(std::ranges::equal(m, message(s.from, k, s.sels[k])));  // unaltered
  s.received = k + 1;
}

// --- the world ---

struct World;
struct Node;

/** One node's link on one network, as its link set sees it. */
struct Port final : rel::FrameSink {
  Node* node = nullptr;
  uint8_t net = 0;
  bool refuse = false;  // the link is down
  uint64_t frames = 0, heartbeats = 0, refused = 0;  // as the link set must count them
  test::HeldFrames held;     // frames received on it, which the engine may hold
  std::vector<void*> holds;  // holds out, through the link set

  bool send_frame(NodeId peer, std::span<const uint8_t> f) override;
  void* hold_frame() override;
  void release_frame(void* h) override;
  void check_frame(const red::Shim& s) const;
};

struct Node final : rel::AppSink {
  World& w;
  uint8_t idx;  // 0: node 1, 1: node 2
  NodeId id;
  Port ports[kNets];
  std::unique_ptr<red::LinkSet> set;  // destroyed after the engine, which gives back to it
  std::unique_ptr<rel::Engine> e;
  Stream out;  // what its application sent the other
  uint64_t peer_shims[kNets] = {};  // frames with the peer's valid shim handed in, per network
  uint64_t bad = 0, strangers = 0;  // hostile frames without a valid shim / from a non-peer
  uint32_t last_seq = 0;            // the latest frame shim sequence number it sent...
  uint8_t last_nets = 0;            // ... and the networks it went on

  Node(World& world, uint8_t i) : w(world), idx(i), id(i + 1), out{id, {}} {
    for (uint8_t n = 0; n < kNets; ++n) ports[n].node = this, ports[n].net = n;
  }
  ~Node() override { e.reset(); }
  Node& other() const;
  NodeId peer() const { return idx == 0 ? kTwo : kOne; }
  bool deliver(NodeId from, std::span<const uint8_t> m) override;
  void on_peer_reset(NodeId, uint64_t) override;
  void on_peer_dead(NodeId, uint64_t) override;
};

struct World {
  uint64_t now = 1'000'000'000;
  red::Config rc;
  Node n[2]{{*this, 0}, {*this, 1}};
  std::deque<Bytes> wire[kNets][2];  // [network][sender]
  uint32_t frames_left = kOpsFrameBudget;
  bool broken = false;  // the session reset or died: gaps allowed, no liveness
  // What a blind forger does not know: node 2's engine tokens, node 1's ISNs toward it.
  std::vector<uint64_t> two_tokens;
  std::vector<Seq> one_isns;
  // Node 1's frame shim sequence numbers node 2 received (the dedup bounds), and the highest.
  std::vector<bool> two_got;
  uint64_t two_distinct = 0;
  uint32_t two_max_seq = 0;

  void learn(const Node& from, std::span<const uint8_t> inner);
  bool blind(std::span<const uint8_t> f) const;
  void note_two_got(const red::Shim& s);
};

Node& Node::other() const { return w.n[idx ^ 1]; }

void Node::on_peer_reset(NodeId, uint64_t) { w.broken = true; }
void Node::on_peer_dead(NodeId, uint64_t) { w.broken = true; }

bool Node::deliver(NodeId from, std::span<const uint8_t> m) {
  Outside o;
  FUZZ_CHECK(from == peer());
  arrived(other().out, m, w.broken);
  return true;
}

// The secrets of the engines' session, from a frame @p from sent (shim removed).
void World::learn(const Node& from, std::span<const uint8_t> inner) {
  rel::Header h;
  std::span<const uint8_t> body;
  if (rel::decode_header(inner, false, &h, &body) != rel::Reject::kNone) return;
  const bool hello = h.type == rel::FrameType::kHello || h.type == rel::FrameType::kHelloAck;
  if (from.id == kTwo && two_tokens.size() < 16 &&
      std::find(two_tokens.begin(), two_tokens.end(), h.src_token) == two_tokens.end())
    two_tokens.push_back(h.src_token);
  if (from.id == kOne && hello && one_isns.size() < 64 &&
      std::find(one_isns.begin(), one_isns.end(), h.seq) == one_isns.end())
    one_isns.push_back(h.seq);
}

// Whether a hostile frame could come from someone who never saw the engine's session: a
// frame that claims node 2 and carries node 2's token or answers node 1's ISNs is not
// (libFuzzer's comparison tracing would otherwise hand the fuzzer the session's secrets). A
// shim with node 2's link-set epoch and any number is allowed: it may move node 1's
// duplicate window anywhere (dedup.h), which must cost no frame, only copies.
bool World::blind(std::span<const uint8_t> f) const {
  red::Shim s;
  if (!red::shim_read(f, &s) || s.src_node.get() != kTwo) return true;
  rel::Header h;
  std::span<const uint8_t> body;
  if (rel::decode_header(f.subspan(kShim), false, &h, &body) != rel::Reject::kNone) return true;
  auto known = [](const auto& v, auto x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  return !known(two_tokens, h.src_token) && !known(one_isns, h.seq) && !known(one_isns, h.ack) &&
         !known(one_isns, h.ack - 1);
}

void World::note_two_got(const red::Shim& s) {
  if (s.kind != static_cast<uint8_t>(red::ShimKind::kFrame)) return;
  const uint32_t seq = s.seq.get();
  two_max_seq = std::max(two_max_seq, seq);
  if (seq >= red::DedupWindow::kFar) return;  // the bounds hold below it only (dedup.h)
  if (two_got.size() <= seq) two_got.resize(seq + 1024);
  two_distinct += !two_got[seq];
  two_got[seq] = true;
}

// A frame the link set sent: a valid shim of its own, on the network and with the number
// its mode allows.
void Port::check_frame(const red::Shim& s) const {
  const Node& me = *node;
  FUZZ_CHECK(s.src_node.get() == me.id && s.epoch.get() == kEpoch[me.idx]);
  if (s.kind == static_cast<uint8_t>(red::ShimKind::kHeartbeat)) {
    FUZZ_CHECK(s.net == net);
    return;
  }
  FUZZ_CHECK(s.kind == static_cast<uint8_t>(red::ShimKind::kFrame));
  const red::LinkSet& ls = *me.set;
  const red::Mode mode = ls.config().mode;
  const bool other_refuses = me.ports[net ^ 1].refuse;
  const uint32_t seq = s.seq.get();
  // On both: every frame in duplicate mode; in the others, an answer after a silence (its
  // shim says so), never on a network found down while the other is not.
  const bool both = s.net == red::kBothNets;
  if (seq == me.last_seq) {
    FUZZ_CHECK((mode == red::Mode::kDuplicate || both) && !(me.last_nets & (1u << net)));
  } else {
    FUZZ_CHECK(seq > me.last_seq);
  }
  if (mode == red::Mode::kDuplicate) return;
  // Never one found down while the other is not (both usable: neither down, or both).
  if (both) FUZZ_CHECK((ls.state(me.peer(), 0) == red::NetState::kDown) == (ls.state(me.peer(), 1) == red::NetState::kDown));
  if (both) return;
  if (ls.state(me.peer(), net) == red::NetState::kDown && ls.state(me.peer(), net ^ 1) != red::NetState::kDown)
    FUZZ_CHECK(other_refuses);
  // Off the active network only when it refuses, or when both are down (then the link set
  // takes one that still works both ways, whichever is active).
  const bool both_down = ls.state(me.peer(), 0) == red::NetState::kDown && ls.state(me.peer(), 1) == red::NetState::kDown;
  if (mode == red::Mode::kActiveStandby && net != ls.active(me.peer()) && !both_down) FUZZ_CHECK(other_refuses);
}

bool Port::send_frame(NodeId peer, std::span<const uint8_t> f) {
  Outside o;
  Node& me = *node;
  FUZZ_CHECK(peer == me.peer());
  red::Shim s;
  FUZZ_CHECK(red::shim_read(f, &s));
  check_frame(s);
  const bool heartbeat = f.size() == kShim;
  if (refuse) {
    refused += !heartbeat;
    return false;
  }
  if (heartbeat) {
    ++heartbeats;
  } else {
    ++frames;
    const uint32_t seq = s.seq.get();
    me.last_nets = seq == me.last_seq ? me.last_nets | (1u << net) : 1u << net;
    me.last_seq = seq;
    me.w.learn(me, f.subspan(kShim));
  }
  std::deque<Bytes>& q = me.w.wire[net][me.idx];
  if (q.size() == kWireCap) q.pop_front();
  q.emplace_back(f.begin(), f.end());
  return true;
}

void* Port::hold_frame() {
  Outside o;
  void* h = held.hold();
  if (h != nullptr) holds.push_back(h);
  return h;
}

// A hold comes back once, to the port that gave it (the link set tags holds with the network).
void Port::release_frame(void* h) {
  Outside o;
  auto it = std::find(holds.begin(), holds.end(), h);
  FUZZ_CHECK(it != holds.end());
  holds.erase(it);
  FUZZ_CHECK(held.release(h));
}

// --- calls into the nodes ---

/** @p to's link set receives @p f on network @p net (in a buffer its engine may hold). */
void receive(World& w, Node& to, uint8_t net, std::span<const uint8_t> f) {
  const std::span<const uint8_t> mine = net < kNets ? to.ports[net].held.begin(f) : f;
  inside([&] { to.set->on_frame(net, mine, w.now); });
  if (net < kNets) to.ports[net].held.end();
}

void poll_node(World& w, Node& n) {
  inside([&] { n.set->poll(w.now); });
  FUZZ_CHECK(n.set->next_deadline() > w.now);
  if (n.set->next_deadline() == w.now + w.rc.health.heartbeat_ns)  // it polled just now
    for (uint8_t k = 0; k < kNets; ++k) FUZZ_CHECK(n.set->counters(k).state == n.set->state(n.peer(), k));
  inside([&] { n.e->poll(w.now); });
  FUZZ_CHECK(n.e->next_deadline() > w.now);  // poll() did all it could now
}

void poll_all(World& w) {
  for (Node& n : w.n) poll_node(w, n);
}

void send(World& w, Node& from, uint8_t sel) {
  if (from.out.sels.size() == kMaxMessages) return;
  const Bytes m = message(from.id, static_cast<uint32_t>(from.out.sels.size()), sel);
  int rc;
  from.set->set_now(w.now);
  inside([&] { rc = from.e->send(from.peer(), m, sel & 1 ? rel::send_flag::kFastpath : 0, w.now); });
  if (rc == 0) from.out.sels.push_back(sel);
}

/** Carry the oldest frame on network @p net from node @p from (@p keep: a copy; the
 *  original stays, a duplicate). */
void carry(World& w, uint8_t net, uint8_t from, bool keep = false) {
  std::deque<Bytes>& q = w.wire[net][from];
  Bytes f = keep ? q.front() : std::move(q.front());
  if (!keep) q.pop_front();
  if (w.frames_left == 0) return;
  --w.frames_left;
  w.now += kHopNs;
  Node& to = w.n[from ^ 1];
  red::Shim s;
  FUZZ_CHECK(red::shim_read(f, &s));
  ++to.peer_shims[net];
  if (to.id == kTwo) w.note_two_got(s);
  receive(w, to, net, f);
}

/** Carry every queued frame, network after network, until the wires are quiet (or a round
 *  limit: engines that retransmit into each other may never be). */
void settle(World& w) {
  for (int round = 0; round < 16 && w.frames_left > 0; ++round) {
    bool any = false;
    for (uint8_t net = 0; net < kNets; ++net)
      for (uint8_t from = 0; from < 2; ++from)
        while (!w.wire[net][from].empty()) carry(w, net, from), any = true;
    if (!any) return;
  }
}

void advance(World& w, uint8_t m) {
  w.now += advance_ns(m);
  poll_all(w);
}

void link_op(World& w, uint8_t sel) {
  Port& p = w.n[(sel >> 1) & 1].ports[sel & 1];
  p.refuse = !p.refuse;
}

void wire_op(World& w, uint8_t sel) {
  const uint8_t net = sel & 1, from = (sel >> 1) & 1;
  std::deque<Bytes>& q = w.wire[net][from];
  if (q.empty()) return;
  switch ((sel >> 2) & 3) {
    case 0: carry(w, net, from); break;
    case 1: q.pop_front(); break;
    case 2: carry(w, net, from, true); break;
    default:
      if (q.size() > 1) std::swap(q[0], q[1]);
  }
}

// --- hostile frames, to node 1 ---

enum class Verdict : uint8_t { kBadShim, kStranger, kPeer };

/** Hand @p f to node 1 on @p net, where its link set must judge it as @p v. */
void inject(World& w, uint8_t net, std::span<const uint8_t> f, Verdict v) {
  if (!w.blind(f)) return;
  Node& one = w.n[0];
  switch (v) {
    case Verdict::kBadShim: ++one.bad; break;
    case Verdict::kStranger: ++one.strangers; break;
    case Verdict::kPeer: ++one.peer_shims[net]; break;
  }
  receive(w, one, net, f);
}

void raw(World& w, Reader& in) {
  const uint8_t net = in.u8() % (kNets + 1);
  const auto f = in.bytes(in.u16() % 1600);
  red::Shim s;
  const Verdict v = net >= kNets || !red::shim_read(f, &s) ? Verdict::kBadShim
                    : s.src_node.get() == kTwo                ? Verdict::kPeer
                                                              : Verdict::kStranger;
  inject(w, net, f, v);
}

// A shim with a valid CRC: kind (0 and 4 are none), network (0, 1, both or any), heard
// bits, source (node 2, node 1 itself, anyone), epoch (node 2's, node 1's, any), sequence
// number (near the last node 2 sent, or any), then the network it arrives on and the bytes
// behind it. Whether the link set must take it follows from the fields alone (shim.h).
void forge(World& w, Reader& in) {
  const uint8_t kind = in.u8() % 5, ns = in.u8(), heard = in.u8(), who = in.u8(), ep = in.u8(), sq = in.u8();
  const uint8_t net = ns < 0x80 ? ns & 1 : ns < 0xC0 ? red::kBothNets : ns;
  const NodeId src = who % 3 == 0 ? kTwo : who % 3 == 1 ? kOne : in.u32();
  const uint32_t epoch = ep % 3 == 0 ? kEpoch[1] : ep % 3 == 1 ? kEpoch[0] : in.u32();
  const uint32_t seq = sq & 0x80 ? in.u32() : w.n[1].last_seq + (sq & 0x7F) - kNearSeq;
  const uint8_t rx = in.u8() % (kNets + 1);
  const auto body = in.bytes(in.u16() % 1024);
  Bytes f(kShim);
  red::shim_write(f.data(), static_cast<red::ShimKind>(kind), net, heard, src, epoch, seq);
  f.insert(f.end(), body.begin(), body.end());
  const bool heartbeat = kind == static_cast<uint8_t>(red::ShimKind::kHeartbeat);
  const bool valid = rx < kNets && kind >= 1 && kind <= 3 && (net < kNets || net == red::kBothNets) &&
                     heartbeat == body.empty();
  inject(w, rx, f, !valid ? Verdict::kBadShim : src == kTwo ? Verdict::kPeer : Verdict::kStranger);
}

// --- the counters ---

void check_counters(const World& w) {
  for (const Node& n : w.n) {
    const red::LinkSet& ls = *n.set;
    for (uint8_t k = 0; k < kNets; ++k) {
      const red::NetCounters& c = ls.counters(k);
      const Port& p = n.ports[k];
      FUZZ_CHECK(c.frames_sent == p.frames && c.heartbeats_sent == p.heartbeats && c.tx_refused == p.refused);
      FUZZ_CHECK(c.frames_received + c.duplicates_dropped + c.heartbeats_received == n.peer_shims[k]);
      FUZZ_CHECK(c.failbacks == 0 || (w.rc.mode == red::Mode::kActiveStandby && w.rc.failback_ns != 0));
    }
    FUZZ_CHECK(ls.bad_shim() == n.bad && ls.not_peer() == n.strangers);
  }
  // Node 2 gets node 1's frames only: each number to its engine once, and again only as a
  // stale copy (below DedupWindow::kFar, where no copy skips the window).
  const red::LinkSet& two = *w.n[1].set;
  const uint64_t taken = two.counters(0).frames_received + two.counters(1).frames_received;
  const uint64_t stale = two.counters(0).stale_passed + two.counters(1).stale_passed;
  if (w.two_max_seq < red::DedupWindow::kFar) FUZZ_CHECK(taken >= w.two_distinct && taken <= w.two_distinct + stale);
}

// --- one run ---

void setup(World& w, uint8_t s) {
  w.rc = link_config(s);
  for (Node& n : w.n) {
    n.set = std::make_unique<red::LinkSet>(w.rc, n.id, kEpoch[n.idx], &n.ports[0], &n.ports[1]);
    FUZZ_CHECK(rel::Engine::create(engine_config(n.id, w.rc), n.set.get(), &n, &n.e) == 0);
    n.set->attach(n.e.get());
    FUZZ_CHECK(n.set->add_peer(n.peer(), w.now) == 0 && n.e->add_peer(n.peer(), w.now) == 0);
  }
  poll_all(w);  // heartbeats and HELLOs
  if (!(s & kNoWarmUp)) settle(w), poll_all(w), settle(w);
}

void step(World& w, Reader& in) {
  switch (in.u8() % kOpCount) {
    case kAdvance: advance(w, in.u8()); break;
    case kWire: wire_op(w, in.u8()); break;
    case kLink: link_op(w, in.u8()); break;
    case kRaw: raw(w, in); break;
    case kForge: forge(w, in); break;
    case kSend12: send(w, w.n[0], in.u8()); break;
    case kSend21: send(w, w.n[1], in.u8()); break;
    default: settle(w); break;
  }
  check_counters(w);
}

bool all_delivered(const World& w) { return w.n[0].out.done() && w.n[1].out.done(); }

// One step of the liveness check: carry what is queued, then on to the earliest deadline
// (at most 50 ms), and poll.
void tick(World& w) {
  settle(w);
  if (all_delivered(w)) return;
  uint64_t due = ~uint64_t{0};
  for (const Node& n : w.n) due = std::min({due, n.set->next_deadline(), n.e->next_deadline()});
  w.now += std::clamp<uint64_t>(due - w.now, 1, 50 * rel::kMs);
  poll_all(w);
}

// The wires are fair again and every port takes what it is given: every message accepted
// must arrive (unless the session reset or died).
void check_liveness(World& w) {
  if (w.frames_left == 0) return;  // the wires lost frames the input did not ask to lose
  for (Node& n : w.n)
    for (Port& p : n.ports) p.refuse = false;
  w.frames_left = kLivenessFrameBudget;
  for (int i = 0; i < kLivenessSteps && !w.broken && w.frames_left > 0 && !all_delivered(w); ++i) tick(w);
  if (w.broken || w.frames_left == 0 || all_delivered(w)) return;
  for (const Node& n : w.n)
    std::fprintf(stderr, "liveness: node %u got %zu of %zu messages; its engine: %s\n", n.id,
                 n.other().out.received, n.other().out.sels.size(), n.e->debug_state(n.peer()).c_str());
  FUZZ_CHECK(all_delivered(w));
}

// IMAGO_FUZZ_VERBOSE=1: the link sets' non-zero counters after the ops of each input.
void dump(const World& w) {
  static const bool verbose = std::getenv("IMAGO_FUZZ_VERBOSE") != nullptr;
  if (!verbose) return;
  for (const Node& n : w.n) {
    std::fprintf(stderr, "node %u (%s, bad_shim=%" PRIu64 " not_peer=%" PRIu64 "):\n", n.id,
                 red::mode_name(w.rc.mode), n.set->bad_shim(), n.set->not_peer());
    for (uint8_t k = 0; k < kNets; ++k) {
      std::fprintf(stderr, "  net %c:", 'A' + k);
      red::for_each_counter(n.set->counters(k), [](const char* name, uint64_t v) {
        if (v) std::fprintf(stderr, " %s=%" PRIu64, name, v);
      });
      std::fprintf(stderr, " (frames held: %" PRIu64 ")\n", n.ports[k].held.taken());
    }
  }
}

void run(Reader& in) {
  World w;
  setup(w, in.u8());
  for (int ops = 0; ops < kMaxOps && !in.empty(); ++ops) step(w, in);
  dump(w);
  check_liveness(w);
  check_counters(w);
  for (Node& n : w.n) n.e.reset();
  for (Node& n : w.n)
    for (Port& p : n.ports) FUZZ_CHECK(p.holds.empty() && p.held.holds() == 0);  // every hold back, once
}

// --- seeds ---

struct Script {
  Writer w;
  explicit Script(uint8_t setup) { w.u8(setup); }
  Script& op(Op o, uint8_t arg) { return w.u8(o).u8(arg), *this; }
  Script& advance(uint8_t m) { return op(kAdvance, m); }
  Script& send(bool from_two, uint8_t sel) { return op(from_two ? kSend21 : kSend12, sel); }
  Script& wire(uint8_t net, bool from_two, uint8_t how) {
    return op(kWire, static_cast<uint8_t>(net | from_two << 1 | how << 2));
  }
  Script& link(uint8_t net, bool two) { return op(kLink, static_cast<uint8_t>(net | two << 1)); }
  Script& settle() { return w.u8(kSettle), *this; }
  Script& talk(int n) {
    for (int i = 0; i < n; ++i) send(false, static_cast<uint8_t>(i * 37)).send(true, static_cast<uint8_t>(i * 53));
    return advance(0x60).settle().advance(0x80).settle();
  }
  // A forged shim from node 2 (wrong epoch unless @p ep says) before @p body.
  Script& forge(uint8_t kind, uint8_t net, uint8_t heard, uint8_t ep, uint8_t seq, std::span<const uint8_t> body) {
    w.u8(kForge).u8(kind).u8(net).u8(heard).u8(0).u8(ep).u8(seq);
    if (ep % 3 == 2) w.u32(0xC0FFEE);
    if (seq & 0x80) w.u32(0x40000000);
    w.u8(net & 1).u16(static_cast<uint16_t>(body.size())).bytes(body);
    return *this;
  }
};

void seeds(const SeedFn& put) {
  const char* names[3] = {"duplicate", "active_standby", "ping_pong"};
  for (uint8_t m = 0; m < 3; ++m) {
    put(std::string("talk_") + names[m], Script(m).talk(20).w.b);
    // Network A goes away under node 1 (its port refuses, node 2's frames on it are lost),
    // long enough to go down; traffic moves; then A is back and heals.
    Script f(m | kFailback | kTwoMisses);
    f.talk(4).link(0, false);
    for (int i = 0; i < 8; ++i) f.send(false, 40).send(true, 200).wire(0, true, 1).advance(0x60).settle();
    f.link(0, false).talk(4);
    for (int i = 0; i < 30; ++i) f.advance(0x61).settle();  // 200 us steps: A heals, traffic fails back
    f.talk(2);
    put(std::string("failover_") + names[m], f.w.b);
    // Losses, duplicates and reordering on both networks; both links refuse for a while.
    Script l(m | kTwoFailures);
    for (int i = 0; i < 12; ++i) {
      l.send(i & 1, static_cast<uint8_t>(i * 21)).wire(i & 1, i & 2, static_cast<uint8_t>(i % 4));
      l.wire(1, !(i & 2), 3).wire(0, i & 1, 2).advance(0x40);
    }
    l.link(0, true).link(1, true).send(true, 9).advance(0x60).link(0, true).link(1, true).settle().advance(0xA0);
    put(std::string("lossy_") + names[m], l.w.b);
  }
  {  // Forged shims from node 2 (a heartbeat that hears nothing, frames near its numbers,
     // bad kinds and networks), raw garbage, then the real traffic goes on.
    Script s(2);
    const Bytes junk(40, 0x5A);
    s.talk(3).forge(3, 0, 0, 0, 0, {}).forge(3, 1, 0, 2, 0x81, {}).forge(1, 0x90, 3, 2, 2, junk);
    s.forge(1, 0, 3, 0, 2, junk).forge(2, 1, 3, 1, 4, junk).forge(4, 0xF0, 0, 2, 0, junk).forge(1, 0, 3, 0, 0x80, junk);
    s.w.u8(kRaw).u8(0).u16(static_cast<uint16_t>(junk.size())).bytes(junk);
    s.talk(3);
    put("forged", s.w.b);
  }
  put("handshake_in_ops", Script(kNoWarmUp | 1).advance(0x20).settle().talk(5).w.b);
  put("empty", Writer().u8(0).b);
}

// Count allocations inside calls into the nodes (inside()).
void init() { __sanitizer_install_malloc_and_free_hooks(count_alloc, ignore_free); }

}  // namespace
}  // namespace imago::fuzz

IMAGO_FUZZ_TARGET(imago::fuzz::init, imago::fuzz::seeds, imago::fuzz::run)
