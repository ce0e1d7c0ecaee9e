// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/session.h (the handshake verdicts: identity, claims, proof) and
// reliability/epoch.h (epochs from the wall clock).
#include "reliability/session.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "reliability/epoch.h"

namespace imago::rel {
namespace {

constexpr uint64_t kMine = 0xAB;  // our token

Session known(uint32_t epoch, uint64_t token) {
  Session s;
  s.known = true, s.epoch = epoch, s.token = token;
  return s;
}

TEST(SessionTest, FirstIdentityIsLearntAndTheSameOneIsRecognised) {
  Session s;
  EXPECT_EQ(classify_hello(s, {5, 77, 0, 0}, kMine), HelloVerdict::kFirst);
  s = known(5, 77);
  EXPECT_EQ(classify_hello(s, {5, 77, 0, 0}, kMine), HelloVerdict::kSame);
  EXPECT_EQ(classify_hello(s, {5, 77, kMine, 9}, kMine), HelloVerdict::kSame);
}

TEST(SessionTest, AnotherTokenIsOnlyAClaimWhateverItsEpoch) {
  const Session s = known(5, 77);
  // Expect: higher, equal and lower epochs with a new token all need proof.
  EXPECT_EQ(classify_hello(s, {6, 1, 0, 0}, kMine), HelloVerdict::kUnproven);
  EXPECT_EQ(classify_hello(s, {5, 78, 0, 0}, kMine), HelloVerdict::kUnproven);
  EXPECT_EQ(classify_hello(s, {4, 78, kMine, 0}, kMine), HelloVerdict::kUnproven);
}

TEST(SessionTest, TheCurrentTokenWithAnotherEpochIsForged) {
  const Session s = known(5, 77);
  EXPECT_EQ(classify_hello(s, {6, 77, 0, 0}, kMine), HelloVerdict::kForged);
  EXPECT_EQ(classify_hello(s, {4, 77, kMine, 0}, kMine), HelloVerdict::kForged);
}

TEST(SessionTest, OnlyTheCandidateEchoingOurTokenAndChallengeIsProven) {
  Session s = known(5, 77);
  s.cand = Candidate{true, 6, 88, 1234};
  // Expect: the echo proves it: the challenge, or the challenge + 1 (a challenge sent in
  // answer to ours).
  EXPECT_EQ(classify_hello(s, {6, 88, kMine, 1234}, kMine), HelloVerdict::kProven);
  EXPECT_EQ(classify_hello(s, {6, 88, kMine, 1235}, kMine), HelloVerdict::kProven);
  // Expect: a wrong challenge, our token missing, another claimed epoch or token do not.
  EXPECT_EQ(classify_hello(s, {6, 88, kMine, 1236}, kMine), HelloVerdict::kUnproven);
  EXPECT_EQ(classify_hello(s, {6, 88, kMine, 1233}, kMine), HelloVerdict::kUnproven);
  EXPECT_EQ(classify_hello(s, {6, 88, 0, 1234}, kMine), HelloVerdict::kUnproven);
  EXPECT_EQ(classify_hello(s, {7, 88, kMine, 1234}, kMine), HelloVerdict::kUnproven);
  EXPECT_EQ(classify_hello(s, {6, 89, kMine, 1234}, kMine), HelloVerdict::kUnproven);
  // Expect: a lower-epoch candidate is proven the same way.
  s.cand = Candidate{true, 3, 88, 1234};
  EXPECT_EQ(classify_hello(s, {3, 88, kMine, 1234}, kMine), HelloVerdict::kProven);
  // Expect: no candidate pending, no proof.
  s.cand.pending = false;
  EXPECT_EQ(classify_hello(s, {3, 88, kMine, 1234}, kMine), HelloVerdict::kUnproven);
}

TEST(EpochTest, MillisecondsOfTheWallClockSoARestartWithinASecondGrows) {
  const uint64_t t = kClockSetNs + 123 * 1'000'000'000ull;
  // Expect: 1 ms later is a different, higher epoch; within the same ms the same one.
  EXPECT_EQ(make_epoch(t + 1'000'000, 0), make_epoch(t, 0) + 1);
  EXPECT_EQ(make_epoch(t + 999'999, 0), make_epoch(t, 0));
  EXPECT_TRUE(seq_gt(make_epoch(t + 600'000'000, 0), make_epoch(t, 0)));
  // Expect: serial order holds across the 2^32 ms wrap and for 24 days.
  const uint64_t wrap = (uint64_t{1} << 32) * 1'000'000 * 368;  // 2^32 ms x 368: Feb 2020
  EXPECT_EQ(make_epoch(wrap - 1'000'000, 0), 0xFFFFFFFFu);
  EXPECT_TRUE(seq_gt(make_epoch(wrap + 1'000'000, 0), make_epoch(wrap - 1'000'000, 0)));
  EXPECT_TRUE(seq_gt(make_epoch(t + 24ull * 86400 * 1'000'000'000, 0), make_epoch(t, 0)));
}

TEST(EpochTest, AnUnsetClockGivesARandomEpoch) {
  // Expect: before 2020 the random value decides, so two boots at "1970" differ.
  EXPECT_NE(make_epoch(5'000'000'000, 0x1111), make_epoch(5'000'000'000, 0x2222));
  EXPECT_EQ(make_epoch(0, 0x1234'0000'0000ull), 0x1234u);
}

}  // namespace
}  // namespace imago::rel
