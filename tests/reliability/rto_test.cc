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

}  // namespace
}  // namespace imago::rel
