// SPDX-License-Identifier: BSD-3-Clause
// Held frames on a real PMD: the engine's data frames go out as mbufs attached to their
// slots (no copy), repairs send the same slot again, and under loss, duplication, reordering
// and corruption every message arrives whole while every mbuf and slot is let go exactly once.
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

  ScopedPool pool_a{8191}, pool_b{8191};
  dp::RingPair ring;
  dp::Port port_a, port_b;
  End a, b;
};

TEST_F(HeldFrames, EveryMessageArrivesAndEveryMbufAndSlotIsLetGoOnceUnderEveryFault) {
  dp::FaultConfig bad;
  bad.drop = 0.1, bad.dup = 0.05, bad.reorder = 0.05, bad.corrupt = 0.02, bad.seed = 7;
  dp::FaultConfig acks;
  acks.drop = 0.1, acks.dup = 0.05, acks.seed = 8;
  const unsigned base_a = pool_a.in_use(), base_b = pool_b.in_use();
  open(a, ring.port_a, pool_a.get(), 1, bad);
  open(b, ring.port_b, pool_b.get(), 2, acks);
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
  // Expect: with the traffic drained, both pools are back where they started (a frame freed
  // twice would leave them below, one never freed above) ...
  ASSERT_TRUE(run([&] { return a.faulty.held() == 0 && b.faulty.held() == 0; }));
  for (int i = 0; i < 100; ++i) a.link.poll(rte_rdtsc()), b.link.poll(rte_rdtsc());
  a.engine.reset();
  b.engine.reset();
  EXPECT_EQ(pool_a.in_use(), base_a);
  EXPECT_EQ(pool_b.in_use(), base_b);
  // ... and the engines gave their slot memory back: no slot was still referenced.
  EXPECT_EQ(a.link.held_zones(), 0u);
  EXPECT_EQ(b.link.held_zones(), 0u);
}

}  // namespace
}  // namespace imago::test
