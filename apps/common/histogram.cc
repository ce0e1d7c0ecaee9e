// SPDX-License-Identifier: BSD-3-Clause
#include "apps/common/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace imago::app {

uint64_t Histogram::percentile(double p) const {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  // The rank of the value wanted, 1-based: p50 of 4 values is the 2nd.
  auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (unsigned i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      uint64_t mid = bucket_low(i) + (bucket_width(i) - 1) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

void Histogram::merge(const Histogram& o) {
  for (unsigned i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

std::string Histogram::csv() const {
  std::string out = "lower,upper,count\n";
  char line[80];
  for (unsigned i = 0; i < kBuckets; ++i) {
    if (!counts_[i]) continue;
    std::snprintf(line, sizeof line, "%llu,%llu,%llu\n",
                  static_cast<unsigned long long>(bucket_low(i)),
                  static_cast<unsigned long long>(bucket_low(i) + bucket_width(i) - 1),
                  static_cast<unsigned long long>(counts_[i]));
    out += line;
  }
  return out;
}

}  // namespace imago::app
