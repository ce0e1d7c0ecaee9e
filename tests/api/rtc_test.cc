// SPDX-License-Identifier: BSD-3-Clause
// Run-to-completion (imago_attach_embedded with --run-to-completion): no engine lcore; the
// application's thread drives both nodes with imago_engine_poll() and everything still
// arrives, once, in order. A process of its own: EAL starts once per process.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "api/imago.h"
#include "tests/api/rtc_stream.h"

namespace {

imago_t* g_im = nullptr;

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
