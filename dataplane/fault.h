/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The fault-injection layer between an engine and a port: the seeded fault model of
 * fault_model.h applied to mbuf bursts, separately on rx and tx, with counters.
 *
 * It is a layer around the I/O, not a branch in the datapath (Aeron's loss interceptor):
 * with no fault configured, FaultyPort's bursts are plain rte_eth_rx_burst/tx_burst calls.
 * Dropped frames are freed; delayed and reordered ones wait in a bounded time-ordered heap;
 * everything else keeps its order in a bounded FIFO. No allocation after init().
 */
#pragma once

#include <rte_mbuf.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "dataplane/fault_model.h"

namespace imago::dp {

/** Counters of one direction: the model's plus the shim's own. */
struct FaultStageCounters {
  FaultCounters model;
  uint64_t dup_alloc_failed = 0;  ///< a duplicate, or a shared frame to corrupt, could not be copied (pool empty)
  uint64_t held_max = 0;          ///< most frames ever held at once
};

/** One direction of fault injection. */
class FaultStage {
 public:
  FaultStage() = default;
  FaultStage(const FaultStage&) = delete;
  FaultStage& operator=(const FaultStage&) = delete;
  ~FaultStage() { fini(); }

  /**
   * @param capacity        most frames held at once (delay heap and ready FIFO each)
   * @param dup_pool        pool for duplicated frames
   * @param corrupt_offset  bit flips land at or after this byte (past the link headers)
   * @param tsc_hz          rte_get_tsc_hz(), to turn delays into TSC cycles
   * @return 0 or -EINVAL (capacity 0).
   */
  int init(const FaultConfig& cfg, unsigned capacity, rte_mempool* dup_pool,
           uint32_t corrupt_offset, uint64_t tsc_hz);
  /** Free every held frame. */
  void fini();

  bool active() const { return active_; }

  /** Judge @p n frames. @return how many were taken (stops early when full). */
  uint16_t push(rte_mbuf* const* in, uint16_t n, uint64_t now_tsc);
  /** Move frames whose delay has passed to the ready FIFO. */
  void release_due(uint64_t now_tsc);
  /** @return the ready frames contiguous at the FIFO head; @p head points at them. */
  uint16_t ready(rte_mbuf**& head);
  /** Remove @p k frames from the FIFO head (they were handed on). */
  void consume(uint16_t k);
  /** @return frames held (delayed + ready). */
  unsigned held() const { return heap_len_ + fifo_count(); }
  /** @return frames that can still be taken before the stage is full. */
  unsigned free_slots() const {
    return std::min<unsigned>(static_cast<unsigned>(heap_.size()) - heap_len_,
                              static_cast<unsigned>(fifo_.size()) - fifo_count());
  }

  const FaultStageCounters& counters() const;

 private:
  struct Delayed {
    uint64_t release_tsc;
    uint64_t order;  // arrival order breaks ties so equal delays keep FIFO order
    rte_mbuf* m;
  };
  static bool later(const Delayed& a, const Delayed& b);
  bool room_for(unsigned frames) const;
  void hold(rte_mbuf* m, uint64_t delay_ns, uint64_t now_tsc);
  void fifo_put(rte_mbuf* m);
  unsigned fifo_count() const { return static_cast<unsigned>(fifo_tail_ - fifo_head_); }
  /** @return @p m, or a copy of it when it is shared or external (@p m freed; nullptr: no
   *  mbuf for the copy). */
  rte_mbuf* writable(rte_mbuf* m);
  void corrupt(rte_mbuf* m, uint32_t pick);

  FaultModel model_{FaultConfig{}};
  bool active_ = false;
  rte_mempool* dup_pool_ = nullptr;
  uint32_t corrupt_offset_ = 0;
  double tsc_per_ns_ = 0;
  std::vector<Delayed> heap_;
  unsigned heap_len_ = 0;
  std::vector<rte_mbuf*> fifo_;  // power-of-two ring, indexes grow forever
  uint64_t fifo_head_ = 0, fifo_tail_ = 0;
  uint64_t order_ = 0;
  mutable FaultStageCounters counters_;
};

/**
 * A port queue seen through fault stages. Bursts return how many frames they handled; the
 * caller keeps the rest (tx) exactly as with rte_eth_tx_burst.
 */
class FaultyPort {
 public:
  /** @return 0 or a negative errno from FaultStage::init. */
  int init(uint16_t port, uint16_t queue, const FaultConfig& tx, const FaultConfig& rx,
           rte_mempool* dup_pool, uint32_t corrupt_offset, unsigned capacity);

  /** Send through the tx stage. @return frames taken from @p pkts (the caller owns the rest). */
  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc);
  /** Receive through the rx stage. @return frames written to @p pkts. */
  uint16_t rx_burst(rte_mbuf** pkts, uint16_t cap, uint64_t now_tsc);
  /** Send delayed tx frames that have come due. @return frames sent. */
  uint16_t flush(uint64_t now_tsc);
  /** Free every frame either stage still holds (before the port closes). */
  void release() {
    tx_.fini();
    rx_.fini();
  }
  /** @return frames still held by either stage. */
  unsigned held() const { return tx_.held() + rx_.held(); }

  const FaultStage& tx_stage() const { return tx_; }
  const FaultStage& rx_stage() const { return rx_; }
  uint16_t port() const { return port_; }

 private:
  uint16_t port_ = 0, queue_ = 0;
  FaultStage tx_, rx_;
};

}  // namespace imago::dp
