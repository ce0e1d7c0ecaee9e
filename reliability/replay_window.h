/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Anti-replay for a peer's group control frames (IPsec's sliding window, RFC 4303 3.4.3): the
 * sender numbers its GROUP_CTL frames to each peer (the header's `seq`); a number seen already,
 * or older than the last kSpan, is a replay. A cluster key authenticates a frame, not its
 * freshness: a recorded LEAVE, EXPIRED or END played again within the session would pass every
 * other check. The window belongs to one session of the peer: it starts afresh when the peer's
 * epoch, token or our ISN for it change.
 */
#pragma once

#include <bitset>
#include <cstdint>

#include "reliability/seq.h"

namespace imago::rel {

class ReplayWindow {
 public:
  static constexpr uint32_t kSpan = 256;  ///< reordering beyond this many frames looks like a replay

  /** @return true, and note it, if number @p n of session @p session is fresh. */
  bool fresh(uint64_t session, uint32_t n) {
    if (session != session_ || seen_.none()) {
      session_ = session, top_ = n, seen_.reset(), seen_.set(0);
      return true;
    }
    if (seq_gt(n, top_)) {
      const uint32_t d = n - top_;
      seen_ = d >= kSpan ? std::bitset<kSpan>{} : seen_ << d;
      seen_.set(0), top_ = n;
      return true;
    }
    const uint32_t back = top_ - n;
    if (back >= kSpan || seen_.test(back)) return false;
    seen_.set(back);
    return true;
  }

 private:
  uint64_t session_ = 0;
  uint32_t top_ = 0;  ///< the highest number heard; bit i of seen_: top_ - i heard
  std::bitset<kSpan> seen_;
};

}  // namespace imago::rel
