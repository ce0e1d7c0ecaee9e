// SPDX-License-Identifier: BSD-3-Clause
// Run-to-completion tests' stream: numbered messages a -> b, the test's thread polling the
// engines between bursts (imago_engine_poll), each message checked once and in order.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "api/imago.h"

namespace imago::test {

/** Open @p name from node 1 to 2 (@p a) and back (@p b), polling @p im until both peers are
 *  ready. @return true when they are. */
inline bool rtc_open_pair(imago_t* im, const char* name, imago_ep_t** a, imago_ep_t** b) {
  imago_ep_opts oa{.local_node = 1, .ring_size = 0, .reserved = 0};
  imago_ep_opts ob{.local_node = 2, .ring_size = 0, .reserved = 0};
  if (imago_open(im, name, 2, &oa, a) != 0 || imago_open(im, name, 1, &ob, b) != 0) return false;
  for (int polls = 0; polls < 1000000 && !(imago_peer_ready(*a) == 1 && imago_peer_ready(*b) == 1); ++polls)
    if (const int rc = imago_engine_poll(im); rc < 0 && rc != -EBUSY) return false;  // -EBUSY: another thread polls
  return imago_peer_ready(*a) == 1 && imago_peer_ready(*b) == 1;
}

/** Send @p count messages of @p size bytes (>= 4) from @p a to @p b, polling @p im.
 *  @return the messages received, in order, once each (a failure is a gtest failure). */
inline uint32_t rtc_stream(imago_t* im, imago_ep_t* a, imago_ep_t* b, uint32_t count, uint32_t size,
                           int burst = 32) {
  uint32_t sent = 0, got = 0;
  std::vector<uint8_t> buf(size, 0);
  for (int round = 0; got < count && round < 10000000; ++round) {
    for (int i = 0; i < burst && sent < count; ++i) {
      std::memcpy(buf.data(), &sent, sizeof sent);
      if (imago_send(a, buf.data(), size, 0) != 0) break;
      ++sent;
    }
    imago_engine_poll(im);
    imago_msg m[32];
    const int n = imago_recv_burst(b, m, 32);
    EXPECT_GE(n, 0);
    if (n < 0) return got;
    for (int i = 0; i < n; ++i, ++got) {
      uint32_t seq;
      EXPECT_EQ(m[i].len, size);
      std::memcpy(&seq, imago_msg_data(&m[i]), sizeof seq);
      EXPECT_EQ(seq, got) << "once, in order";
      if (seq != got) return got;
    }
    imago_release(b, m, static_cast<unsigned>(n));
  }
  return got;
}

}  // namespace imago::test
