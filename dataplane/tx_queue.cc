// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/tx_queue.h"

#include <algorithm>
#include <cstring>

namespace imago::dp {

void TxQueue::init(FaultyPort* port, uint16_t burst, uint64_t tsc_hz) {
  port_ = port;
  burst_ = std::clamp<uint16_t>(burst, 1, kMaxBurst);
  n_ = 0;
  backoff_min_ = std::max<uint64_t>(1, tsc_hz / 1'000'000);  // 1 us
  backoff_max_ = std::max<uint64_t>(1, tsc_hz / 1'000);      // 1 ms
}

unsigned TxQueue::flush(uint64_t now_tsc) {
  unsigned sent = port_->flush(now_tsc);  // delayed frames of the fault layer first
  if (n_ == 0 || now_tsc < retry_tsc_) return sent;
  const uint16_t k = port_->tx_burst(pending_, n_, now_tsc);
  frames_out_ += k;
  if (k == 0) {
    backoff_ = backoff_ == 0 ? backoff_min_ : std::min(2 * backoff_, backoff_max_);
    retry_tsc_ = now_tsc + backoff_;
    ++backoffs_;
  } else {
    backoff_ = 0, retry_tsc_ = 0;
  }
  if (k < n_) std::memmove(pending_, pending_ + k, (n_ - k) * sizeof(rte_mbuf*));
  n_ = static_cast<uint16_t>(n_ - k);
  return sent + k;
}

void TxQueue::drop_all() {
  rte_pktmbuf_free_bulk(pending_, n_);
  n_ = 0;
}

}  // namespace imago::dp
