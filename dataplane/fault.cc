// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/fault.h"

#include <rte_ethdev.h>

#include <algorithm>
#include <bit>
#include <cerrno>

namespace imago::dp {
// Min-heap on (release_tsc, order): std::*_heap builds max-heaps, so invert.
bool FaultStage::later(const Delayed& a, const Delayed& b) {
  return a.release_tsc != b.release_tsc ? a.release_tsc > b.release_tsc : a.order > b.order;
}

int FaultStage::init(const FaultConfig& cfg, unsigned capacity, rte_mempool* dup_pool,
                     uint32_t corrupt_offset, uint64_t tsc_hz) {
  if (capacity == 0) return -EINVAL;
  fini();
  model_ = FaultModel(cfg);
  active_ = cfg.active();
  dup_pool_ = dup_pool;
  corrupt_offset_ = corrupt_offset;
  tsc_per_ns_ = static_cast<double>(tsc_hz) / 1e9;
  heap_.assign(capacity, Delayed{});
  fifo_.assign(std::bit_ceil(capacity), nullptr);
  counters_ = {};
  return 0;
}

void FaultStage::fini() {
  for (unsigned i = 0; i < heap_len_; ++i) rte_pktmbuf_free(heap_[i].m);
  heap_len_ = 0;
  for (; fifo_head_ != fifo_tail_; ++fifo_head_) {
    rte_pktmbuf_free(fifo_[fifo_head_ & (fifo_.size() - 1)]);
  }
}

const FaultStageCounters& FaultStage::counters() const {
  counters_.model = model_.counters();
  return counters_;
}

bool FaultStage::room_for(unsigned frames) const {
  return heap_len_ + frames <= heap_.size() && fifo_count() + frames <= fifo_.size();
}

void FaultStage::fifo_put(rte_mbuf* m) {
  fifo_[fifo_tail_++ & (fifo_.size() - 1)] = m;
}

void FaultStage::hold(rte_mbuf* m, uint64_t delay_ns, uint64_t now_tsc) {
  if (delay_ns == 0) {
    fifo_put(m);
  } else {
    auto release = now_tsc + static_cast<uint64_t>(static_cast<double>(delay_ns) * tsc_per_ns_);
    heap_[heap_len_++] = Delayed{release, order_++, m};
    std::push_heap(heap_.begin(), heap_.begin() + heap_len_, later);
  }
  counters_.held_max = std::max<uint64_t>(counters_.held_max, held());
}

rte_mbuf* FaultStage::writable(rte_mbuf* m) {
  // A held frame (the engine's slot, sent again on a repair) or an mbuf shared with another
  // holder must not change under them: spoil a copy.
  if (RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1) return m;
  rte_mbuf* copy = rte_pktmbuf_copy(m, dup_pool_, 0, UINT32_MAX);
  counters_.dup_alloc_failed += copy == nullptr;
  rte_pktmbuf_free(m);
  return copy;
}

void FaultStage::corrupt(rte_mbuf* m, uint32_t pick) {
  uint32_t len = rte_pktmbuf_data_len(m);
  uint32_t from = corrupt_offset_ < len ? corrupt_offset_ : 0;
  if (len == 0) return;
  uint32_t bit = pick % ((len - from) * 8);
  rte_pktmbuf_mtod(m, uint8_t*)[from + bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
}

uint16_t FaultStage::push(rte_mbuf* const* in, uint16_t n, uint64_t now_tsc) {
  uint16_t i = 0;
  for (; i < n && room_for(2); ++i) {  // 2: the frame and a possible duplicate
    FaultVerdict v = model_.next();
    rte_mbuf* m = in[i];
    if (v.drop) {
      rte_pktmbuf_free(m);
      continue;
    }
    rte_mbuf* copy = nullptr;
    if (v.dup) {
      copy = rte_pktmbuf_copy(m, dup_pool_, 0, UINT32_MAX);
      counters_.dup_alloc_failed += copy == nullptr;
    }
    if (v.corrupt && (m = writable(m)) == nullptr) continue;  // no copy to spoil: lost
    if (v.corrupt) corrupt(m, v.corrupt_pick);
    hold(m, v.delay_ns, now_tsc);
    if (copy) hold(copy, v.delay_ns, now_tsc);
  }
  return i;
}

void FaultStage::release_due(uint64_t now_tsc) {
  while (heap_len_ > 0 && heap_[0].release_tsc <= now_tsc && fifo_count() < fifo_.size()) {
    std::pop_heap(heap_.begin(), heap_.begin() + heap_len_, later);
    fifo_put(heap_[--heap_len_].m);
  }
}

uint16_t FaultStage::ready(rte_mbuf**& head) {
  size_t at = fifo_head_ & (fifo_.size() - 1);
  head = &fifo_[at];
  size_t contiguous = std::min<size_t>(fifo_count(), fifo_.size() - at);
  return static_cast<uint16_t>(std::min<size_t>(contiguous, UINT16_MAX));
}

void FaultStage::consume(uint16_t k) { fifo_head_ += k; }

int FaultyPort::init(uint16_t port, uint16_t queue, const FaultConfig& tx, const FaultConfig& rx,
                     rte_mempool* dup_pool, uint32_t corrupt_offset, unsigned capacity) {
  port_ = port;
  queue_ = queue;
  uint64_t hz = rte_get_tsc_hz();
  if (int rc = tx_.init(tx, capacity, dup_pool, corrupt_offset, hz); rc < 0) return rc;
  return rx_.init(rx, capacity, dup_pool, corrupt_offset, hz);
}

uint16_t FaultyPort::flush(uint64_t now_tsc) {
  tx_.release_due(now_tsc);
  uint16_t sent = 0;
  rte_mbuf** head;
  // Two rounds: the ready frames may wrap around the end of the FIFO.
  for (int round = 0; round < 2; ++round) {
    uint16_t n = tx_.ready(head);
    if (n == 0) break;
    uint16_t k = rte_eth_tx_burst(port_, queue_, head, n);
    tx_.consume(k);
    sent += k;
    if (k < n) break;  // the port is full: keep the rest for the next call
  }
  return sent;
}

uint16_t FaultyPort::tx_burst(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) {
  if (!tx_.active()) return rte_eth_tx_burst(port_, queue_, pkts, n);
  flush(now_tsc);  // older frames go first
  uint16_t taken = tx_.push(pkts, n, now_tsc);
  flush(now_tsc);
  return taken;
}

uint16_t FaultyPort::rx_burst(rte_mbuf** pkts, uint16_t cap, uint64_t now_tsc) {
  if (!rx_.active()) return rte_eth_rx_burst(port_, queue_, pkts, cap);
  rx_.release_due(now_tsc);
  // Take from the port only while the stage has room, so nothing received is ever dropped
  // by the shim itself (the port's own queue holds the rest).
  uint16_t room = static_cast<uint16_t>(std::min<unsigned>(cap, rx_.free_slots() / 2));
  uint16_t got = room ? rte_eth_rx_burst(port_, queue_, pkts, room) : 0;
  rx_.push(pkts, got, now_tsc);
  rx_.release_due(now_tsc);
  uint16_t out = 0;
  rte_mbuf** head;
  for (int round = 0; round < 2 && out < cap; ++round) {
    uint16_t n = std::min<uint16_t>(rx_.ready(head), static_cast<uint16_t>(cap - out));
    std::copy_n(head, n, pkts + out);
    rx_.consume(n);
    out = static_cast<uint16_t>(out + n);
  }
  return out;
}

}  // namespace imago::dp
