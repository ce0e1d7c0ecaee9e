/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The primary's last answers to control requests, by (pid, id, op): a request tried again
 * (its answer was late or lost) gets the answer it had, not a second open or close.
 */
#pragma once

#include <array>
#include <cstdint>

#include "api/control.h"

namespace imago::api {

class CtlAnswers {
 public:
  struct Answer {
    int32_t pid = 0;
    CtlOp op{};
    uint64_t id = 0;
    int32_t rc = 0;
    uint32_t slot = 0;
  };

  /** @return the answer recorded for request @p m, or nullptr. */
  const Answer* find(const CtlMsg& m) const {
    for (const Answer& a : ring_)
      if (a.pid == m.pid && a.pid != 0 && a.id == m.id && a.op == m.op) return &a;
    return nullptr;
  }
  /** Record the answer to @p m (rc and slot), over the oldest. */
  void record(const CtlMsg& m) {
    ring_[next_++ % ring_.size()] = Answer{m.pid, m.op, m.id, m.rc, m.slot};
  }

 private:
  // A retry comes within kCtlGiveUpMs of its first try: far fewer requests than this.
  std::array<Answer, 256> ring_{};
  uint32_t next_ = 0;
};

}  // namespace imago::api
