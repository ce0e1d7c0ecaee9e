// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/rto.h: the RFC 6298 retransmission timeout.
#include "reliability/rto.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace imago::rel {
namespace {

TEST(RtoTest, FollowsRfc6298AndBacksOff) {
  RtoEstimator r(1000, 100, 100000);
  EXPECT_EQ(r.rto(), 1000u);
  r.sample(200);  // srtt 200, rttvar 100 -> 600
  EXPECT_EQ(r.rto(), 600u);
  r.backoff();
  EXPECT_EQ(r.rto(), 1200u);
  r.reset_backoff();
  EXPECT_EQ(r.rto(), 600u);
  for (int i = 0; i < 30; ++i) r.backoff();
  EXPECT_EQ(r.rto(), 100000u);
  EXPECT_EQ(r.min_rtt(), 200u);
}

TEST(RtoTest, AddsThePeersAckDelaySoASteadyQueueIsNoLoss) {
  // Do: samples that never vary (a full queue): RTTVAR decays towards 0.
  RtoEstimator plain(1000, 100, 100000), delayed(1000, 100, 100000, 500);
  for (int i = 0; i < 100; ++i) plain.sample(2000), delayed.sample(2000);
  // Expect: without the ACK delay the RTO hugs SRTT; with it, a unit whose ACK the peer held
  // back for up to 500 is not taken for lost.
  EXPECT_LT(plain.rto(), 2000u + 10);
  EXPECT_EQ(delayed.rto(), plain.rto() + 500);
}

TEST(RtoTest, AFloorBoundsMinRttAndIsNoSample) {
  // Do: the handshake's round trip (it may hold the peer's start), then the data's samples.
  RtoEstimator r(1000, 100, 100000);
  r.floor_sample(5000);
  // Expect: min_rtt bounded, srtt and the RTO untouched.
  EXPECT_EQ(r.min_rtt(), 5000u);
  EXPECT_FALSE(r.has_sample());
  EXPECT_EQ(r.srtt(), 0u);
  EXPECT_EQ(r.rto(), 1000u);
  r.sample(200);
  EXPECT_EQ(r.srtt(), 200u);
  EXPECT_EQ(r.min_rtt(), 200u);
  r.sample(9000);  // a blackout's sample: min_rtt keeps the floor below it
  r.floor_sample(7000);
  EXPECT_EQ(r.min_rtt(), 200u);
}

}  // namespace
}  // namespace imago::rel
