// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/session.h: the handshake verdicts by epoch and token.
#include "reliability/session.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace imago::rel {
namespace {

TEST(SessionTest, ClassifiesHandshakesByEpochAndToken) {
  Session s;
  EXPECT_EQ(classify_hello(s, 5, 77), HelloVerdict::kFirst);
  s.known = true, s.epoch = 5, s.token = 77;
  EXPECT_EQ(classify_hello(s, 5, 77), HelloVerdict::kSame);
  EXPECT_EQ(classify_hello(s, 5, 78), HelloVerdict::kWrongToken);
  EXPECT_EQ(classify_hello(s, 6, 1), HelloVerdict::kRestart);
  EXPECT_EQ(classify_hello(s, 4, 77), HelloVerdict::kStale);
}

}  // namespace
}  // namespace imago::rel
