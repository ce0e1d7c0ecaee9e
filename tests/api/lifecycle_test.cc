// SPDX-License-Identifier: BSD-3-Clause
// The API's life cycle in a process of its own (a detach ends EAL for the process): the
// smallest pools stream without stalling, handles used after close or detach are refused,
// and a second attach says why it cannot be.
//
// The tests run in the order written: the last one detaches.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/imago.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

imago_t* g_im = nullptr;

struct Pair {
  explicit Pair(const char* name) {
    imago_ep_opts ob{.local_node = 2, .ring_size = 0, .reserved = 0};
    EXPECT_EQ(imago_open(g_im, name, 2, nullptr, &a), 0);
    EXPECT_EQ(imago_open(g_im, name, 1, &ob, &b), 0);
    const auto end = Clock::now() + 5s;
    while (Clock::now() < end && !(imago_peer_ready(a) == 1 && imago_peer_ready(b) == 1))
      std::this_thread::sleep_for(100us);
  }
  ~Pair() {
    imago_close(a);
    imago_close(b);
  }
  imago_ep_t* a = nullptr;
  imago_ep_t* b = nullptr;
};

// Receives what is there; checks each message's sequence number. @return messages received.
unsigned drain(imago_ep_t* ep, uint32_t& next, unsigned& bad) {
  imago_msg m[32];
  int n = imago_recv_burst(ep, m, 32);
  for (int i = 0; i < n; ++i, ++next) {
    uint32_t seq = 0;
    std::memcpy(&seq, imago_msg_data(&m[i]), 4);
    bad += seq != next;
  }
  if (n > 0) {
    EXPECT_EQ(imago_release(ep, m, static_cast<unsigned>(n)), 0);
  }
  return n > 0 ? static_cast<unsigned>(n) : 0;
}

TEST(SmallPools, TheSmallestPoolsStreamEveryTierWithoutStalling) {
  // Do: with --pool-buffers 64 (the smallest accepted), send 20,000 messages of the pool and
  // frame tiers, by copy and zero-copy, as fast as the sender can, while receiving.
  Pair p("small");
  const uint32_t sizes[] = {100, 300, 1000, 2000};
  const uint32_t count = 20000;
  std::vector<uint8_t> buf(2000, 0x5a);
  uint32_t sent = 0, next = 0;
  unsigned bad = 0;
  const auto end = Clock::now() + 60s;
  while (next < count && Clock::now() < end) {
    for (int k = 0; k < 8 && sent < count; ++k) {
      const uint32_t len = sizes[sent % 4];
      std::memcpy(buf.data(), &sent, 4);
      int rc;
      void* zc = nullptr;
      if (sent % 3 == 0 && (rc = imago_buf_alloc(p.a, len, &zc)) == 0) {
        std::memcpy(zc, buf.data(), len);
        if ((rc = imago_send_zc(p.a, zc, len, 0)) != 0) {
          EXPECT_EQ(imago_buf_free(p.a, zc), 0);
        }
      } else {
        rc = imago_send(p.a, buf.data(), len, 0);
      }
      if (rc != 0) {
        EXPECT_EQ(rc, -EAGAIN);
        break;
      }
      ++sent;
    }
    drain(p.b, next, bad);
  }
  // Expect: everything arrived, in order (a stall would stop short at the deadline).
  EXPECT_EQ(next, count) << "stalled after " << next << " messages, " << sent << " sent";
  EXPECT_EQ(bad, 0u);
}

TEST(SmallPools, AGreedySenderNeverStarvesTheReceiverOfBuffers) {
  // Do: a sender thread that takes every big buffer it can (zero-copy, 2500-byte messages:
  // the big pool, 64 buffers) while the receiver is slow at first: the sender's buffers wait
  // in its tx ring, the receiver's node needs big buffers to deliver (the messages are
  // fragmented and reassembled, so they are copied).
  Pair p("greedy");
  const uint32_t count = 20000, len = 2500;
  std::atomic<uint32_t> sent{0};
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    std::vector<uint8_t> msg(len, 0x33);
    while (sent < count && !stop) {
      void* buf = nullptr;
      if (imago_buf_alloc(p.a, len, &buf) != 0) continue;  // -EAGAIN: none free now
      const uint32_t seq = sent;
      std::memcpy(buf, msg.data(), len);
      std::memcpy(buf, &seq, 4);
      if (imago_send_zc(p.a, buf, len, 0) == 0) {
        ++sent;
      } else {
        EXPECT_EQ(imago_buf_free(p.a, buf), 0);
      }
    }
  });
  uint32_t next = 0;
  unsigned bad = 0;
  const auto end = Clock::now() + 60s;
  while (next < count && Clock::now() < end) {
    if (next < 5000) std::this_thread::sleep_for(1ms);  // slow at first: the sender runs ahead
    drain(p.b, next, bad);
  }
  stop = true;
  sender.join();
  // Expect: everything arrived, in order.
  EXPECT_EQ(next, count) << "stalled after " << next << " of " << sent << " sent";
  EXPECT_EQ(bad, 0u);
}

TEST(Handles, AnEndpointUsedAfterCloseIsRefused) {
  imago_ep_t* ep = nullptr;
  ASSERT_EQ(imago_open(g_im, "closed", 2, nullptr, &ep), 0);
  ASSERT_EQ(imago_close(ep), 0);
  // Expect: every call on the closed handle is -EINVAL (or 0 / NULL), not a crash.
  imago_msg m{};
  imago_ep_stats st{};
  void* buf = nullptr;
  EXPECT_EQ(imago_close(ep), -EINVAL);
  EXPECT_EQ(imago_send(ep, "x", 1, 0), -EINVAL);
  imago_iov iov{"x", 1};
  EXPECT_EQ(imago_send_burst(ep, &iov, 1, 0), -EINVAL);
  EXPECT_EQ(imago_buf_alloc(ep, 10, &buf), -EINVAL);
  EXPECT_EQ(imago_send_zc(ep, &m, 1, 0), -EINVAL);
  EXPECT_EQ(imago_buf_free(ep, &m), -EINVAL);
  EXPECT_EQ(imago_recv_burst(ep, &m, 1), -EINVAL);
  EXPECT_EQ(imago_release(ep, &m, 1), -EINVAL);
  EXPECT_EQ(imago_poll(ep), -EINVAL);
  EXPECT_EQ(imago_wait(ep, 1000), -EINVAL);
  EXPECT_EQ(imago_peer_ready(ep), -EINVAL);
  EXPECT_EQ(imago_max_message(ep), 0u);
  EXPECT_EQ(imago_stats(ep, &st), -EINVAL);
  EXPECT_EQ(imago_ep_name(ep), nullptr);
  EXPECT_EQ(imago_ep_peer(ep), 0u);
}

TEST(Handles, AStaleHandleStaysRefusedWhenItsEntryIsReused) {
  // Do: close an endpoint, open another (it takes the same entry).
  imago_ep_t *old = nullptr, *now = nullptr;
  ASSERT_EQ(imago_open(g_im, "first", 2, nullptr, &old), 0);
  ASSERT_EQ(imago_close(old), 0);
  ASSERT_EQ(imago_open(g_im, "second", 2, nullptr, &now), 0);
  // Expect: the old handle is refused, the new one works, and closing the old one again
  // does not close the new one.
  EXPECT_EQ(imago_send(old, "x", 1, 0), -EINVAL);
  EXPECT_EQ(imago_close(old), -EINVAL);
  EXPECT_STREQ(imago_ep_name(now), "second");
  EXPECT_EQ(imago_send(now, "x", 1, 0), 0);
  EXPECT_EQ(imago_close(now), 0);
}

TEST(Handles, ForgedHandlesAreRefused) {
  // Expect: pointers and numbers that were never handles are refused.
  int not_a_handle = 0;
  for (uintptr_t h : {uintptr_t{0}, uintptr_t{1}, uintptr_t{0x7ffe0003}, reinterpret_cast<uintptr_t>(&not_a_handle),
                      ~uintptr_t{0}}) {
    auto* ep = reinterpret_cast<imago_ep_t*>(h);
    EXPECT_EQ(imago_send(ep, "x", 1, 0), -EINVAL);
    EXPECT_EQ(imago_close(ep), -EINVAL);
    EXPECT_EQ(imago_node_count(reinterpret_cast<imago_t*>(h)), 0u);
  }
}

TEST(Handles, WildBufferPointersAreRefusedWithoutBeingRead) {
  // Do: zero-copy calls with pointers imago must not read around: unmapped, null page,
  // misaligned, kernel space.
  imago_ep_t* ep = nullptr;
  ASSERT_EQ(imago_open(g_im, "wild", 2, nullptr, &ep), 0);
  for (uintptr_t p : {uintptr_t{8}, uintptr_t{0x1000}, uintptr_t{0xdead0000}, uintptr_t{0xffff800000000000},
                      ~uintptr_t{0} - 4}) {
    // Expect: -EINVAL, not a crash.
    EXPECT_EQ(imago_send_zc(ep, reinterpret_cast<void*>(p), 10, 0), -EINVAL);
    EXPECT_EQ(imago_buf_free(ep, reinterpret_cast<void*>(p)), -EINVAL);
  }
  imago_ep_stats st{};
  ASSERT_EQ(imago_stats(ep, &st), 0);
  EXPECT_EQ(st.buffer_invalid, 10u);
  EXPECT_EQ(imago_close(ep), 0);
}

TEST(ZDetach, HandlesDieWithTheAttachmentAndAttachingAgainSaysWhy) {
  imago_ep_t* ep = nullptr;
  ASSERT_EQ(imago_open(g_im, "left-open", 2, nullptr, &ep), 0);
  // Do: detach with an endpoint still open.
  ASSERT_EQ(imago_detach(g_im), 0);
  // Expect: the attachment and its endpoints are refused afterwards, detach included.
  EXPECT_EQ(imago_detach(g_im), -EINVAL);
  EXPECT_EQ(imago_send(ep, "x", 1, 0), -EINVAL);
  EXPECT_EQ(imago_close(ep), -EINVAL);
  EXPECT_EQ(imago_node_count(g_im), 0u);
  EXPECT_EQ(imago_open(g_im, "again", 2, nullptr, &ep), -EINVAL);
  // Expect: EAL cannot start twice in a process: attaching again is -ENOTSUP, either way.
  imago_t* again = nullptr;
  EXPECT_EQ(imago_attach_embedded(0, nullptr, &again), -ENOTSUP);
  EXPECT_EQ(imago_attach_secondary("nobody", &again), -ENOTSUP);
  EXPECT_EQ(again, nullptr);
  g_im = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // The smallest pools, and faults on both nodes' receive side, so windows fill and buffers
  // are scarce: what makes a greedy sender and a receiver fight over them.
  char prog[] = "lifecycle_test", pair[] = "--pair", pool[] = "--pool-buffers", count[] = "64";
  char fault[] = "--fault-rx", spec[] = "loss=0.05,reorder=0.02,dup=0.01,seed=5";
  char* args[] = {prog, pair, pool, count, fault, spec};
  if (int rc = imago_attach_embedded(6, args, &g_im); rc != 0) {
    std::fprintf(stderr, "imago_attach_embedded: %d: the life-cycle suite cannot run\n", rc);
    return 1;
  }
  int rc = RUN_ALL_TESTS();
  if (g_im != nullptr) imago_detach(g_im);
  return rc;
}
