/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Duplicate discard for one channel of a node on two networks (PRP's "keep the first"): the
 * sequence numbers seen in a sliding window of kBits. A copy seen before is a duplicate and
 * is dropped. One older than the window is stale: it may be a duplicate or not, so it goes to
 * the engine, whose own exactly-once check decides (a wrong guess costs a copy, never a
 * frame). A new epoch (the sender restarted) starts over.
 *
 * The window only saves the engine work: whatever moves it (a damaged or forged shim, a long
 * outage on both networks) must not cost frames. A copy far ahead of the window is passed on
 * without moving it, so one bad number cannot make every later frame stale; kFarRun of them
 * in a row (a real jump) start it over there, and so do kStaleRun stale copies in a row (the
 * window was moved past the sender: it follows the sender again).
 */
#pragma once

#include <cstdint>

namespace imago::rel::red {

class DedupWindow {
 public:
  static constexpr uint32_t kBits = 8192;
  static constexpr uint32_t kFar = 1u << 16;
  static constexpr uint32_t kFarRun = 4;
  static constexpr uint32_t kStaleRun = 64;
  enum Verdict : uint8_t { kNew, kDuplicate, kStale };

  Verdict check(uint32_t epoch, uint32_t seq) {
    if (!started_ || epoch != epoch_) return restart(epoch, seq);
    const int32_t d = static_cast<int32_t>(seq - top_);
    if (d > static_cast<int32_t>(kFar)) return ++far_run_ >= kFarRun ? restart(epoch, seq) : kNew;
    far_run_ = 0;
    if (d <= -static_cast<int32_t>(kBits)) return ++stale_run_ >= kStaleRun ? restart(epoch, seq) : kStale;
    stale_run_ = 0;
    if (d > 0) {
      const uint32_t clear = static_cast<uint32_t>(d) < kBits ? static_cast<uint32_t>(d) : kBits;
      for (uint32_t i = 1; i <= clear; ++i) unset(top_ + i);
      top_ = seq;
      set(seq);
      return kNew;
    }
    if (test(seq)) return kDuplicate;
    set(seq);
    return kNew;
  }

 private:
  Verdict restart(uint32_t epoch, uint32_t seq) {
    started_ = true, epoch_ = epoch, top_ = seq, far_run_ = 0, stale_run_ = 0;
    for (auto& w : bits_) w = 0;
    set(seq);
    return kNew;
  }
  void set(uint32_t s) { bits_[(s % kBits) / 64] |= uint64_t{1} << (s % 64); }
  void unset(uint32_t s) { bits_[(s % kBits) / 64] &= ~(uint64_t{1} << (s % 64)); }
  bool test(uint32_t s) const { return (bits_[(s % kBits) / 64] >> (s % 64)) & 1; }

  bool started_ = false;
  uint32_t epoch_ = 0;
  uint32_t top_ = 0;  ///< highest seq seen
  uint32_t far_run_ = 0;
  uint32_t stale_run_ = 0;
  uint64_t bits_[kBits / 64] = {};
};

}  // namespace imago::rel::red
