// SPDX-License-Identifier: BSD-3-Clause
// The stats board: what an engine's lcore publishes, a reader on another thread copies whole.
#include <gtest/gtest.h>

#include <rte_cycles.h>
#include <rte_pause.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "dataplane/stats_board.h"

namespace imago::dp {
namespace {

struct Drop final : rel::FrameSink, rel::AppSink {
  bool send_frame(rel::NodeId, std::span<const uint8_t>) override { return true; }
  bool deliver(rel::NodeId, std::span<const uint8_t>) override { return true; }
};

std::unique_ptr<rel::Engine> engine_with_peers(Drop& d, unsigned peers) {
  rel::Config c = rel::fast_link_preset();
  c.node_id = 1;
  std::unique_ptr<rel::Engine> e;
  EXPECT_EQ(rel::Engine::create(c, &d, &d, &e), 0);
  for (unsigned p = 0; p < peers; ++p) EXPECT_EQ(e->add_peer(2 + p, 0), 0);
  return e;
}

TEST(StatsBoard, ReadsWhatWasPublishedAndNeverATornCopy) {
  Drop d;
  auto e = engine_with_peers(d, 3);
  StatsBoard board;
  NodeSnapshot snap;
  ASSERT_TRUE(board.read(&snap));
  EXPECT_EQ(snap.published_tsc, 0u);  // never published
  EngineLinkCounters five{};
  five.frames_in = five.frames_out = 5;
  board.publish(1, *e, five, 5);
  ASSERT_TRUE(board.read(&snap));
  EXPECT_EQ(snap.node_id, 1u);
  EXPECT_EQ(snap.published_tsc, 5u);
  ASSERT_EQ(snap.n_peers, 3u);
  EXPECT_EQ(snap.peers[2].view.id, 4u);
  EXPECT_EQ(snap.peers[0].view.state, rel::PeerState::kConnecting);
  // Do: a writer publishes again and again, a link counter and the stamp moving together,
  // while this thread reads. It pauses a few microseconds between copies (a node publishes
  // once a millisecond): back to back, a reader as slow as ASan makes it may never find a
  // quiet moment on a loaded machine, and that says nothing of the board.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    EngineLinkCounters link{};
    for (uint64_t i = 1; !stop.load(std::memory_order_relaxed); ++i) {
      link.frames_in = link.frames_out = i;
      board.publish(1, *e, link, i);
      const uint64_t until = rte_rdtsc() + rte_get_tsc_hz() / 200000;  // 5 us
      while (rte_rdtsc() < until) rte_pause();
    }
  });
  // Expect: every copy read is whole: its stamp and both counters agree.
  unsigned whole = 0, torn = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int i = 0; i < 20000 || (whole < 100 && std::chrono::steady_clock::now() < end); ++i) {
    if (!board.read(&snap)) {
      ++torn;
      continue;
    }
    ASSERT_EQ(snap.link.frames_in, snap.published_tsc);
    ASSERT_EQ(snap.link.frames_out, snap.published_tsc);
    ++whole;
  }
  stop = true;
  writer.join();
  EXPECT_GT(whole, 0u) << torn << " reads found the writer busy";
}

TEST(StatsBoard, NamesEveryGroupCounterWithItsValue) {
  // Do: a snapshot whose group counters are each a different value.
  NodeSnapshot snap{};
  auto* g = reinterpret_cast<uint64_t*>(&snap.group);
  constexpr size_t n = sizeof(rel::GroupCounters) / sizeof(uint64_t);
  for (size_t i = 0; i < n; ++i) g[i] = 100 + i;
  snap.group.dup_received = 6000, snap.group.parity_bad = 322;
  // Expect: every one of them named once, "group_<name>", with its value (what telemetry's
  // /imago/node and imagod's counters line print).
  std::map<std::string, uint64_t> got;
  for_each_group_counter(snap, [&](const char* k, uint64_t v) { EXPECT_TRUE(got.emplace(k, v).second) << k; });
  EXPECT_EQ(got.size(), n);
  EXPECT_EQ(got["group_dup_received"], 6000u);
  EXPECT_EQ(got["group_parity_bad"], 322u);
  EXPECT_EQ(got["group_overflow"], snap.group.overflow);
  EXPECT_EQ(got["group_streams_full"], snap.group.streams_full);
  std::set<uint64_t> values;
  for (const auto& [k, v] : got) values.insert(v);
  EXPECT_EQ(values.size(), n) << "a counter named twice, or one not at all";
}

}  // namespace
}  // namespace imago::dp
