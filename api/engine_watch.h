/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Whether imagod's engines still run: each engine lcore counts its loop's iterations, busy or
 * idle, so one whose count has not moved for a while is stuck (an application killed inside
 * an operation on a ring shared with the engine left it half done, and the engine waits on
 * it for ever; the message pools are lock-free stacks for that reason: docs/USER.md). Nothing else would say so: telemetry still answers, peers
 * still look established. Control path (imagod's loop), pure: the caller samples.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace imago::api {

class EngineWatch {
 public:
  /** @p limit_ns: how long an lcore's count may stand still. */
  explicit EngineWatch(uint64_t limit_ns) : limit_(limit_ns) {}
  /** Take @p counts, (lcore, iterations) of every engine lcore, read at @p now_ns.
   *  @return an lcore whose count has not moved for the limit, or -1. */
  int stuck(const std::vector<std::pair<unsigned, uint64_t>>& counts, uint64_t now_ns) {
    if (counts.size() != last_.size()) last_ = counts, since_.assign(counts.size(), now_ns);
    int found = -1;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] != last_[i]) last_[i] = counts[i], since_[i] = now_ns;  // it moved
      else if (found < 0 && now_ns - since_[i] >= limit_) found = static_cast<int>(counts[i].first);
    }
    return found;
  }

 private:
  uint64_t limit_;
  std::vector<std::pair<unsigned, uint64_t>> last_;  ///< per lcore, at its last move
  std::vector<uint64_t> since_;                      ///< when each last moved
};

}  // namespace imago::api
