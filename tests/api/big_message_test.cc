// SPDX-License-Identifier: BSD-3-Clause
// 16 MiB messages through imago.h under 10 % injected loss, in a process of its own (EAL
// starts once per process; the pools here are sized for such messages): every byte arrives,
// once, in order, by copy and zero-copy, repairs really happened, and every buffer is back in
// its pool afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "api/imago.h"
#include "tests/api/pool_use.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using namespace imago::test;  // pool_use(), settles_to()

constexpr uint32_t kBig = 16u << 20;
imago_t* g_im = nullptr;

uint8_t pattern(uint32_t seq, uint32_t i) {
  return static_cast<uint8_t>(seq * 131u + i * 7u + (i >> 12));
}

void fill(uint8_t* p, uint32_t seq) {
  for (uint32_t i = 0; i < kBig; ++i) p[i] = pattern(seq, i);
}

bool intact(const uint8_t* p, uint32_t len, uint32_t seq) {
  if (len != kBig) return false;
  for (uint32_t i = 0; i < kBig; ++i)
    if (p[i] != pattern(seq, i)) return false;
  return true;
}

TEST(BigMessages, SixteenMiBUnderTenPercentLossArriveIntactAndEveryBufferComesBack) {
  imago_ep_t *a = nullptr, *b = nullptr;
  imago_ep_opts ob{.local_node = 2, .ring_size = 0, .reserved = 0};
  ASSERT_EQ(imago_open(g_im, "big", 2, nullptr, &a), 0);
  ASSERT_EQ(imago_open(g_im, "big", 1, &ob, &b), 0);
  const auto ready_by = Clock::now() + 5s;
  while (Clock::now() < ready_by && !(imago_peer_ready(a) == 1 && imago_peer_ready(b) == 1))
    std::this_thread::sleep_for(100us);
  ASSERT_EQ(imago_max_message(a), kBig);
  const PoolUse before = quiet_use();
  // Do: 8 messages, every other one written in place (imago_buf_alloc + imago_send_zc), the
  // rest copied by imago_send; receive and check each byte while sending.
  constexpr uint32_t kCount = 8;
  std::vector<uint8_t> src(kBig);
  uint32_t sent = 0, got = 0, bad = 0;
  const auto end = Clock::now() + 60s;
  while (got < kCount && Clock::now() < end) {
    if (sent < kCount) {
      int rc;
      if (sent % 2 == 1) {
        void* zc = nullptr;
        rc = imago_buf_alloc(a, kBig, &zc);
        if (rc == 0) {
          fill(static_cast<uint8_t*>(zc), sent);
          if ((rc = imago_send_zc(a, zc, kBig, 0)) != 0) {
            EXPECT_EQ(imago_buf_free(a, zc), 0);
          }
        }
      } else {
        fill(src.data(), sent);
        rc = imago_send(a, src.data(), kBig, 0);
      }
      ASSERT_TRUE(rc == 0 || rc == -EAGAIN) << rc;
      sent += rc == 0;
    }
    imago_msg m[4];
    const int n = imago_recv_burst(b, m, 4);
    ASSERT_GE(n, 0);
    for (int i = 0; i < n; ++i, ++got)
      bad += !intact(static_cast<const uint8_t*>(imago_msg_data(&m[i])), m[i].len, got);
    if (n > 0) {
      ASSERT_EQ(imago_release(b, m, static_cast<unsigned>(n)), 0);
    }
  }
  // Expect: all 8, intact and in order; frames were lost and repaired on the way.
  EXPECT_EQ(got, kCount);
  EXPECT_EQ(bad, 0u);
  imago_node_stats st{};
  ASSERT_EQ(imago_node_stats_get(g_im, 0, &st), 0);
  EXPECT_GT(st.msgs_retransmitted, 0u);
  // Expect: each was reassembled in the buffer it was delivered in.
  imago_ep_stats es{};
  ASSERT_EQ(imago_stats(b, &es), 0);
  EXPECT_EQ(es.rx_rebuilt, kCount);
  // Expect: once everything is acknowledged, every buffer back where it was.
  EXPECT_TRUE(settles_to(before, 5000ms)) << "before " << show(before) << ", now " << show(pool_use());
  imago_close(a);
  imago_close(b);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // The embedded pair with messages up to 16 MiB: its big pool (64 buffers) needs EAL
  // memory beyond the default 1 GiB; 10 % of the frames each node receives are dropped.
  char prog[] = "big_message_test", no_huge[] = "--no-huge", m[] = "-m", mem[] = "3072",
       dashes[] = "--", pair[] = "--pair", max[] = "--max-message", big[] = "16777216",
       loss[] = "--loss", p[] = "0.1";
  char* args[] = {prog, no_huge, m, mem, dashes, pair, max, big, loss, p};
  if (int rc = imago_attach_embedded(10, args, &g_im); rc != 0) {
    std::fprintf(stderr, "imago_attach_embedded: %d: the test cannot run\n", rc);
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  imago_detach(g_im);
  return rc;
}
