// SPDX-License-Identifier: BSD-3-Clause
// Held frames on a real PMD: the engine's data frames go out as mbufs attached to their
// slots (no copy), repairs send the same slot again, and under loss, duplication, reordering
// and corruption every message arrives whole while every mbuf and slot is let go exactly once.
// Messages by reference too: frames chained from the application's buffers, each buffer
// given back once, and never read again after (it is overwritten at once).
#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <memory>
#include <vector>

#include "dataplane/engine_link.h"
#include "dataplane/port.h"
#include "dataplane/ring_pair.h"
#include "reliability/engine.h"
#include "tests/eal/eal_env.h"
#include "tests/eal/patterned.h"

namespace imago::test {
namespace {

/** One node: a port seen through the fault layer, its link and engine, what it received. */
struct End final : rel::AppSink, Checker {
  dp::FaultyPort faulty;
  dp::EngineLink link;
  std::unique_ptr<rel::Engine> engine;

  bool deliver(rel::NodeId, std::span<const uint8_t> m) override { return check(m), true; }

  // The application's buffers for messages by reference: lent to the engine by index.
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<bool> lent;
  std::vector<size_t> free_bufs;
  uint64_t given_back = 0, wrong_back = 0;
  void ext_done(uint64_t cookie) override {
    if (cookie >= bufs.size() || !lent[cookie]) return (void)++wrong_back;
    lent[cookie] = false;
    std::fill(bufs[cookie].begin(), bufs[cookie].end(), 0xEE);  // a frame sent from it now arrives corrupt
    free_bufs.push_back(cookie);
    ++given_back;
  }
};

struct HeldFrames : testing::Test {
  void SetUp() override {
    ASSERT_EQ(dp::create_ring_pair(unique_name("held"), 1024, ring), 0);
    ASSERT_EQ(port_a.open(ring.port_a, dp::PortConfig{}, pool_a.get()), 0);
    ASSERT_EQ(port_b.open(ring.port_b, dp::PortConfig{}, pool_b.get()), 0);
    ASSERT_EQ(port_a.start(), 0);
    ASSERT_EQ(port_b.start(), 0);
  }
  void TearDown() override {
    for (End* e : {&a, &b}) {
      e->engine.reset();
      e->faulty.release();
    }
    port_a.close();
    port_b.close();
    dp::destroy_ring_pair(ring);
  }
  void open(End& e, uint16_t port, rte_mempool* pool, rel::NodeId id, const dp::FaultConfig& tx) {
    ASSERT_EQ(e.faulty.init(port, 0, tx, dp::FaultConfig{}, pool, 18, 1024), 0);
    ASSERT_EQ(e.link.init(e.faulty, pool, dp::EncapConfig{}, 32), 0);
    rel::Config c = rel::fast_link_preset();
    c.node_id = id;
    c.seed = id;
    c.send_buffer_bytes = 2u << 20;
    c.max_message_size = 64u << 10;
    ASSERT_EQ(rel::Engine::create(c, &e.link, &e, &e.engine), 0);
    e.link.attach(e.engine.get());
    ASSERT_EQ(e.link.add_peer_addr(3 - id, dp::MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}), 0);
    ASSERT_EQ(e.engine->add_peer(3 - id, e.link.now_ns(rte_rdtsc())), 0);
  }
  /** Poll both ends until @p done or 30 s. */
  template <typename Done>
  bool run(Done done) {
    const uint64_t end = rte_rdtsc() + 30 * rte_get_tsc_hz();
    while (!done()) {
      if (rte_rdtsc() > end) return false;
      a.link.poll(rte_rdtsc());
      b.link.poll(rte_rdtsc());
    }
    return true;
  }

  /** A and B on a link that drops, duplicates, reorders and corrupts A's frames and drops
   *  and duplicates B's (seeds @p seed, @p seed + 1), the session up. */
  void open_faulty(uint32_t seed) {
    dp::FaultConfig bad;
    bad.drop = 0.1, bad.dup = 0.05, bad.reorder = 0.05, bad.corrupt = 0.02, bad.seed = seed;
    dp::FaultConfig acks;
    acks.drop = 0.1, acks.dup = 0.05, acks.seed = seed + 1;
    base_a = pool_a.in_use(), base_b = pool_b.in_use();
    open(a, ring.port_a, pool_a.get(), 1, bad);
    open(b, ring.port_b, pool_b.get(), 2, acks);
  }
  /** Drain the links and end the engines; the pools must be back where they started (a
   *  frame freed twice would leave them below, one never freed above). */
  void close_and_count() {
    ASSERT_TRUE(run([&] { return a.faulty.held() == 0 && b.faulty.held() == 0; }));
    for (int i = 0; i < 100; ++i) a.link.poll(rte_rdtsc()), b.link.poll(rte_rdtsc());
    a.engine.reset();
    b.engine.reset();
    EXPECT_EQ(pool_a.in_use(), base_a);
    EXPECT_EQ(pool_b.in_use(), base_b);
  }

  ScopedPool pool_a{8191}, pool_b{8191};
  unsigned base_a = 0, base_b = 0;
  dp::RingPair ring;
  dp::Port port_a, port_b;
  End a, b;
};

TEST_F(HeldFrames, EveryMessageArrivesAndEveryMbufAndSlotIsLetGoOnceUnderEveryFault) {
  open_faulty(7);
  ASSERT_TRUE(run([&] { return a.engine->state(2) == rel::PeerState::kEstablished; }));
  // Do: 20,000 messages of 1 B to 4 KiB, A to B, through a lossy, duplicating, reordering,
  // corrupting link (and lossy ACKs back).
  constexpr uint64_t kMsgs = 20000;
  std::vector<uint8_t> buf(4096);
  uint64_t sent = 0;
  ASSERT_TRUE(run([&] {
    while (sent < kMsgs) {
      for (size_t i = 0; i < size_of(sent); ++i) buf[i] = byte_of(sent, i);
      if (a.engine->send(2, {buf.data(), size_of(sent)}, 0, a.link.now_ns(rte_rdtsc())) != 0) break;
      ++sent;
    }
    return b.next == kMsgs && a.engine->unconfirmed_messages(2) == 0;
  })) << a.engine->debug_state(2) << " | " << b.engine->debug_state(1);
  // Expect: every message whole and in order; frames went out from their slots, repairs too.
  EXPECT_EQ(b.bad, 0u);
  EXPECT_GT(a.link.counters().held_out, a.engine->counters(2)->pkts_sent / 2);
  EXPECT_GT(a.engine->counters(2)->msgs_retransmitted, 0u);
  EXPECT_GT(a.faulty.tx_stage().counters().model.corrupted, 0u);
  // Expect: with the traffic drained, both pools are back where they started ...
  close_and_count();
  // ... and the engines gave their slot memory back: no slot was still referenced.
  EXPECT_EQ(a.link.held_zones(), 0u);
  EXPECT_EQ(b.link.held_zones(), 0u);
}

TEST_F(HeldFrames, MessagesByReferenceGoOutFromTheirBuffersAndEachComesBackOnceUnderEveryFault) {
  open_faulty(11);
  a.link.force_chains(true);  // net_ring: B joins each chained frame it receives
  ASSERT_TRUE(a.link.chains());
  ASSERT_TRUE(run([&] { return a.engine->state(2) == rel::PeerState::kEstablished; }));
  a.bufs.assign(64, std::vector<uint8_t>(4096));
  a.lent.assign(64, false);
  for (size_t i = 0; i < 64; ++i) a.free_bufs.push_back(i);
  // Do: 20,000 messages of 1 B to 4 KiB from A's 64 buffers, through the faulty link; a
  // buffer goes back to the free list only when the engine gives it back.
  constexpr uint64_t kMsgs = 20000;
  uint64_t sent = 0, lent = 0;
  ASSERT_TRUE(run([&] {
    while (sent < kMsgs && !a.free_bufs.empty()) {
      const size_t k = a.free_bufs.back();
      uint8_t* m = a.bufs[k].data();
      for (size_t i = 0; i < size_of(sent); ++i) m[i] = byte_of(sent, i);
      const int rc = a.engine->send_ref(2, {m, size_of(sent)}, 0, a.link.now_ns(rte_rdtsc()), k);
      if (rc < 0) break;
      if (rc == 0) a.free_bufs.pop_back(), a.lent[k] = true, ++lent;  // else copied: still ours
      ++sent;
    }
    return b.next == kMsgs && a.engine->unconfirmed_messages(2) == 0;
  })) << a.engine->debug_state(2) << " | " << b.engine->debug_state(1);
  // Expect: every message whole and in order; large ones went by reference, chained, and
  // were resent from the same buffers; B joined the chains it got.
  EXPECT_EQ(b.bad, 0u);
  EXPECT_GT(lent, kMsgs / 2);
  EXPECT_EQ(a.engine->counters(2)->msgs_by_ref, lent);
  EXPECT_GT(a.link.counters().chained_out, lent);
  EXPECT_GT(b.link.counters().rx_linearized, 0u);
  EXPECT_GT(a.engine->counters(2)->msgs_retransmitted, 0u);
  // Expect: drained, every buffer came back exactly once, and the pools are as they were.
  close_and_count();
  EXPECT_EQ(a.wrong_back, 0u);
  EXPECT_EQ(a.given_back, lent);
  EXPECT_EQ(a.link.held_zones(), 0u);
}

}  // namespace
}  // namespace imago::test
