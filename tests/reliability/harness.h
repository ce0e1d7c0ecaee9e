// SPDX-License-Identifier: BSD-3-Clause
// Protocol-test harness (eRPC style): real engines whose frames are captured, inspected and
// then handed over (or not) by the test, with time moved by hand.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "reliability/codec.h"
#include "reliability/engine.h"

namespace imago::rel::test {

using Bytes = std::vector<uint8_t>;

/** One node: its engine, the frames it emitted, the messages it delivered. */
struct Node : FrameSink, AppSink {
  std::unique_ptr<Engine> e;
  std::deque<std::pair<NodeId, Bytes>> out;  ///< frames emitted, oldest first
  std::vector<Bytes> got;                    ///< messages delivered
  bool accept = true;                        ///< false: the application ring is full
  bool sink_full = false;                    ///< true: send_frame() pushes back
  int ups = 0, resets = 0, deaths = 0;
  uint64_t discarded = 0;

  ~Node() override { e.reset(); }  // the engine gives its held frames back to the sink below

  bool send_frame(NodeId peer, std::span<const uint8_t> f) override {
    if (sink_full) return false;
    out.emplace_back(peer, Bytes(f.begin(), f.end()));
    return true;
  }
  // Held frames (frame_sink.h), when `hold` is set before the engine is made: slots in `mem`,
  // each send logged with the bytes it went out from; `busy` slots are still "in use".
  bool hold = false;
  std::deque<std::vector<uint8_t>> mem;  ///< one allocation per peer's window
  std::vector<std::span<const uint8_t>> held_sends;  ///< the held bytes of each send_held()
  std::vector<uint8_t> held_whys;                     ///< and why each went (send_why)
  std::set<const uint8_t*> busy;
  uint8_t* frame_memory_alloc(size_t n) override {
    if (!hold) return nullptr;
    return mem.emplace_back(n, 0).data();
  }
  bool send_held(NodeId peer, uint8_t* slot, std::span<uint8_t> f, uint8_t again) override {
    if (!send_frame(peer, f)) return false;
    held_sends.push_back(f);
    held_whys.push_back(again);
    held_slot[f.data()] = slot;
    return true;
  }
  bool slot_busy(const uint8_t* slot) const override { return busy.count(slot) != 0; }
  std::map<const uint8_t*, const uint8_t*> held_slot;  ///< frame bytes -> their slot
  bool deliver(NodeId, std::span<const uint8_t> m) override {
    if (!accept) return false;
    got.emplace_back(m.begin(), m.end());
    return true;
  }
  // Rebuild buffers (AppSink::rebuild_buffer): one, of lend_cap bytes, lent past lend_above
  // bytes (read when the engine is made).
  uint64_t lend_above = UINT64_MAX;
  uint64_t lend_cap = 0;
  Bytes loan;
  bool loan_out = false;
  int rebuilt = 0, given_back = 0;
  uint64_t rebuild_above() const override { return lend_above; }
  RebuildBuffer rebuild_buffer(NodeId) override {
    if (loan_out) return {};
    loan_out = true;
    loan.assign(lend_cap, 0);
    return {loan.data(), lend_cap, this};
  }
  bool deliver_rebuilt(NodeId, std::span<const uint8_t> m, RebuildBuffer b) override {
    EXPECT_TRUE(loan_out && b.data == loan.data() && m.data() == loan.data() && b.cookie == this);
    if (!accept) return false;
    got.emplace_back(m.begin(), m.end());
    ++rebuilt;
    loan_out = false;
    return true;
  }
  void rebuild_buffer_free(NodeId, RebuildBuffer b) override {
    EXPECT_TRUE(loan_out && b.data == loan.data());
    ++given_back;
    loan_out = false;
  }
  // In-place receive (FrameSink::hold_frame), when hold_rx is set: the frame being received
  // stays alive while held; a hold given back twice fails; a frame let go is overwritten.
  bool hold_rx = false;
  std::shared_ptr<Bytes> receiving;
  std::map<const void*, std::pair<std::shared_ptr<Bytes>, int>> rx_held;
  int holds_taken = 0, holds_now = 0;
  void* hold_frame() override {
    if (!hold_rx || !receiving) return nullptr;
    auto& h = rx_held[receiving.get()];
    h.first = receiving;
    ++h.second, ++holds_taken, ++holds_now;
    return receiving.get();
  }
  void release_frame(void* f) override {
    auto it = rx_held.find(f);
    ASSERT_TRUE(it != rx_held.end()) << "a frame released that is not held";
    --holds_now;
    if (--it->second.second > 0) return;
    std::fill(it->second.first->begin(), it->second.first->end(), uint8_t{0xA5});
    rx_held.erase(it);
  }
  void on_peer_up(NodeId) override { ++ups; }
  void on_peer_reset(NodeId, uint64_t d) override { ++resets, discarded += d; }
  void on_peer_dead(NodeId, uint64_t d) override { ++deaths, discarded += d; }
  int settings_told = 0;  ///< on_peer_settings() calls
  PeerSettings settings_theirs{};  ///< the latest one's
  void on_peer_settings(NodeId, PeerSettings theirs, PeerSettings) override { ++settings_told, settings_theirs = theirs; }
};

/** Decode a captured frame's header (fails the test if it does not decode). */
inline Header header_of(const Bytes& f) {
  Header h{};
  std::span<const uint8_t> body;
  EXPECT_EQ(decode_header(f, false, &h, &body), Reject::kNone);
  return h;
}

/** @return the records of a captured data frame. */
inline std::vector<Record> records_of(const Bytes& f) {
  Header h = header_of(f);
  std::span<const uint8_t> body;
  decode_header(f, false, &h, &body);
  std::vector<Record> v;
  RecordReader rd(body, h.seq);
  Record r;
  while (rd.next(&r) == 1) v.push_back(r);
  return v;
}

/** Expect @p out to be a repair probe: the held frame of @p units units as it first went
 *  out (its header stale), then an ACK request with the fresh ACK state. */
inline void expect_probe(const std::deque<std::pair<NodeId, Bytes>>& out, size_t units) {
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(header_of(out.front().second).type, FrameType::kData);
  EXPECT_EQ(records_of(out.front().second).size(), units);
  EXPECT_EQ(header_of(out.back().second).type, FrameType::kAck);
  EXPECT_TRUE(header_of(out.back().second).flags & frame_flag::kAckReq);
}

/** Build a frame by hand, as a forging or lying sender would: header, SACK ranges, then
 *  @p body (records), sealed with a valid CRC. */
inline Bytes forge(const HeaderOut& h, const std::vector<std::pair<Seq, Seq>>& sacks = {},
                   const Bytes& body = {}) {
  Bytes f(sizeof(FrameHeader) + sacks.size() * sizeof(SackRange) + body.size());
  encode_header(h, f.data());
  for (size_t i = 0; i < sacks.size(); ++i)
    encode_sack(f.data(), static_cast<uint32_t>(i), sacks[i].first, sacks[i].second);
  set_sack_count(f.data(), static_cast<uint8_t>(sacks.size()));
  std::copy(body.begin(), body.end(), f.begin() + static_cast<ptrdiff_t>(f.size() - body.size()));
  finish_frame(f.data(), f.size(), true);
  return f;
}

/** Append one record (implicit seq) to a forged data frame's @p body. */
inline void add_record(Bytes& body, uint8_t flags, const Bytes& payload) {
  uint8_t hdr[kMaxRecordHeader];
  const size_t n = encode_record_header(hdr, flags, 0, false, payload.size());
  body.insert(body.end(), hdr, hdr + n);
  body.insert(body.end(), payload.begin(), payload.end());
}

inline Bytes msg(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

/** A small engine for node @p id: windows of 256 and 64 units, messages up to 64 KiB. */
inline Config small_config(NodeId id, uint64_t seed = 42) {
  Config c;
  c.node_id = id;
  c.seed = seed;
  c.send_window = 256;
  c.recv_window = 64;
  c.max_message_size = 64 * 1024;
  c.send_buffer_bytes = 256 * 1024;
  return c;
}

/** Two nodes, A (id 1) and B (id 2), with a test-controlled wire between them. */
class Pair : public ::testing::Test {
 protected:
  static Config base(NodeId id) { return small_config(id); }
  void make(Node& n, const Config& c) {
    ASSERT_EQ(Engine::create(c, &n, &n, &n.e), 0);
    ASSERT_EQ(n.e->add_peer(c.node_id == 1 ? 2 : 1, now), 0);
  }
  void SetUp() override {
    make(a, ca);
    make(b, cb);
  }
  /** Re-create both engines after a test changed ca / cb. */
  void remake() {
    for (Node* n : {&a, &b}) {
      n->e.reset();
      n->out.clear();
      n->got.clear();
    }
    make(a, ca);
    make(b, cb);
  }
  Node& other(Node& n) { return &n == &a ? b : a; }
  /** Hand every captured frame of @p from to its peer. @return frames moved. */
  size_t move(Node& from) {
    size_t n = 0;
    while (!from.out.empty()) {
      auto f = std::make_shared<Bytes>(std::move(from.out.front().second));
      from.out.pop_front();
      other(from).receiving = f;
      other(from).e->on_frame(*f, now);
      other(from).receiving.reset();
      ++n;
    }
    return n;
  }
  /** Exchange frames both ways until the wire is quiet. */
  void settle() {
    for (int i = 0; i < 1000 && (move(a) + move(b)) > 0; ++i) {
    }
  }
  /** Poll both at the current time, then settle. */
  void poll_settle() {
    a.e->poll(now);
    b.e->poll(now);
    settle();
  }
  /** Handshake A and B. */
  void connect() {
    poll_settle();
    ASSERT_EQ(a.e->state(2), PeerState::kEstablished);
    ASSERT_EQ(b.e->state(1), PeerState::kEstablished);
  }
  /** Handshake A and B with every HELLO_ACK lost (each is confirmed by the other's next
   *  HELLO): no RTT sample yet, the RTO is still rto_initial. */
  void connect_unmeasured() {
    auto up = [&] { return a.e->state(2) == PeerState::kEstablished && b.e->state(1) == PeerState::kEstablished; };
    auto move_but_hello_acks = [&](Node& n) {
      std::erase_if(n.out, [](const auto& f) { return header_of(f.second).type == FrameType::kHelloAck; });
      return move(n);
    };
    for (int i = 0; i < 100 && (i == 0 || !up()); ++i) {
      now = std::max(now, std::min(a.e->next_deadline(), b.e->next_deadline()));
      a.e->poll(now);
      b.e->poll(now);
      for (int k = 0; k < 100 && move_but_hello_acks(a) + move_but_hello_acks(b) > 0; ++k) {
      }
    }
    ASSERT_TRUE(up());
    a.e->poll(now);  // the answers to the last HELLOs are lost too
    b.e->poll(now);
    move_but_hello_acks(a);
    move_but_hello_acks(b);
    settle();
  }
  /** A sends @p n fast 8-byte messages; the first is lost, B receives the rest; then time
   *  moves on by A's NACK interval. B's answer (its NACK) waits in b.out. */
  void lose_first_of_fast(uint8_t n) {
    for (uint8_t i = 0; i < n; ++i) a.e->send(2, msg(8, i), send_flag::kFastpath, now);
    a.out.pop_front();
    move(a);
    now += ca.nack_interval_ns;
  }
  /** Advance time to the engines' next deadline (at most @p max_ns ahead) and poll. */
  void tick(uint64_t max_ns = ~uint64_t{0}) {
    uint64_t d = std::min(a.e->next_deadline(), b.e->next_deadline());
    const uint64_t cap = max_ns > ~uint64_t{0} - now ? ~uint64_t{0} : now + max_ns;
    now = std::max(now, std::min(d, cap));
    poll_settle();
  }

  Config ca = base(1), cb = base(2);
  Node a, b;
  uint64_t now = 1'000'000;
};

}  // namespace imago::rel::test
