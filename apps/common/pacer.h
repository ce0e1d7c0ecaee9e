/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Pacing to a fixed rate on a TSC clock: every item has a slot one period apart. A caller
 * sends all slots that are due in one burst (a tx burst may be a syscall), and after a stall
 * catches up by at most one burst, so the rate never spikes. Pure and header-only.
 */
#pragma once

#include <algorithm>
#include <cstdint>

namespace imago::app {

class Pacer {
 public:
  /** @param period cycles between items; 0 means unpaced (everything is always due). */
  explicit Pacer(uint64_t period = 0) : period_(period) {}

  /** @return how many of up to @p max items may go at @p now (and books their slots). */
  uint16_t due(uint64_t now, uint16_t max) {
    if (period_ == 0) return max;
    if (!started_) {  // the first slot is now: no burst of credit at start-up
      started_ = true;
      next_ = now;
    }
    uint64_t floor = now - std::min<uint64_t>(now, period_ * max);
    next_ = std::max(next_, floor);
    if (now < next_) return 0;
    auto n = static_cast<uint16_t>(std::min<uint64_t>(max, (now - next_) / period_ + 1));
    next_ += n * period_;
    return n;
  }
  bool paced() const { return period_ != 0; }

 private:
  uint64_t period_;
  uint64_t next_ = 0;
  bool started_ = false;
};

}  // namespace imago::app
