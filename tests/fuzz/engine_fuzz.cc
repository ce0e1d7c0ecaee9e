// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: a real reliability engine (node A, id 1) fed hostile frames.
//
// The world: A has two peers. B (id 2) is a legitimate real engine on a wire the input
// controls (deliver, drop, duplicate, reorder, in each direction). F (id 3) is the fuzzed
// peer: the harness speaks for it, learning A's token, ISNs and sequence numbers from the
// frames A sends it, so the structured frames it builds get past the header checks (node
// ids, epoch, tokens, CRC) and the fuzzer's bytes land in what follows: ACK, SACK ranges,
// the NACK flag, credits, records, fragments, restart claims. A blind forger also sends
// frames that claim to be B, and raw bytes reach A as they are.
//
// Input: a set-up byte (which handshakes are done before the ops, ISNs near the 2^32 wrap,
// go-back-N, flow control, CRC), then ops: one byte each, then the op's fields
// (see enum Op). Time moves only by the advance op.
//
// Invariants (any break aborts): no crash, no sanitizer report; A allocates nothing in
// on_frame(), poll() and send(), and its memory_bytes() never changes (bounded memory);
// A delivers from B exactly B's messages, in order, once each, and B from A the same
// (after a reset or death between them, in order and once each, with gaps); the blind
// forger never gets anything delivered; and unless A and B reset or declared each other
// dead, once the wire is fair again every message either accepted reaches the other side;
// A rebuilds messages of more than 512 bytes in buffers the harness lends (two), and each
// comes back exactly once, with its message or at A's end; A holds units received out of
// order in their frames (in-place receive), each hold back exactly once, and a frame let go
// is overwritten (a unit read after its release would be delivered corrupt). A is a group
// source and a member (group_from_f): group frames of any kind from F change none of this,
// nor does A closing its group and opening it again.
#include <sanitizer/allocator_interface.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "reliability/codec.h"
#include "reliability/engine.h"
#include "reliability/rng.h"
#include "tests/fuzz/capture.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/reliability/held_frames.h"

namespace imago::fuzz {
namespace {

using rel::Engine;
using rel::FrameType;
using rel::Header;
using rel::NodeId;
using imago::Seq;

constexpr NodeId kA = 1, kB = 2, kF = 3;
constexpr size_t kWireCap = 256;      // frames queued per direction; older ones are lost
constexpr size_t kMaxMessages = 512;  // per direction between A and B
constexpr int kMaxOps = 4096;
constexpr uint64_t kHopNs = 1000;     // one way across the A-B wire
// Frames the A-B wire carries for the ops, and again for the liveness check: a sender that
// retransmits into a stalled receiver without flow control never stops (every overflowing
// frame draws a NACK, every NACK a go-back), and one input must not take seconds. The ops
// get fewer: such storms are what the fuzzer finds most, and each frame costs microseconds
// under the sanitizers; the liveness check gets enough for 512 fragmented messages each way.
constexpr uint32_t kOpsFrameBudget = 4000;
constexpr uint32_t kLivenessFrameBudget = 20000;

// --- allocations inside A's calls (the engine promises none after add_peer) ---

thread_local bool g_watch = false;
thread_local uint64_t g_allocs = 0;
void on_malloc(const volatile void*, size_t) {
  if (g_watch) ++g_allocs;
}
void on_free(const volatile void*) {}

struct Watch {  // around a call into A
  Watch() { g_watch = true; }
  ~Watch() { g_watch = false; }
};
struct Pause {  // in the harness's own callbacks, which may allocate
  bool was = g_watch;
  Pause() { g_watch = false; }
  ~Pause() { g_watch = was; }
};

// --- the input ---

enum Op : uint8_t {
  kAdvance,    // u8: how far time moves; then both engines poll
  kFrameF,     // a structured frame from F (build_frame)
  kForgeB,     // a structured frame claiming to be B, from a blind forger
  kRaw,        // u8 flags, u16 length, bytes: straight to A (sealed with a CRC if asked)
  kWireAB,     // u8: what happens to the next frame A -> B (deliver, drop, dup, reorder)
  kWireBA,     // u8: the same for B -> A
  kSendBA,     // u8 length selector: B sends A a message
  kSendAB,     // u8 length selector: A sends B a message
  kSendAF,     // u8 length, u8 flags: A sends F a message
  kAppFull,    // A's application stops / starts taking messages
  kSinkFull,   // A's frame sink pushes back / takes frames again
  kSettle,     // every queued frame crosses the A-B wire
  kGroupF,     // u8 kind, ...: a group frame from F (group_from_f)
  kOpCount,
};

// Set-up byte: bits 0-1 leave the A-B / A-F handshake to the ops; bits 2-3 fix every ISN
// (random, 2^32 - 16 so sequence numbers wrap at once, 2^31 - 8, 0); then go-back-N instead
// of selective repeat, flow control off, CRC off (on both engines alike); bit 7: A joins
// kGroupJoined from the oldest message a source holds (else from now).
constexpr uint8_t kNoHandshakeAB = 0x01, kNoHandshakeF = 0x02, kGoBackN = 0x10, kNoFlowControl = 0x20,
                  kNoCrc = 0x40;

// --- the world ---

struct Ident {  // one incarnation of F (two, for restart claims)
  uint32_t epoch;
  uint64_t token;
  Seq isn;
};

// Message k of a stream: its index first, then a slice of a fixed pattern that depends on
// k, so a delivery names what it is and a mixed-up one does not compare equal.
Bytes message(uint32_t k, uint8_t sel) {
  static constexpr size_t kMax = 4096;
  static const std::array<uint8_t, 2 * kMax> pattern = [] {
    std::array<uint8_t, 2 * kMax> p{};
    Rng r(99);
    for (auto& b : p) b = static_cast<uint8_t>(r.next());
    return p;
  }();
  size_t len = 4 + (sel < 200 ? sel : size_t(sel - 200) * 80);  // up to ~4 KiB: fragments
  len = std::min<size_t>(len, std::min<size_t>(kMax, small_engine_config(kA).max_message_size));
  Bytes m(len);
  std::memcpy(m.data(), &k, 4);
  std::memcpy(m.data() + 4, pattern.data() + (k * 97) % kMax, len - 4);
  return m;
}

// Messages one side of the legit pair sent, and how far the other side has received them.
struct Stream {
  std::vector<Bytes> sent;
  size_t next = 0;
  void check(std::span<const uint8_t> m, bool gaps_allowed) {
    FUZZ_CHECK(m.size() >= 4);
    uint32_t k;
    std::memcpy(&k, m.data(), 4);
    if (!gaps_allowed) FUZZ_CHECK(k == next);
    FUZZ_CHECK(k >= next && k < sent.size());  // never twice, never backwards, never invented
    FUZZ_CHECK(sent[k].size() == m.size() && std::memcmp(m.data(), sent[k].data(), m.size()) == 0);
    next = k + 1;
  }
  bool done() const { return next == sent.size(); }
};

struct World;

struct Side : rel::FrameSink, rel::AppSink {
  World& w;
  NodeId self;
  std::unique_ptr<Engine> e;
  Side(World& world, NodeId id) : w(world), self(id) {}
  ~Side() override { e.reset(); }  // the engine gives back what it holds first
  bool send_frame(NodeId peer, std::span<const uint8_t> f) override;
  bool deliver(NodeId peer, std::span<const uint8_t> m) override;
  void on_peer_reset(NodeId peer, uint64_t) override;
  void on_peer_dead(NodeId peer, uint64_t) override;

  // A's rebuild buffers, made before the ops: which are out with the engine.
  std::array<Bytes, 2> loan;
  std::array<bool, 2> out{};
  uint64_t rebuild_above() const override { return self == kA ? 512 : UINT64_MAX; }
  rel::RebuildBuffer rebuild_buffer(NodeId) override;
  bool deliver_rebuilt(NodeId peer, std::span<const uint8_t> m, rel::RebuildBuffer b) override;
  void rebuild_buffer_free(NodeId, rel::RebuildBuffer b) override;
  // A holds the frames it receives (in-place receive): each hold back exactly once.
  test::HeldFrames held;
  void* hold_frame() override { return self == kA ? held.hold() : nullptr; }
  void release_frame(void* h) override { FUZZ_CHECK(held.release(h)); }
  /** @return which loan @p b is (it must be one that is out). */
  size_t loan_of(const rel::RebuildBuffer& b) const {
    const size_t i = b.cookie == &out[0] ? 0 : 1;
    FUZZ_CHECK(b.cookie == &out[i] && out[i] && b.data == loan[i].data() && b.cap == loan[i].size());
    return i;
  }
};

struct World {
  uint64_t now = 1'000'000'000;
  Side a{*this, kA}, b{*this, kB};
  std::deque<Bytes> a2b, b2a;
  bool a_accept = true, a_sink_full = false;
  Stream b_to_a, a_to_b;
  uint32_t frames_left = kOpsFrameBudget;  // on the A-B wire; then it loses everything
  bool ab_broken = false;  // A and B reset or declared each other dead: gaps allowed, no liveness
  size_t a_memory = 0;

  // What F knows from A's frames to it.
  Ident f_id[2];
  uint64_t a_token = 0;
  Seq a_isn_to[2] = {0, 0};  // A's ISN in handshake frames to F's identity 0 / 1 (challenges too)
  Seq a_hi = 0;              // end of A's latest data to F (kAck: its next new seq)
  bool a_hi_known = false;   // a_hi came from a data or ACK frame
  Seq f_group_seq = 0;       // where F told A its stream of kGroupJoined starts (JOIN_OK)
  Seq a_ack = 0;             // A's cumulative ACK of F's data (its next expected seq)
  // Secrets of the A-B session a blind forger cannot know: B's token, A's ISNs sent to B.
  uint64_t b_token = 0;
  std::vector<Seq> ab_isns;

  bool forged_by_blind(std::span<const uint8_t> f) const;
  void learn_from_a(NodeId to, std::span<const uint8_t> f);
};

// A frame claiming to come from B that only someone who saw the A-B session could write.
// Such a frame is not a blind forgery; the harness does not send it (libFuzzer's comparison
// tracing would otherwise hand the fuzzer B's token).
bool World::forged_by_blind(std::span<const uint8_t> f) const {
  Header h;
  std::span<const uint8_t> body;
  if (rel::decode_header(f, false, &h, &body) != rel::Reject::kNone || h.src_node != kB) return true;
  if (h.src_token == b_token) return false;
  for (Seq s : ab_isns)
    if (h.ack == s || h.ack == s + 1 || h.seq == s) return false;
  return true;
}

void World::learn_from_a(NodeId to, std::span<const uint8_t> f) {
  Header h;
  std::span<const uint8_t> body;
  if (rel::decode_header(f, false, &h, &body) != rel::Reject::kNone) return;
  a_token = h.src_token;
  const bool hello = h.type == FrameType::kHello || h.type == FrameType::kHelloAck;
  if (to == kB) {
    if (hello && ab_isns.size() < 64 && std::find(ab_isns.begin(), ab_isns.end(), h.seq) == ab_isns.end())
      ab_isns.push_back(h.seq);
    return;
  }
  if (hello) {
    a_isn_to[h.dst_token == f_id[1].token ? 1 : 0] = h.seq;
    if (!a_hi_known) a_hi = h.seq;  // nothing sent yet: A's next seq is its ISN
    return;
  }
  a_hi_known = true;
  a_ack = h.ack;
  if (h.type == FrameType::kAck) {
    a_hi = h.seq;
    return;
  }
  rel::RecordReader rd(body, h.seq);
  rel::Record r;
  Seq end = h.seq;
  while (rd.next(&r) == 1) end = r.seq + 1;
  a_hi = end;
}

bool Side::send_frame(NodeId peer, std::span<const uint8_t> f) {
  Pause p;
  if (self == kB) {
    FUZZ_CHECK(peer == kA);
    Header h;
    std::span<const uint8_t> body;
    if (rel::decode_header(f, false, &h, &body) == rel::Reject::kNone) w.b_token = h.src_token;
    if (w.b2a.size() == kWireCap) w.b2a.pop_front();
    w.b2a.emplace_back(f.begin(), f.end());
    return true;
  }
  FUZZ_CHECK(peer == kB || peer == kF);
  if (w.a_sink_full) return false;
  w.learn_from_a(peer, f);
  if (peer == kB) {
    if (w.a2b.size() == kWireCap) w.a2b.pop_front();
    w.a2b.emplace_back(f.begin(), f.end());
  }
  return true;
}

bool Side::deliver(NodeId peer, std::span<const uint8_t> m) {
  Pause p;
  FUZZ_CHECK(m.size() <= small_engine_config(self).max_message_size);
  if (self == kB) {
    FUZZ_CHECK(peer == kA);
    w.a_to_b.check(m, w.ab_broken);
    return true;
  }
  FUZZ_CHECK(peer == kB || peer == kF);
  if (!w.a_accept) return false;
  if (peer == kB) w.b_to_a.check(m, w.ab_broken);
  return true;
}

rel::RebuildBuffer Side::rebuild_buffer(NodeId) {
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i]) continue;
    out[i] = true;
    return {loan[i].data(), loan[i].size(), &out[i]};
  }
  return {};
}

bool Side::deliver_rebuilt(NodeId peer, std::span<const uint8_t> m, rel::RebuildBuffer b) {
  const size_t i = loan_of(b);
  FUZZ_CHECK(m.data() == b.data && m.size() <= b.cap);
  if (!deliver(peer, m)) return false;
  out[i] = false;
  return true;
}

void Side::rebuild_buffer_free(NodeId, rel::RebuildBuffer b) { out[loan_of(b)] = false; }

void Side::on_peer_reset(NodeId peer, uint64_t) {
  if (peer == kA || peer == kB) w.ab_broken = true;
}
void Side::on_peer_dead(NodeId peer, uint64_t) {
  if (peer == kA || peer == kB) w.ab_broken = true;
}

// --- calls into A, watched ---

void a_on_frame(World& w, std::span<const uint8_t> f) {
  const std::span<const uint8_t> mine = w.a.held.begin(f);  // outside the watch: the wire's
  {
    Watch watch;
    w.a.e->on_frame(mine, w.now);
  }
  w.a.held.end();
  FUZZ_CHECK(g_allocs == 0);
}
void a_poll(World& w) {
  {
    Watch watch;
    w.a.e->poll(w.now);
  }
  FUZZ_CHECK(g_allocs == 0);
  // next_deadline() is "the earliest time poll() has work": poll() just did all it could
  // at this time (a refusing sink or application moves it by the retry intervals), so a
  // deadline of now would make a caller that sleeps until it spin.
  FUZZ_CHECK(w.a.e->next_deadline() > w.now);
}
int a_send(World& w, NodeId to, std::span<const uint8_t> m, uint32_t flags) {
  int rc;
  {
    Watch watch;
    rc = w.a.e->send(to, m, flags, w.now);
  }
  FUZZ_CHECK(g_allocs == 0);
  return rc;
}

void poll_both(World& w) {
  a_poll(w);
  w.b.e->poll(w.now);
  FUZZ_CHECK(w.b.e->next_deadline() > w.now);  // B is a real engine too
}

// Hand every queued frame across the A-B wire until it is quiet.
// Take the frame at the head of @p q across the A-B wire (@p keep: a copy, the original
// stays: a duplicate). Crossing takes kHopNs, so round trips are never zero (a zero RTT
// sample lets go-back-N answer every NACK at once, forever, within one instant).
void cross(World& w, std::deque<Bytes>& q, bool keep = false) {
  Bytes f = keep ? q.front() : std::move(q.front());
  if (!keep) q.pop_front();
  if (w.frames_left == 0) return;
  --w.frames_left;
  w.now += kHopNs;
  if (&q == &w.b2a) {
    a_on_frame(w, f);
  } else {
    w.b.e->on_frame(f, w.now);
  }
}

// Hand every queued frame across the A-B wire until it is quiet (or a round limit: a sender
// that retransmits into a stalled receiver without flow control never is).
void settle(World& w) {
  for (int i = 0; i < 16 && (!w.a2b.empty() || !w.b2a.empty()); ++i) {
    while (!w.a2b.empty()) cross(w, w.a2b);
    while (!w.b2a.empty()) cross(w, w.b2a);
  }
}

// --- frames built from the input ---

// A value near @p base, or any value: two bits of @p m choose how.
Seq pick_seq(Reader& in, uint8_t m, Seq near, Seq other) {
  switch (m >> 6) {
    case 0: return near + (m & 63);
    case 1: return near - (m & 63) - 1;
    case 2: return other + (m & 63);
    default: return in.u32();
  }
}

uint32_t pick_credit(Reader& in) {
  const uint8_t m = in.u8();
  switch (m >> 6) {
    case 0: return rel::kCreditUnlimited;
    case 1: return m & 63;
    case 2: return static_cast<uint32_t>(m & 63) << 25;  // beyond any window
    default: return in.u32();
  }
}

// Records for a DATA body: flags (of @p allowed), an optional explicit seq, a length, payload bytes.
void build_records(Reader& in, uint8_t n, Seq first, Bytes& body, uint8_t allowed = rel::rec_flag::kAll) {
  for (uint8_t i = 0; i < n && !in.empty(); ++i) {
    const uint8_t rf = in.u8();
    const bool explicit_seq = rf & rel::rec_flag::kSeq;
    const Seq s = explicit_seq ? first + static_cast<int8_t>(in.u8()) : 0;
    const uint8_t l = in.u8();
    const size_t len = l < 0xE0 ? l : size_t(l - 0xDF) * 40;  // up to 1280: past one unit
    uint8_t hdr[rel::kMaxRecordHeader];
    const size_t hn = rel::encode_record_header(hdr, rf & (allowed & ~rel::rec_flag::kSeq), s, explicit_seq, len);
    body.insert(body.end(), hdr, hdr + hn);
    auto p = in.bytes(len);
    body.insert(body.end(), p.begin(), p.end());
    body.resize(body.size() + (len - p.size()), static_cast<uint8_t>(i));
  }
}

// A structured frame from @p src as incarnation @p id: the identity fields right unless the
// input says otherwise, the rest from the input near the values A would accept.
Bytes build_frame(Reader& in, NodeId src, Ident id, Seq seq_near, Seq ack_near, Seq ack_other, bool* sealed) {
  const uint8_t b0 = in.u8();
  const auto type = static_cast<FrameType>((b0 & 3) + 1);
  const uint8_t flags = static_cast<uint8_t>(((b0 >> 2) & (rel::frame_flag::kAckReq | rel::frame_flag::kNack)) |
                                             (b0 & 0x20 ? rel::frame_flag::kSackBitmap : 0) |
                                             (b0 & 0x80 ? rel::frame_flag::kSackMore : 0));
  *sealed = !(b0 & 0x10);
  uint64_t dst_token = 0;
  NodeId dst = kA;
  if (b0 & 0x40) {  // lie about the identity
    const uint8_t v = in.u8();
    id.epoch += static_cast<int8_t>(in.u8());
    if (v & 1) id.token = in.u64();
    if (v & 2) dst_token = in.u64();
    if (v & 4) dst = in.u32();
  }
  const bool hello = type == FrameType::kHello || type == FrameType::kHelloAck;
  const Seq seq = pick_seq(in, in.u8(), hello ? id.isn : seq_near, id.isn);
  const Seq ack = pick_seq(in, in.u8(), hello ? ack_other : ack_near, ack_other);
  const uint32_t credit = pick_credit(in);
  const uint8_t nsack = in.u8() % (rel::kMaxSackRanges + 2);  // one more than allowed
  Bytes f(sizeof(rel::FrameHeader) + nsack * sizeof(rel::SackRange));
  rel::encode_header({type, flags, src, dst, id.epoch, id.token, dst_token, seq, ack, credit}, f.data());
  for (uint8_t i = 0; i < nsack; ++i) {
    if (flags & rel::frame_flag::kSackBitmap) {  // a bitmap word: any 64 bits
      rel::encode_sack_word(f.data(), i, in.u64());
      continue;
    }
    const uint8_t m = in.u8(), l = in.u8();
    const Seq start = m & 0x80 ? in.u32() : ack + (m & 0x7F);
    rel::encode_sack(f.data(), i, start, start + l);
  }
  rel::set_sack_count(f.data(), nsack);
  const uint8_t bm = in.u8();
  if (type == FrameType::kData || (bm & 0x40)) {
    Bytes body;
    if (bm & 0x80) {
      auto raw = in.bytes(in.u16() % 1024);  // e.g. the records of a captured frame
      body.assign(raw.begin(), raw.end());
    } else {
      build_records(in, bm & 15, seq, body);
    }
    f.insert(f.end(), body.begin(), body.end());
  }
  return f;
}

void set_dst_token_if_unset(Bytes& f, uint64_t token) {
  rel::FrameHeader fh;
  std::memcpy(&fh, f.data(), sizeof fh);
  if (fh.dst_token.get() == 0) fh.dst_token.set(token);
  std::memcpy(f.data(), &fh, sizeof fh);
}

void seal(Bytes& f, bool crc) {
  if (f.size() >= sizeof(rel::FrameHeader)) rel::finish_frame(f.data(), f.size(), crc);
}

void frame_from_f(World& w, Reader& in) {
  const uint8_t slot = in.u8() & 1;
  bool sealed;
  Bytes f = build_frame(in, kF, w.f_id[slot], w.a_ack, w.a_hi, w.a_isn_to[slot], &sealed);
  set_dst_token_if_unset(f, w.a_token);  // what A expects, unless the input lied about it
  seal(f, sealed);
  a_on_frame(w, f);
}

void frame_from_forger(World& w, Reader& in) {
  const Ident id{in.u32(), in.u64(), in.u32()};
  bool sealed;
  Bytes f = build_frame(in, kB, id, id.isn, 0, 0, &sealed);
  if (in.u8() & 1) set_dst_token_if_unset(f, w.a_token);  // learnt as a peer of A, like F
  seal(f, sealed);
  if (w.forged_by_blind(f)) a_on_frame(w, f);
}

// Groups: A sources kGroupA and joined kGroupJoined, which F may claim to source. F sends
// control entries (any op, for either group or any, sequence numbers near F's stream or
// anywhere) or data of its stream of kGroupJoined near where it told A the stream starts.
constexpr rel::GroupId kGroupA = 0x77, kGroupJoined = 0x88;

void group_from_f(World& w, Reader& in) {
  const Ident& id = w.f_id[0];
  const uint8_t k = in.u8();
  auto group = [&](uint8_t sel) -> rel::GroupId {
    return sel % 3 == 0 ? kGroupA : sel % 3 == 1 ? kGroupJoined : in.u32();
  };
  if ((k & 0x18) == 0x18 && w.a.e->group_close(kGroupA, w.now) == -ENOENT) {
    const int rc = w.a.e->group_open(kGroupA, w.now, k & 0x20);  // closed: open again (or still closing), ACK- or NACK-based
    FUZZ_CHECK(rc == 0 || rc == -EEXIST);
  }
  Bytes f(sizeof(rel::FrameHeader));
  // Parity blocks (PROTOCOL 3.7.7): small frame numbers, blocks of any K (valid: 2..64).
  auto block = [&]() -> uint64_t { return k & 0x40 ? (uint64_t{in.u8()} << 32) | in.u8() % 70 : 0; };
  if (k & 1) {
    const Seq seq = w.f_group_seq + static_cast<int8_t>(in.u8());
    const uint64_t tag = block();
    rel::encode_header({FrameType::kGroupData, 0, kF, group(in.u8()), id.epoch, id.token, tag, seq, 0, in.u8()}, f.data());
    Bytes body;
    build_records(in, in.u8() & 15, seq, body, rel::rec_flag::kAllGroup);
    f.insert(f.end(), body.begin(), body.end());
  } else if (k & 0x40) {
    // A parity frame: the block's first frame or another, covering any count, any bytes.
    const uint64_t tag = block();
    const uint8_t v = in.u8();
    const Seq first = v & 1 ? static_cast<Seq>(tag >> 32) : in.u8();
    rel::encode_header({FrameType::kGroupParity, 0, kF, group(in.u8()), id.epoch, id.token, tag, first,
                        static_cast<Seq>(v >> 1) % 70, v & 0x80 ? in.u32() : in.u8()},
                       f.data());
    for (uint32_t n = in.u8() * 6u; n > 0; --n) f.push_back(in.u8());
  } else {
    rel::encode_header({FrameType::kGroupCtl, 0, kF, kA, id.epoch, id.token, w.a_token, 0, 0, 0}, f.data());
    for (uint8_t n = 1 + in.u8() % 4; n > 0; --n) {
      rel::GroupCtl e{};
      e.op = in.u8() % (rel::group_op::kMax + 2);
      e.group.set(group(in.u8()));
      const uint8_t v = in.u8();
      e.a.set(v & 1 ? w.f_group_seq + static_cast<int8_t>(in.u8()) : in.u32());
      e.b.set(v & 2 ? in.u8() : in.u32());
      e.flags = v & 4 ? rel::group_ctl_flag::kNack : 0;  // a NACK stream's JOIN_OK, STATUS, LOST
      if (e.op == rel::group_op::kJoinOk && e.group.get() == kGroupJoined) w.f_group_seq = e.a.get();
      const auto* b = reinterpret_cast<const uint8_t*>(&e);
      f.insert(f.end(), b, b + sizeof e);
    }
    if (k & 4) f.resize(f.size() - 1 - in.u8() % 15);  // a body cut mid-entry
  }
  seal(f, !(k & 2));
  a_on_frame(w, f);
}

void raw_frame(World& w, Reader& in) {
  const uint8_t flags = in.u8();
  auto raw = in.bytes(in.u16() % 1600);
  Bytes f(raw.begin(), raw.end());
  if (flags & 1) seal(f, true);
  Header h;
  std::span<const uint8_t> body;
  if (rel::decode_header(f, false, &h, &body) == rel::Reject::kNone && h.src_node == kB && !w.forged_by_blind(f))
    return;
  a_on_frame(w, f);
}

void wire(World& w, Reader& in, std::deque<Bytes>& q) {
  const uint8_t how = in.u8() % 4;
  if (q.empty()) return;
  switch (how) {
    case 0: cross(w, q); break;        // deliver
    case 1: q.pop_front(); break;      // lose
    case 2: cross(w, q, true); break;  // duplicate: deliver, keep the original
    default:                           // reorder: the second goes first
      if (q.size() > 1) std::swap(q[0], q[1]);
  }
}

uint64_t advance_ns(uint8_t m) {
  static constexpr uint64_t kUnit[8] = {1, 1'000, 10'000, 100'000, 1'000'000, 10'000'000, 100'000'000, 1'000'000'000};
  return kUnit[m >> 5] * (1 + (m & 31) % 10);
}

// --- one run ---

void setup(World& w, uint8_t s) {
  rel::Config ca = small_engine_config(kA), cb = small_engine_config(kB);
  for (rel::Config* c : {&ca, &cb}) {
    switch ((s >> 2) & 3) {
      case 1: c->initial_seq = 0xFFFFFFF0u; break;  // wraps within the first messages
      case 2: c->initial_seq = 0x7FFFFFF8u; break;
      case 3: c->initial_seq = 0; break;
      default: break;
    }
    c->selective_repeat = !(s & kGoBackN);
    c->flow_control = !(s & kNoFlowControl);
    c->crc = !(s & kNoCrc);
  }
  ca.group_sources = 1;
  ca.group_streams = 2;
  ca.group_window = 64;
  for (Bytes& l : w.a.loan) l.assign(ca.max_message_size, 0);
  FUZZ_CHECK(Engine::create(ca, &w.a, &w.a, &w.a.e) == 0);
  FUZZ_CHECK(Engine::create(cb, &w.b, &w.b, &w.b.e) == 0);
  const Seq f_isn = ca.initial_seq ? *ca.initial_seq - 3 : 0x12345678;
  w.f_id[0] = {5, 0x3F3F3F3F3F3F3F3Full, f_isn};
  w.f_id[1] = {6, 0x4E4E4E4E4E4E4E4Eull, f_isn + 0x10000};
  w.a_ack = f_isn;
  FUZZ_CHECK(w.a.e->add_peer(kB, w.now) == 0 && w.a.e->add_peer(kF, w.now) == 0);
  FUZZ_CHECK(w.b.e->add_peer(kA, w.now) == 0);
  w.a_memory = w.a.e->memory_bytes();
  FUZZ_CHECK(w.a.e->group_open(kGroupA, w.now) == 0 && w.a.e->group_join(kGroupJoined, s & 0x80, w.now) == 0);
  poll_both(w);  // HELLOs
  if (!(s & kNoHandshakeAB)) settle(w);
  if (!(s & kNoHandshakeF)) {
    // F answers A's HELLO: its identity 0, our ISN as A sent it, A's token.
    Bytes f(sizeof(rel::FrameHeader));
    const Ident& id = w.f_id[0];
    rel::encode_header({FrameType::kHelloAck, 0, kF, kA, id.epoch, id.token, w.a_token, id.isn, w.a_isn_to[0], 0}, f.data());
    seal(f, ca.crc);
    a_on_frame(w, f);
  }
}

void step(World& w, Reader& in) {
  switch (in.u8() % kOpCount) {
    case kAdvance:
      w.now += advance_ns(in.u8());
      poll_both(w);
      break;
    case kFrameF: frame_from_f(w, in); break;
    case kForgeB: frame_from_forger(w, in); break;
    case kRaw: raw_frame(w, in); break;
    case kGroupF: group_from_f(w, in); break;
    case kWireAB: wire(w, in, w.a2b); break;
    case kWireBA: wire(w, in, w.b2a); break;
    case kSendBA: {
      const uint8_t sel = in.u8();
      if (w.b_to_a.sent.size() == kMaxMessages) break;
      Bytes m = message(static_cast<uint32_t>(w.b_to_a.sent.size()), sel);
      if (w.b.e->send(kA, m, sel & 1 ? rel::send_flag::kFastpath : 0, w.now) == 0) w.b_to_a.sent.push_back(std::move(m));
      break;
    }
    case kSendAB: {
      const uint8_t sel = in.u8();
      if (w.a_to_b.sent.size() == kMaxMessages) break;
      Bytes m = message(static_cast<uint32_t>(w.a_to_b.sent.size()), sel);
      if (a_send(w, kB, m, sel & 1 ? rel::send_flag::kFastpath : 0) == 0) w.a_to_b.sent.push_back(std::move(m));
      break;
    }
    case kSendAF: {
      const uint8_t sel = in.u8(), flags = in.u8();
      const Bytes m = message(0, sel);
      a_send(w, kF, m, flags & 3);
      break;
    }
    case kAppFull: w.a_accept = !w.a_accept; break;
    case kSinkFull: w.a_sink_full = !w.a_sink_full; break;
    default: settle(w); break;
  }
}

// The wire is fair again and the applications take everything: every message accepted
// between A and B must arrive (unless they reset or declared each other dead).
void check_liveness(World& w) {
  if (w.frames_left == 0) return;  // the wire lost frames the input did not ask to lose
  w.a_accept = true;
  w.a_sink_full = false;
  w.frames_left = kLivenessFrameBudget;
  const uint64_t start = w.now;
  for (int i = 0; i < 2000 && !w.ab_broken && w.frames_left > 0; ++i) {
    settle(w);
    if (w.b_to_a.done() && w.a_to_b.done()) return;
    // Straight to the next deadline (polls check it lies ahead), in steps of at most 50 ms.
    const uint64_t due = std::min(w.a.e->next_deadline(), w.b.e->next_deadline());
    w.now += std::clamp<uint64_t>(due - w.now, 1, 50 * rel::kMs);
    poll_both(w);
    if (w.now - start > 60 * rel::kSec) break;
  }
  if (w.ab_broken || w.frames_left == 0) return;
  if (!w.b_to_a.done() || !w.a_to_b.done()) {
    std::fprintf(stderr, "liveness: A got %zu of %zu from B, B got %zu of %zu from A\n  A->B: %s\n  B->A: %s\n",
                 w.b_to_a.next, w.b_to_a.sent.size(), w.a_to_b.next, w.a_to_b.sent.size(),
                 w.a.e->debug_state(kB).c_str(), w.b.e->debug_state(kA).c_str());
    FUZZ_CHECK(w.b_to_a.done() && w.a_to_b.done());
  }
}

// IMAGO_FUZZ_VERBOSE=1: A's non-zero counters per peer after each input (to see what a seed
// or a corpus file reaches).
void dump(const World& w) {
  for (NodeId p : {kB, kF}) {
    std::fprintf(stderr, "A's peer %u (%s):", p, rel::PeerState(w.a.e->state(p)) == rel::PeerState::kEstablished ? "up" : "not up");
    auto field = [](const char* k, uint64_t v) {
      if (v) std::fprintf(stderr, " %s=%" PRIu64, k, v);
    };
    rel::for_each_counter(*w.a.e->counters(p), field);
    rel::for_each_reject(*w.a.e->counters(p), field);
    std::fprintf(stderr, "\n");
  }
}

void run(Reader& in) {
  static const bool verbose = std::getenv("IMAGO_FUZZ_VERBOSE") != nullptr;
  World w;
  setup(w, in.u8());
  for (int ops = 0; ops < kMaxOps && !in.empty(); ++ops) {
    step(w, in);
    FUZZ_CHECK(w.a.e->memory_bytes() == w.a_memory);
  }
  if (verbose) dump(w), std::fprintf(stderr, "A-B wire: %u frames\n", kOpsFrameBudget - w.frames_left);
  check_liveness(w);
  w.a.e.reset();
  FUZZ_CHECK(!w.a.out[0] && !w.a.out[1]);  // every rebuild buffer back, once
  FUZZ_CHECK(w.a.held.holds() == 0);        // every received frame A held, back once
}

// --- seeds: op sequences around frames of a real conversation ---

struct Script {
  Writer w;
  explicit Script(uint8_t setup) { w.u8(setup); }
  Script& op(Op o) { return w.u8(o), *this; }
  Script& advance(uint8_t m) { return op(kAdvance).w.u8(m), *this; }
  Script& send_af(uint8_t sel, uint8_t flags = 1) { return op(kSendAF).w.u8(sel).u8(flags), *this; }
  Script& send_ba(uint8_t sel) { return op(kSendBA).w.u8(sel), *this; }
  Script& send_ab(uint8_t sel) { return op(kSendAB).w.u8(sel), *this; }
  // A frame from F: b0 (type-1 | flags << 2), seq mode, ack mode, credit mode, SACK ranges
  // (offset from the ack, length), then a body.
  Script& from_f(uint8_t slot, uint8_t b0, uint8_t seq_m, uint8_t ack_m, uint8_t credit_m,
                 std::vector<std::pair<uint8_t, uint8_t>> sacks, uint8_t bm, std::span<const uint8_t> raw_body = {}) {
    op(kFrameF).w.u8(slot).u8(b0).u8(seq_m).u8(ack_m).u8(credit_m).u8(static_cast<uint8_t>(sacks.size()));
    for (auto [o, l] : sacks) w.u8(o).u8(l);
    w.u8(bm);
    if (bm & 0x80) w.u16(static_cast<uint16_t>(raw_body.size())).bytes(raw_body);
    return *this;
  }
};

void seeds(const SeedFn& put) {
  constexpr uint8_t kData = 2, kAck = 3, kHello = 0, kAckReq = 1 << 2, kNack = 2 << 2;
  // Bodies of the data frames two real engines sent each other.
  std::vector<Bytes> bodies;
  for (const Bytes& f : capture_conversation()) {
    Header h;
    std::span<const uint8_t> body;
    if (rel::decode_header(f, true, &h, &body) == rel::Reject::kNone && h.type == FrameType::kData)
      bodies.emplace_back(body.begin(), body.end());
  }
  {  // F sends A the captured data: whole messages, fragments, every length encoding
    Script s(0);
    // Each at A's next expected seq, which its ACK (sent within the ACK delay) tells F.
    for (size_t i = 0; i < bodies.size() && i < 16; ++i) s.from_f(0, kData, 0, 0, 0, {}, 0x80, bodies[i]).advance(0xA0);
    put("f_data_captured", s.w.b);
  }
  {  // A sends F a burst; F SACKs two ranges with a NACK, then ACKs everything
    Script s(0);
    for (int i = 0; i < 12; ++i) s.send_af(static_cast<uint8_t>(i * 20));
    s.from_f(0, kAck | kNack, 0, 0x40 | 11, 0, {{2, 3}, {6, 2}}, 0).advance(0x80).advance(0xA0);
    s.from_f(0, kAck, 0, 0, 0, {}, 0).advance(0xC0);
    put("f_sack_nack", s.w.b);
  }
  {  // F stops A with zero credit, then lifts it; A fragments a 4 KiB message meanwhile
    Script s(0);
    s.from_f(0, kAck, 0, 0, 0x40, {}, 0).send_af(255).send_af(250).advance(0xA0);
    s.from_f(0, kAck | kAckReq, 0, 0, 0x40 | 8, {}, 0).advance(0xA0).from_f(0, kAck, 0, 0, 0, {}, 0).advance(0xE0);
    put("f_credit", s.w.b);
  }
  {  // F sends fragments out of order, a duplicate, and a message cut short
    Script s(0);
    s.from_f(0, kData, 1, 0, 0, {}, 2);
    s.w.u8(rel::rec_flag::kMore | rel::rec_flag::kCont).u8(30).bytes(Bytes(30, 2));
    s.w.u8(rel::rec_flag::kCont).u8(10).bytes(Bytes(10, 3));
    s.from_f(0, kData, 0, 0, 0, {}, 1);
    s.w.u8(rel::rec_flag::kMore).u8(0xF0).bytes(Bytes(17 * 40, 1));
    s.from_f(0, kData, 0, 0, 0, {}, 1).w.u8(rel::rec_flag::kMore).u8(5).bytes(Bytes(5, 9));
    s.from_f(0, kData, 3, 0, 0, {}, 1).w.u8(0).u8(4).bytes(Bytes(4, 4));
    s.advance(0x80).advance(0xA0);
    put("f_fragments", s.w.b);
  }
  {  // F claims a restart (identity 1), then echoes A's challenge: a proven restart
    Script s(0);
    s.send_af(10).advance(0x40);
    s.from_f(1, kHello, 0, 0x80, 0, {}, 0).advance(0x80);
    s.from_f(1, kHello, 0, 0x80, 0, {}, 0).advance(0x80).send_af(20).from_f(1, kAck, 0, 0, 0, {}, 0);
    put("f_restart", s.w.b);
  }
  {  // B and A talk over a lossy, reordering, duplicating wire
    Script s(0);
    for (int i = 0; i < 10; ++i) s.send_ba(static_cast<uint8_t>(i * 25)).send_ab(static_cast<uint8_t>(i * 13));
    for (int i = 0; i < 6; ++i) s.op(kWireBA).w.u8(static_cast<uint8_t>(i));
    for (int i = 0; i < 6; ++i) s.op(kWireAB).w.u8(static_cast<uint8_t>(i + 1));
    s.advance(0xA0).op(kSettle).advance(0xC0).op(kSettle);
    put("ab_lossy_wire", s.w.b);
  }
  {  // The handshakes are the fuzzer's: a blind forger claims B first (a HELLO and an ACK)
    Script s(kNoHandshakeAB | kNoHandshakeF);
    s.op(kForgeB).w.u32(9).u64(0xABCDEF).u32(1000).u8(kHello).u8(0).u8(0).u8(0).u8(0).u8(0).u8(1);
    s.op(kForgeB).w.u32(9).u64(0xABCDEF).u32(1000).u8(kAck).u8(0).u8(0).u8(0).u8(0).u8(0).u8(1);
    s.op(kWireBA).w.u8(0);
    s.op(kWireAB).w.u8(0);
    s.op(kSettle).send_ba(7).advance(0x60).op(kSettle);
    put("forger_first", s.w.b);
  }
  {  // A's application and frame sink push back
    Script s(kGoBackN);
    s.op(kAppFull).send_ba(3).send_ba(250).op(kSettle).advance(0x40).op(kAppFull).op(kSinkFull);
    s.send_ab(100).advance(0x40).op(kSinkFull).advance(0x60).op(kSettle);
    put("pushback_gobackn", s.w.b);
  }
  {  // Raw frames: every captured frame, as it was, at A
    Script s(0x04);
    int i = 0;
    for (const Bytes& f : capture_conversation()) {
      if (i++ == 12) break;
      s.op(kRaw).w.u8(0).u16(static_cast<uint16_t>(f.size())).bytes(f);
    }
    put("raw_captured", s.w.b);
  }
  put("empty", Writer().u8(0).b);
}

// Count allocations inside A's calls (Watch).
void init() { __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free); }

}  // namespace
}  // namespace imago::fuzz

IMAGO_FUZZ_TARGET(imago::fuzz::init, imago::fuzz::seeds, imago::fuzz::run)
