// SPDX-License-Identifier: BSD-3-Clause
// Run-to-completion (imago_attach_embedded with --run-to-completion): no engine lcore; the
// application's thread drives both nodes with imago_engine_poll() and everything still
// arrives, once, in order. A process of its own: EAL starts once per process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "api/imago.h"
#include "tests/api/pool_use.h"
#include "tests/api/rtc_stream.h"

namespace {

imago_t* g_im = nullptr;

// First, before any poll: the nodes added their peers at the attach, and an application
// that takes longer than --dead-after-ms (3 s) before its first imago_engine_poll() (it sets
// up, or waits for something else) must not find them dead: that time is not their silence.
TEST(RunToCompletion, TheFirstPollLongAfterTheAttachFindsNoPeerDead) {
  imago_ep_t *a = nullptr, *b = nullptr;
  imago_ep_opts oa{.local_node = 1, .ring_size = 0, .reserved = 0};
  imago_ep_opts ob{.local_node = 2, .ring_size = 0, .reserved = 0};
  ASSERT_EQ(imago_open(g_im, "first", 2, &oa, &a), 0);
  ASSERT_EQ(imago_open(g_im, "first", 1, &ob, &b), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  for (int polls = 0; polls < 1000000 && !(imago_peer_ready(a) == 1 && imago_peer_ready(b) == 1); ++polls)
    ASSERT_GE(imago_engine_poll(g_im), 0);
  for (unsigned i = 0; i < 2; ++i) {
    imago_node_stats st{};
    ASSERT_EQ(imago_node_stats_get(g_im, i, &st), 0);
    EXPECT_EQ(st.peer_deaths, 0u) << "node " << st.node;
    EXPECT_EQ(st.msgs_unconfirmed, 0u) << "node " << st.node;
  }
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

TEST(RunToCompletion, TheApplicationThreadDrivesTheNodes) {
  EXPECT_EQ(imago_engine_poll(nullptr), -EINVAL);
  imago_ep_t *a = nullptr, *b = nullptr;
  imago_ep_opts oa{.local_node = 1, .ring_size = 0, .reserved = 0};
  imago_ep_opts ob{.local_node = 2, .ring_size = 0, .reserved = 0};
  ASSERT_EQ(imago_open(g_im, "rtc", 2, &oa, &a), 0);
  ASSERT_EQ(imago_open(g_im, "rtc", 1, &ob, &b), 0);
  // Nothing moves by itself: the endpoints learn of each other only through our polls.
  int polls = 0;
  for (; polls < 1000000 && !(imago_peer_ready(a) == 1 && imago_peer_ready(b) == 1); ++polls)
    ASSERT_GE(imago_engine_poll(g_im), 0);
  ASSERT_EQ(imago_peer_ready(a), 1) << "after " << polls << " polls";
  // Do: 100000 numbered messages of 100 bytes a -> b, polling between bursts.
  constexpr uint32_t kMsgs = 100000;
  const uint32_t got = imago::test::rtc_stream(g_im, a, b, kMsgs, 100);
  // Expect: all delivered; closing (which polls by itself) neither hangs nor fails.
  EXPECT_EQ(got, kMsgs);
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

// imago_wait() in run-to-completion polls the engines while it waits (as imago_close()
// does): it waited out its whole timeout for a message nobody moved.
TEST(RunToCompletion, WaitPollsTheEnginesItself) {
  imago_ep_t *a = nullptr, *b = nullptr;
  ASSERT_TRUE(imago::test::rtc_open_pair(g_im, "rtcwait", &a, &b));
  ASSERT_EQ(imago_send(a, "ping", 4, IMAGO_FASTPATH), 0);
  // Do: wait for it without polling. Expect: it comes.
  ASSERT_EQ(imago_wait(b, 2'000'000), 1);
  imago_msg m{};
  ASSERT_EQ(imago_recv_burst(b, &m, 1), 1);
  EXPECT_EQ(m.len, 4u);
  EXPECT_EQ(std::memcmp(imago_msg_data(&m), "ping", 4), 0);
  EXPECT_EQ(imago_release(b, &m, 1), 0);
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

// A second thread polling while the first streams and polls (the tester's case: 11 of 11
// runs crashed, hung or delivered corrupt messages): the polls take turns, a call that finds
// the other inside returns -EBUSY, and every message arrives once, in order, intact.
TEST(RunToCompletion, TwoThreadsPollingAtOnceTakeTurns) {
  imago_ep_t *a = nullptr, *b = nullptr;
  ASSERT_TRUE(imago::test::rtc_open_pair(g_im, "rtc2poll", &a, &b));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> polls{0}, busy{0}, bad{0};
  std::thread other([&] {
    while (!stop.load()) {
      const int rc = imago_engine_poll(g_im);
      polls++, busy += rc == -EBUSY, bad += rc < 0 && rc != -EBUSY;
    }
  });
  constexpr uint32_t kMsgs = 50000;
  const uint32_t got = imago::test::rtc_stream(g_im, a, b, kMsgs, 1000);
  stop = true;
  other.join();
  EXPECT_EQ(got, kMsgs);
  EXPECT_EQ(bad.load(), 0u);
  std::printf("the other thread: %llu polls, %llu found the first polling\n",
              static_cast<unsigned long long>(polls.load()), static_cast<unsigned long long>(busy.load()));
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

// Receive @p count numbered messages of @p size bytes a -> b, moving the nodes only through
// imago_wait() (no imago_engine_poll() of its own). @return those received, once, in order.
uint32_t stream_by_waiting(imago_ep_t* a, imago_ep_t* b, uint32_t count, uint32_t size) {
  uint32_t sent = 0, got = 0;
  std::vector<uint8_t> buf(size, 0);
  for (int round = 0; got < count && round < 10000000; ++round) {
    for (; sent < count; ++sent) {
      std::memcpy(buf.data(), &sent, sizeof sent);
      if (imago_send(a, buf.data(), size, 0) != 0) break;
    }
    if (imago_wait(b, 1000) < 0) return got;
    imago_msg m[32];
    const int n = imago_recv_burst(b, m, 32);
    for (int i = 0; i < n; ++i, ++got) {
      uint32_t seq;
      std::memcpy(&seq, imago_msg_data(&m[i]), sizeof seq);
      if (seq != got || m[i].len != size) return got;
    }
    if (n > 0) imago_release(b, m, static_cast<unsigned>(n));
  }
  return got;
}

// Two threads, each on endpoints of its own, each waiting in imago_wait() (which polls in
// run-to-completion): documented use, which crashed or stalled in 6 of 6 of the tester's runs.
TEST(RunToCompletion, TwoThreadsEachWaitingOnTheirOwnEndpointsBothComplete) {
  constexpr uint32_t kMsgs = 50000;
  uint32_t got[2] = {0, 0};
  std::thread t[2];
  for (int k = 0; k < 2; ++k)
    t[k] = std::thread([&got, k] {
      imago_ep_t *a = nullptr, *b = nullptr;
      if (!imago::test::rtc_open_pair(g_im, k ? "rtcwait1" : "rtcwait0", &a, &b)) return;
      got[k] = stream_by_waiting(a, b, kMsgs, 200 + 300 * k);
      imago_close(a);
      imago_close(b);
    });
  for (std::thread& th : t) th.join();
  EXPECT_EQ(got[0], kMsgs);
  EXPECT_EQ(got[1], kMsgs);
}

// The return ring of the endpoint opened as @p name towards @p peer.
rte_ring* return_ring(const char* name, uint64_t peer) {
  for (const imago::api::EndpointSlot& s : imago::test::shm()->slots)
    if (s.state.load() == imago::api::SlotState::kOpen && std::strcmp(s.name, name) == 0 && s.peer == peer) return s.ret;
  return nullptr;
}

// Receive @p n messages of 1000 bytes on @p b (zero-copy in their frames), polling.
std::vector<imago_msg> receive_framed(imago_ep_t* b, unsigned n) {
  std::vector<imago_msg> got;
  for (int polls = 0; polls < 1000000 && got.size() < n; ++polls) {
    imago_engine_poll(g_im);
    imago_msg m[8];
    const int k = imago_recv_burst(b, m, 8);
    for (int i = 0; i < k; ++i) got.push_back(m[i]);
  }
  return got;
}

TEST(RunToCompletion, ReleasedFramesAreFreedByTheEngineOrByTheClose) {
  using imago::test::pool_use;
  imago_ep_t *a = nullptr, *b = nullptr;
  imago_ep_opts oa{.local_node = 1, .ring_size = 0, .reserved = 0};
  imago_ep_opts ob{.local_node = 2, .ring_size = 0, .reserved = 0};
  ASSERT_EQ(imago_open(g_im, "frames", 2, &oa, &a), 0);
  ASSERT_EQ(imago_open(g_im, "frames", 1, &ob, &b), 0);
  for (int polls = 0; polls < 1000000 && !(imago_peer_ready(a) == 1 && imago_peer_ready(b) == 1); ++polls)
    imago_engine_poll(g_im);
  for (int i = 0; i < 1000; ++i) imago_engine_poll(g_im);  // the announcements settle
  const unsigned base = pool_use().mbuf;
  rte_ring* ret = return_ring("frames", 1);
  ASSERT_NE(ret, nullptr);
  std::vector<uint8_t> msg(1000, 0x5a);
  for (int round = 0; round < 2; ++round) {
    // Do: ten messages received in their frames, released with no poll after.
    for (int i = 0; i < 10; ++i) ASSERT_EQ(imago_send(a, msg.data(), 1000, IMAGO_FASTPATH), 0);
    std::vector<imago_msg> got = receive_framed(b, 10);
    ASSERT_EQ(got.size(), 10u);
    for (const imago_msg& m : got) EXPECT_EQ(m.tier, IMAGO_TIER_MBUF);
    EXPECT_EQ(imago_release(b, got.data(), 10), 0);
    // Expect: the mbufs wait on the endpoint's return ring for the engine, not freed here.
    EXPECT_EQ(rte_ring_count(ret), 10u);
    if (round == 0) {
      imago_engine_poll(g_im);  // the engine frees them (into its cache)
      EXPECT_EQ(rte_ring_count(ret), 0u);
    }
  }
  // Do: close with ten still on the return ring. Expect: the close frees them too.
  EXPECT_EQ(imago_close(b), 0);
  EXPECT_EQ(imago_close(a), 0);
  for (int i = 0; i < 1000; ++i) imago_engine_poll(g_im);
  EXPECT_EQ(pool_use().mbuf, base) << "an mbuf released through the return ring was never freed";
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  char prog[] = "rtc_test", pair[] = "--pair", rtc[] = "--run-to-completion";
  char* args[] = {prog, pair, rtc, nullptr};
  if (int rc = imago_attach_embedded(3, args, &g_im); rc != 0) {
    std::fprintf(stderr, "imago_attach_embedded: %d\n", rc);
    return 1;
  }
  int rc = RUN_ALL_TESTS();
  imago_detach(g_im);
  return rc;
}
