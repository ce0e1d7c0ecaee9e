// SPDX-License-Identifier: BSD-3-Clause
#include "apps/common/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "reliability/rng.h"

namespace imago::app {
namespace {

TEST(Histogram, BucketsTileEveryValueWithoutGapsOrOverlap) {
  // Do / Expect: consecutive buckets meet exactly, from 0 to beyond 2^63.
  for (unsigned i = 0; i + 1 < Histogram::kBuckets; ++i) {
    ASSERT_EQ(Histogram::bucket_low(i) + Histogram::bucket_width(i), Histogram::bucket_low(i + 1)) << i;
  }
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 129ull, 1000ull, 123456789ull, ~0ull}) {
    unsigned b = Histogram::bucket_of(v);
    ASSERT_LT(b, Histogram::kBuckets);
    EXPECT_GE(v, Histogram::bucket_low(b)) << v;
    EXPECT_LT(v - Histogram::bucket_low(b), Histogram::bucket_width(b)) << v;
  }
}

TEST(Histogram, SmallValuesAreExact) {
  Histogram h;
  // Do: record 1..100.
  for (uint64_t v = 1; v <= 100; ++v) h.record(v);
  // Expect: exact percentiles, min, max and mean.
  EXPECT_EQ(h.percentile(50), 50u);
  EXPECT_EQ(h.percentile(99), 99u);
  EXPECT_EQ(h.percentile(0), 1u);
  EXPECT_EQ(h.percentile(100), 100u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
}

TEST(Histogram, LargeValuesStayWithinTheRelativeErrorBound) {
  // Do: record 100000 random values spread over six decades; compare with sorted truth.
  Histogram h;
  Rng rng(5);
  std::vector<uint64_t> v;
  for (int i = 0; i < 100000; ++i) {
    uint64_t x = 1 + (rng.next() >> (44 + rng.below(20)));
    v.push_back(x);
    h.record(x);
  }
  std::sort(v.begin(), v.end());
  // Expect: every reported percentile within 1/64 of the true one.
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9}) {
    auto truth = static_cast<double>(v[static_cast<size_t>(p / 100 * v.size()) - 1]);
    EXPECT_NEAR(static_cast<double>(h.percentile(p)), truth, truth / 64 + 1) << "p" << p;
  }
  EXPECT_EQ(h.max(), v.back());
  EXPECT_EQ(h.min(), v.front());
}

TEST(Histogram, MergeEqualsRecordingEverythingInOne) {
  Histogram a, b, all;
  // Do: split values between two histograms and merge.
  for (uint64_t x = 0; x < 5000; x += 7) {
    (x % 2 ? a : b).record(x * 13);
    all.record(x * 13);
  }
  a.merge(b);
  // Expect: identical statistics and CSV.
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.percentile(99.9), all.percentile(99.9));
  EXPECT_EQ(a.csv(), all.csv());
}

TEST(Histogram, EmptyReportsZeros) {
  Histogram h;
  EXPECT_EQ(h.percentile(50), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.csv(), "lower,upper,count\n");
}

}  // namespace
}  // namespace imago::app
