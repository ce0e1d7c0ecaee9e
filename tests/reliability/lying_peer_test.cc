// SPDX-License-Identifier: BSD-3-Clause
// Lying peers: a peer that speaks the protocol, passes every session check, and lies. The
// victim engine (node 2) streams with a legitimate peer (node 1) while a liar (node 3, frames
// written by hand with the codec) ACKs data never sent, SACKs outside the window, NACKs long
// gone sequences, sends fragments without end, advertises absurd credits, replays epochs and
// tokens, and floods handshakes from many node ids. Each lie must be counted, must leave the
// victim's memory as it was, and must not disturb the legitimate stream.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "reliability/engine.h"
#include "tests/reliability/harness.h"

namespace imago::rel::test {
namespace {

constexpr NodeId kLegit = 1, kVictim = 2, kLiar = 3;
constexpr uint32_t kLiarEpoch = 7;
constexpr uint64_t kLiarToken = 0x11A2'0000'0000'0001ull;
constexpr Seq kLiarIsn = 5000;

/** A node that records who each message came from. */
struct Victim : Node {
  std::vector<std::pair<NodeId, Bytes>> from;
  bool deliver(NodeId peer, std::span<const uint8_t> m) override {
    from.emplace_back(peer, Bytes(m.begin(), m.end()));
    return true;
  }
};

class LyingPeerTest : public ::testing::Test {
 protected:
  static Config base(NodeId id) { return small_config(id, 42 + id); }

  void SetUp() override {
    ASSERT_EQ(Engine::create(base(kVictim), &v, &v, &v.e), 0);
    ASSERT_EQ(Engine::create(base(kLegit), &l, &l, &l.e), 0);
    ASSERT_EQ(v.e->add_peer(kLegit, now), 0);
    ASSERT_EQ(v.e->add_peer(kLiar, now), 0);
    ASSERT_EQ(l.e->add_peer(kVictim, now), 0);
    poll_pump();
    ASSERT_EQ(v.e->state(kLegit), PeerState::kEstablished);
    handshake_liar();
    ASSERT_EQ(v.e->state(kLiar), PeerState::kEstablished);
    memory = v.e->memory_bytes();
  }

  // The liar's handshake is honest: learn the victim's token and ISN, then echo them.
  void handshake_liar() {
    v.e->on_frame(forge({FrameType::kHello, 0, kLiar, kVictim, kLiarEpoch, kLiarToken, 0,
                         kLiarIsn, 0, 0}),
                  now);
    pump();
    ASSERT_FALSE(to_liar.empty());
    const Header h = header_of(to_liar.back());
    v_token = h.src_token;
    v_isn = h.seq;
    lie(forge(from_liar(FrameType::kHelloAck, kLiarIsn, v_isn, 0)));
  }

  /** Header fields of a frame from the liar, its session checks all passing. */
  HeaderOut from_liar(FrameType t, Seq seq, Seq ack, uint32_t credit = kCreditUnlimited,
                      uint8_t flags = 0) const {
    return {t, flags, kLiar, kVictim, kLiarEpoch, kLiarToken, v_token, seq, ack, credit};
  }

  /** Move frames until the wire is quiet: victim <-> legit peer; the liar's mail is kept. */
  void pump() {
    for (int i = 0; i < 1000; ++i) {
      bool moved = false;
      while (!v.out.empty()) {
        auto [peer, f] = std::move(v.out.front());
        v.out.pop_front();
        if (peer == kLegit) l.e->on_frame(f, now);
        if (peer == kLiar) to_liar.push_back(std::move(f));
        moved = true;
      }
      while (!l.out.empty()) {
        Bytes f = std::move(l.out.front().second);
        l.out.pop_front();
        v.e->on_frame(f, now);
        moved = true;
      }
      if (!moved) return;
    }
  }
  void poll_pump() {
    v.e->poll(now);
    l.e->poll(now);
    pump();
  }
  void lie(const Bytes& f) {
    v.e->on_frame(f, now);
    pump();
  }

  /** The legitimate peer sends @p n more messages, interleaved with whatever the test does. */
  void legit(int n) {
    for (int i = 0; i < n; ++i, ++legit_sent)
      ASSERT_EQ(l.e->send(kVictim, msg(20 + legit_sent % 50, uint8_t(legit_sent)), 0, now), 0);
    now += 100 * kUs;
    poll_pump();
  }

  /** Run the clock until the legitimate stream is delivered; check it is whole and in order,
   *  that the victim's memory did not grow, and that the only frames the victim rejected
   *  under the legitimate peer's id are @p claims forged restart claims. */
  void expect_legit_stream_intact(uint64_t claims = 0) {
    for (int i = 0; i < 2000 && delivered_from(kLegit).size() < legit_sent; ++i) {
      now += 1 * kMs;
      poll_pump();
    }
    const std::vector<Bytes> got = delivered_from(kLegit);
    ASSERT_EQ(got.size(), legit_sent);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], msg(20 + i % 50, uint8_t(i))) << i;
    EXPECT_EQ(v.e->state(kLegit), PeerState::kEstablished);
    const PeerCounters& c = *v.e->counters(kLegit);
    EXPECT_EQ(c.reject[static_cast<size_t>(Reject::kUnprovenRestart)], claims);
    EXPECT_EQ(c.rejects(), claims);
    EXPECT_EQ(v.resets + v.deaths + l.resets + l.deaths, 0);
    EXPECT_EQ(v.e->memory_bytes(), memory);
  }

  std::vector<Bytes> delivered_from(NodeId peer) const {
    std::vector<Bytes> out;
    for (const auto& [p, m] : v.from)
      if (p == peer) out.push_back(m);
    return out;
  }
  uint64_t liar_rejects(Reject r) const {
    return v.e->counters(kLiar)->reject[static_cast<size_t>(r)];
  }
  /** Units the victim sent the liar in data frames since the last call (and forget them). */
  size_t units_to_liar() {
    size_t n = 0;
    for (const Bytes& f : to_liar)
      if (header_of(f).type == FrameType::kData) n += records_of(f).size();
    to_liar.clear();
    return n;
  }
  /** The victim sends the liar @p n messages (the liar receives them, and may ACK them). */
  void victim_sends_liar(int n) {
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(v.e->send(kLiar, msg(10, uint8_t(i)), send_flag::kFastpath, now), 0);
    pump();
  }

  Victim v;
  Node l;
  std::vector<Bytes> to_liar;  ///< frames the victim sent the liar
  uint64_t v_token = 0;
  Seq v_isn = 0;
  size_t legit_sent = 0;
  size_t memory = 0;
  uint64_t now = 1'000'000;
};

TEST_F(LyingPeerTest, AckForDataNeverSentIsCountedAndIgnored) {
  legit(20);
  victim_sends_liar(2);
  units_to_liar();
  // Do: the liar ACKs 100 units beyond what the victim ever sent it.
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 102)));
  legit(20);
  // Expect: counted; the two messages are still unconfirmed (nothing was released).
  EXPECT_EQ(liar_rejects(Reject::kBadAck), 1u);
  EXPECT_EQ(v.e->unconfirmed_messages(kLiar), 2u);
  expect_legit_stream_intact();
}

TEST_F(LyingPeerTest, SackRangesOutsideTheWindowAreCountedAndMarkNothing) {
  victim_sends_liar(4);
  units_to_liar();
  const Seq nxt = v_isn + 4;
  // Do: SACK ranges beyond what was sent, reversed, and below the cumulative ACK.
  const std::vector<std::vector<std::pair<Seq, Seq>>> lies = {
      {{nxt + 1, nxt + 10}},
      {{v_isn + 3, v_isn + 2}},
      {{v_isn - 10, v_isn}},
      {{v_isn + 1, nxt + 1}}};
  for (const auto& sacks : lies) {
    lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn), sacks));
    legit(5);
  }
  // Expect: every frame counted; nothing marked received: all 4 still unconfirmed, and the
  // RTO resends the oldest as usual.
  EXPECT_EQ(liar_rejects(Reject::kBadSack), lies.size());
  EXPECT_EQ(v.e->unconfirmed_messages(kLiar), 4u);
  now += 200 * kMs;
  poll_pump();
  EXPECT_GE(units_to_liar(), 1u);
  expect_legit_stream_intact();
}

TEST_F(LyingPeerTest, SackBitmapsClaimingUnitsNeverSentAreCountedAndMarkNothing) {
  victim_sends_liar(4);
  units_to_liar();
  const Seq base = v_isn & ~Seq{63}, nxt = v_isn + 4;
  // A bitmap word travels where a range would: as (high 32 bits, low 32 bits).
  auto words = [&](std::initializer_list<Seq> units) {
    std::vector<std::pair<Seq, Seq>> w(3, {0, 0});
    for (Seq u : units) {
      const uint64_t bit = uint64_t{1} << ((u - base) % 64);
      auto& [hi, lo] = w[(u - base) / 64];
      hi |= static_cast<Seq>(bit >> 32);
      lo |= static_cast<Seq>(bit);
    }
    return w;
  };
  const uint8_t bitmap = frame_flag::kSackBitmap;
  // Do: bits for the next unit to send, and for one two words on; then one for a unit below
  // the ACK, which says nothing (not a lie) and marks nothing.
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn, kCreditUnlimited, bitmap), words({nxt})));
  legit(5);
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn, kCreditUnlimited, bitmap),
            words({v_isn + 1, base + 130})));
  legit(5);
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 1, kCreditUnlimited, bitmap),
            words({v_isn})));
  legit(5);
  // Expect: the two lies counted; the honest ACK confirmed one message and the rest wait.
  EXPECT_EQ(liar_rejects(Reject::kBadSack), 2u);
  EXPECT_EQ(v.e->unconfirmed_messages(kLiar), 3u);
  expect_legit_stream_intact();
}

TEST_F(LyingPeerTest, AckAndSackExactlyHalfTheSequenceSpaceAwayAreLiesNotAdvances) {
  // Found by the engine fuzzer: at 2^31 apart serial comparison says neither "before" nor
  // "after", so an ACK of una + 2^31 passed the window check and released 2^31 units (a loop
  // of minutes on the engine lcore), and a SACK range ending there marked as many.
  victim_sends_liar(2);
  units_to_liar();
  // Do: ACK una + 2^31; then SACK up to una + 2^31; then with nothing in flight at all.
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 0x80000000u)));
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn), {{v_isn + 1, v_isn + 0x80000000u}}));
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 2)));  // honest: both confirmed
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 2 + 0x80000000u)));
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 2), {{v_isn + 3, v_isn + 2 + 0x80000000u}}));
  legit(10);
  // Expect: both ACKs and both SACKs counted as lies; the honest ACK confirmed both messages.
  EXPECT_EQ(liar_rejects(Reject::kBadAck), 2u);
  EXPECT_EQ(liar_rejects(Reject::kBadSack), 2u);
  EXPECT_EQ(v.e->unconfirmed_messages(kLiar), 0u);
  EXPECT_EQ(v.e->state(kLiar), PeerState::kEstablished);
  expect_legit_stream_intact();
}

TEST_F(LyingPeerTest, NacksForLongGoneSequencesRepairNothing) {
  victim_sends_liar(3);
  // Do: the liar honestly ACKs all three, then NACKs sequences long acknowledged.
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 3)));
  ASSERT_EQ(v.e->unconfirmed_messages(kLiar), 0u);
  units_to_liar();
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 1, kCreditUnlimited, frame_flag::kNack)));
  lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn + 3 - (1u << 30) - 10, kCreditUnlimited,
                      frame_flag::kNack)));
  legit(20);
  // Expect: nothing resent, no NACK taken; the one no honest peer could send is counted.
  EXPECT_EQ(units_to_liar(), 0u);
  EXPECT_EQ(v.e->counters(kLiar)->valid_nacks, 0u);
  EXPECT_EQ(v.e->counters(kLiar)->msgs_retransmitted, 0u);
  EXPECT_EQ(liar_rejects(Reject::kBadAck), 1u);
  expect_legit_stream_intact();
}

TEST_F(LyingPeerTest, FragmentsWithoutEndAreBoundedAndCounted) {
  const uint32_t cap = unit_capacity(base(kVictim));
  Seq s = kLiarIsn;
  auto fragment = [&](uint8_t flags, size_t len) {
    Bytes body;
    add_record(body, flags, Bytes(len, 0xEE));
    lie(forge(from_liar(FrameType::kData, s++, v_isn), {}, body));
  };
  // Do: a first fragment, then continuations for twice max_message_size, interleaved with
  // the legitimate stream.
  fragment(rec_flag::kMore, cap);
  for (uint64_t sent = cap; sent < 2 * base(kVictim).max_message_size; sent += cap) {
    fragment(rec_flag::kMore | rec_flag::kCont, cap);
    if (s % 8 == 0) legit(1);
  }
  // Expect: the oversize message is dropped once, counted; nothing delivered from the liar.
  EXPECT_EQ(liar_rejects(Reject::kTooLarge), 1u);
  EXPECT_TRUE(delivered_from(kLiar).empty());
  // Do: it ends; then a continuation with nothing to continue; then a record above the
  // unit size; then an honest message.
  fragment(rec_flag::kCont, 10);
  fragment(rec_flag::kCont, 10);
  Bytes big;
  add_record(big, 0, Bytes(cap + 1, 0xEE));
  lie(forge(from_liar(FrameType::kData, s, v_isn), {}, big));
  fragment(0, 10);
  // Expect: each counted; the honest message is delivered; memory is what it was.
  EXPECT_EQ(liar_rejects(Reject::kBadFragment), 1u);
  EXPECT_EQ(liar_rejects(Reject::kBadRecord), 1u);
  EXPECT_EQ(delivered_from(kLiar).size(), 1u);
  expect_legit_stream_intact();
}

TEST_F(LyingPeerTest, AbsurdCreditsAreCountedAndIgnored) {
  legit(10);
  // Do: credits no receive window can have: 2^31, 2^32 - 2, 2^30 + 1.
  for (uint32_t credit : {0x8000'0000u, 0xFFFF'FFFEu, (1u << 30) + 1})
    lie(forge(from_liar(FrameType::kAck, kLiarIsn, v_isn, credit)));
  // Expect: counted, and the victim still sends the liar what it queues (no wrapped limit
  // stalled it); the legitimate stream is untouched.
  EXPECT_EQ(liar_rejects(Reject::kBadCredit), 3u);
  units_to_liar();
  victim_sends_liar(3);
  EXPECT_EQ(units_to_liar(), 3u);
  EXPECT_EQ(v.e->counters(kLiar)->credit_stalls, 0u);
  expect_legit_stream_intact();
}

TEST_F(LyingPeerTest, ReplayedEpochsAndTokensAreCountedAndChangeNothing) {
  legit(10);
  // Do: the liar replays its own handshake, claims its token under other epochs, and
  // replays a data frame under an older epoch and under another token.
  to_liar.clear();
  lie(forge({FrameType::kHello, 0, kLiar, kVictim, kLiarEpoch, kLiarToken, 0, kLiarIsn, 0, 0}));
  for (uint32_t e : {kLiarEpoch - 1, kLiarEpoch + 1})
    lie(forge({FrameType::kHello, 0, kLiar, kVictim, e, kLiarToken, v_token, kLiarIsn, v_isn, 0}));
  Bytes body;
  add_record(body, 0, msg(12, 1));
  lie(forge({FrameType::kData, 0, kLiar, kVictim, kLiarEpoch - 1, kLiarToken, v_token, kLiarIsn,
             v_isn, kCreditUnlimited},
            {}, body));
  lie(forge({FrameType::kData, 0, kLiar, kVictim, kLiarEpoch, kLiarToken + 1, v_token, kLiarIsn,
             v_isn, kCreditUnlimited},
            {}, body));
  // Do: a replayed HELLO of an old incarnation of the legitimate peer (another token).
  lie(forge({FrameType::kHello, 0, kLegit, kVictim, 1, 0xD0D0, 0, 77, 0, 0}));
  legit(10);
  // Expect: the same-identity HELLO is just answered; every other lie is counted; nothing
  // reset, nothing delivered from the liar.
  EXPECT_EQ(liar_rejects(Reject::kUnprovenRestart), 2u);
  EXPECT_EQ(liar_rejects(Reject::kStaleEpoch), 1u);
  EXPECT_EQ(liar_rejects(Reject::kWrongToken), 1u);
  // Expect: the challenge for the old incarnation went to node 1, which dropped it.
  EXPECT_EQ(l.e->total_counters().reject[static_cast<size_t>(Reject::kWrongToken)], 1u);
  EXPECT_TRUE(delivered_from(kLiar).empty());
  EXPECT_EQ(v.e->state(kLiar), PeerState::kEstablished);
  expect_legit_stream_intact(1);
}

TEST_F(LyingPeerTest, HandshakeFloodFromManyClaimedNodeIdsHoldsNoState) {
  Rng r(9);
  uint64_t unknown = 0, claims = 0, legit_claims = 0;
  const uint64_t challenges_before = v.e->total_counters().challenges_sent;
  // Do: 20000 HELLOs from node ids never added, and from the two real peers' ids with
  // random epochs and tokens, while the legitimate stream runs (100 us apart).
  for (int i = 0; i < 20000; ++i) {
    const bool known_id = i % 4 == 0;
    const NodeId src = known_id ? (i % 8 == 0 ? kLegit : kLiar) : 4 + static_cast<NodeId>(i);
    const auto epoch = static_cast<uint32_t>(r.next());
    v.e->on_frame(forge({FrameType::kHello, 0, src, kVictim, epoch, r.next() | 1, 0, 1, 0, 0}),
                  now);
    known_id ? ++claims : ++unknown;
    if (src == kLegit) ++legit_claims;
    if (i % 10 == 0) legit(1);  // moves the clock 100 us
  }
  // Expect: unknown ids counted without a trace, claims counted, challenges rate-limited
  // (the flood lasted 200 ms: at most one per challenge_interval_ns per peer).
  const PeerCounters t = v.e->total_counters();
  EXPECT_EQ(t.reject[static_cast<size_t>(Reject::kUnknownPeer)], unknown);
  EXPECT_EQ(t.reject[static_cast<size_t>(Reject::kUnprovenRestart)], claims);
  const uint64_t per_peer = 200 * kMs / base(kVictim).challenge_interval_ns + 1;
  EXPECT_LE(t.challenges_sent - challenges_before, 2 * per_peer);
  EXPECT_EQ(v.e->state(kLiar), PeerState::kEstablished);
  expect_legit_stream_intact(legit_claims);
}

}  // namespace
}  // namespace imago::rel::test
