/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A log-bucketed latency histogram in the HDR style: exact below 128, then 64 buckets per
 * power of two (relative error under 1.6 %), any uint64_t value, fixed memory, no allocation
 * on record(). Pure: values are whatever unit the caller records (imago records nanoseconds).
 */
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace imago::app {

class Histogram {
 public:
  static constexpr unsigned kLinear = 128;  ///< values below this have their own bucket
  static constexpr unsigned kPerOctave = 64;
  static constexpr unsigned kBuckets = kLinear + (64 - 7) * kPerOctave;

  /** Count one value. */
  void record(uint64_t v) { record_n(v, 1); }
  /** Count @p n occurrences of @p v. */
  void record_n(uint64_t v, uint64_t n) {
    counts_[bucket_of(v)] += n;
    count_ += n;
    sum_ += static_cast<double>(v) * static_cast<double>(n);
    if (v < min_) min_ = v;
    if (v > max_) max_ = v;
  }

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0; }

  /**
   * @return the value at percentile @p p (0-100): the midpoint of the bucket holding it,
   *         clamped to [min, max] so p0 and p100 are exact; 0 when empty.
   */
  uint64_t percentile(double p) const;

  /** Add every count of @p o to this histogram. */
  void merge(const Histogram& o);
  void reset() { *this = Histogram{}; }

  /** @return "lower,upper,count" lines for the non-empty buckets, with a header line. */
  std::string csv() const;

  /** @return the bucket index of @p v. */
  static unsigned bucket_of(uint64_t v) {
    if (v < kLinear) return static_cast<unsigned>(v);
    unsigned shift = static_cast<unsigned>(63 - __builtin_clzll(v)) - 6;
    return (shift + 1) * kPerOctave + static_cast<unsigned>(v >> shift) - kPerOctave;
  }
  /** @return the smallest value of bucket @p i. */
  static uint64_t bucket_low(unsigned i) {
    if (i < kLinear) return i;
    unsigned shift = i / kPerOctave - 1;
    return static_cast<uint64_t>(i % kPerOctave + kPerOctave) << shift;
  }
  /** @return the number of values bucket @p i covers. */
  static uint64_t bucket_width(unsigned i) { return i < kLinear ? 1 : uint64_t{1} << (i / kPerOctave - 1); }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace imago::app
