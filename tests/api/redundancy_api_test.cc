// SPDX-License-Identifier: BSD-3-Clause
// A library node on two networks (--redundancy MODE; with --pair a second crossed ring pair is
// network B), driven run-to-completion: every message arrives once, in order, and
// imago_node_stats shows how the mode used the two networks. A process per mode (argv[1]):
// EAL starts once per process. With "events" after the mode, the process runs the network
// events test instead, on links that delay every frame by 600 ms.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>

#include "api/imago.h"
#include "tests/api/rtc_stream.h"

namespace {

imago_t* g_im = nullptr;
std::string g_mode;

timespec now() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

double elapsed_ms(const timespec& t0) {
  const timespec t = now();
  return static_cast<double>(t.tv_sec - t0.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec - t0.tv_nsec) / 1e6;
}

imago_node_stats stats(unsigned index) {
  imago_node_stats st{};
  for (int tries = 0; tries < 100 && imago_node_stats_get(g_im, index, &st) == -EAGAIN; ++tries) {
  }
  return st;
}

TEST(Redundancy, EveryMessageOnceInOrderAndTheNetworksUsedAsTheModeSays) {
  imago_ep_t *a = nullptr, *b = nullptr;
  ASSERT_TRUE(imago::test::rtc_open_pair(g_im, "red", &a, &b));
  constexpr uint32_t kMsgs = 50000;
  const uint32_t got = imago::test::rtc_stream(g_im, a, b, kMsgs, 200, 16);
  EXPECT_EQ(got, kMsgs);
  for (int i = 0; i < 20000; ++i) imago_engine_poll(g_im);  // the board publishes every ms
  const imago_node_stats tx = stats(0), rx = stats(1);
  std::printf("%s: node 1 sent A %llu B %llu; node 2 received A %llu B %llu, duplicates dropped %llu, "
              "states A %u B %u\n", g_mode.c_str(), (unsigned long long)tx.net_frames_sent[0],
              (unsigned long long)tx.net_frames_sent[1], (unsigned long long)rx.net_frames_received[0],
              (unsigned long long)rx.net_frames_received[1], (unsigned long long)rx.net_duplicates_dropped,
              rx.net_state[0], rx.net_state[1]);
  EXPECT_NE(rx.net_state[0], static_cast<uint32_t>(IMAGO_NET_DOWN));
  EXPECT_NE(rx.net_state[1], static_cast<uint32_t>(IMAGO_NET_DOWN));
  if (g_mode == "duplicate") {
    EXPECT_EQ(tx.net_mode, static_cast<uint32_t>(IMAGO_NET_DUPLICATE));
    EXPECT_GT(rx.net_frames_received[0] + rx.net_frames_received[1], 0u);
    EXPECT_GE(rx.net_duplicates_dropped + 100, tx.net_frames_sent[0]) << "each frame's second copy dropped";
  } else if (g_mode == "active-standby") {
    EXPECT_EQ(tx.net_mode, static_cast<uint32_t>(IMAGO_NET_ACTIVE_STANDBY));
    EXPECT_GT(tx.net_frames_sent[0], 0u);
    // The standby network carries heartbeats only, and the few answers sent after a silence
    // (on both), unless A failed (a slow machine's spurious timeouts count as failures too):
    // then a fail-over was counted.
    EXPECT_TRUE(tx.net_frames_sent[1] <= 10 || tx.net_failovers[0] > 0) << tx.net_frames_sent[1];
  } else {
    EXPECT_EQ(tx.net_mode, static_cast<uint32_t>(IMAGO_NET_PING_PONG));
    const double a_share = static_cast<double>(tx.net_frames_sent[0]) /
                           static_cast<double>(tx.net_frames_sent[0] + tx.net_frames_sent[1]);
    EXPECT_NEAR(a_share, 0.5, 0.25) << "frames alternate (in runs; a failure may move some)";
    EXPECT_LT(rx.net_duplicates_dropped, tx.net_frames_sent[0] / 10);
  }
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

// An endpoint opened with IMAGO_EP_NET_EVENTS hears its node's networks change toward its
// peer, in its rx ring; one without does not. Every frame is delayed 600 ms (--fault-rx):
// each node finds the other silent on both networks for more than two heartbeats (100 ms
// apart here) before it hears anything (suspect: silent on both, the silence is the peer's,
// docs/PROTOCOL.md 3.9.3), then hears it (up).
TEST(Redundancy, AnEndpointThatAsksHearsTheNetworksGoDownAndComeBack) {
  imago_ep_t *a = nullptr, *b = nullptr;
  imago_ep_opts bad{.local_node = 1, .ring_size = 0, .flags = 0x80};
  EXPECT_EQ(imago_open(g_im, "ev", 2, &bad, &a), -EINVAL) << "an unknown flag";
  imago_ep_opts oa{.local_node = 1, .ring_size = 0, .flags = IMAGO_EP_NET_EVENTS};
  imago_ep_opts ob{.local_node = 2, .ring_size = 0, .flags = 0};
  ASSERT_EQ(imago_open(g_im, "ev", 2, &oa, &a), 0);
  ASSERT_EQ(imago_open(g_im, "ev", 1, &ob, &b), 0);
  int down[2] = {}, up[2] = {};  // down: not up (suspect or down)
  for (timespec t0 = now(); elapsed_ms(t0) < 10000 && !(up[0] && up[1]);) {
    imago_engine_poll(g_im);
    imago_msg m[32];
    const int n = imago_recv_burst(a, m, 32);
    ASSERT_GE(n, 0);
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(m[i].flags & IMAGO_MSG_F_EVENT) << "a sent nothing: only events arrive";
      ASSERT_EQ(m[i].len, sizeof(imago_net_event));
      imago_net_event ev;
      std::memcpy(&ev, imago_msg_data(&m[i]), sizeof ev);
      EXPECT_EQ(ev.peer, 2u);
      EXPECT_EQ(m[i].src, 2u);
      ASSERT_LT(ev.net, 2u);
      if (ev.kind == IMAGO_NET_EV_STATE && ev.state != IMAGO_NET_UP) ++down[ev.net];
      if (ev.kind == IMAGO_NET_EV_STATE && ev.state == IMAGO_NET_UP && down[ev.net]) ++up[ev.net];
    }
    imago_release(a, m, static_cast<unsigned>(n));
  }
  EXPECT_TRUE(down[0] && down[1]) << "both networks went quiet (suspect)";
  EXPECT_TRUE(up[0] && up[1]) << "and came back";
  imago_ep_stats sb{};
  ASSERT_EQ(imago_stats(b, &sb), 0);
  EXPECT_EQ(sb.events, 0u) << "b did not ask";
  EXPECT_EQ(imago_close(a), 0);
  EXPECT_EQ(imago_close(b), 0);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s active-standby|duplicate|ping-pong\n", argv[0]);
    return 2;
  }
  g_mode = argv[1];
  char prog[] = "redundancy_api_test", pair[] = "--pair", rtc[] = "--run-to-completion", red[] = "--redundancy";
  char heal[] = "--net-heal-ms", heal_ms[] = "5", hb[] = "--heartbeat-us", hb_us[] = "100000";
  char miss[] = "--net-miss", miss_n[] = "2", fault[] = "--fault-rx", delay[] = "delay-us=600000";
  const bool events = argc > 2 && std::string(argv[2]) == "events";
  char* args[] = {prog, pair, rtc, red, argv[1], heal, heal_ms, hb, hb_us, miss, miss_n, fault, delay, nullptr};
  ::testing::GTEST_FLAG(filter) = events ? "*HearsTheNetworks*" : "*EveryMessage*";
  if (int rc = imago_attach_embedded(events ? 13 : 11, args, &g_im); rc != 0) {
    std::fprintf(stderr, "imago_attach_embedded: %d\n", rc);
    return 1;
  }
  int rc = RUN_ALL_TESTS();
  imago_detach(g_im);
  return rc;
}
