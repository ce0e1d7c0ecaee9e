/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The big pool's buffers a node's deliveries hold (rebuilding a message, in an rx ring, or
 * held by the application), so that they never take so many that a sender finds none.
 *
 * Senders leave the last send_reserve() buffers of a pool to deliveries (tiers.cc). The big
 * pool is small (64 buffers by default), and one endpoint's rx ring can hold all of it: a
 * server that reads a request, and does not read the next before its answer is sent, then
 * waits for ever (its answer needs a buffer, every one went to the requests behind). So
 * deliveries stop at all but two reserves: one stays the senders' whatever the deliveries
 * hold, one the deliveries' whatever the senders hold.
 *
 * Which buffers are still held is read from the loan tables (the application returns big
 * buffers straight to the pool: nothing tells the engine), and only when the ledger is full,
 * so a return missed, a dead application's reclaim included, costs nothing: the ledger is
 * never more than a cache of what the tables say. Engine lcore only; nothing allocated
 * after init().
 */
#pragma once

#include <cstdint>
#include <vector>

#include "api/loan.h"

namespace imago::api {

class BigLedger {
 public:
  /** For a pool of @p size buffers whose senders leave @p reserve of them, shared by the
   *  deliveries of @p nodes nodes (each its own ledger, its share of the rest). Control path. */
  void init(uint32_t size, uint32_t reserve, uint32_t nodes = 1) {
    cap_ = share(size, reserve, nodes);
    e_.clear();
    e_.reserve(size);
  }
  /** @return the buffers one node's deliveries may hold, as init() shares them out. */
  static uint32_t share(uint32_t size, uint32_t reserve, uint32_t nodes) {
    const uint32_t all = size > 2 * reserve ? size - 2 * reserve : 1;
    return nodes > 0 && all / nodes > 0 ? all / nodes : 1;
  }
  /** @return whether a delivery may take one more buffer now. */
  bool room() {
    if (e_.size() < cap_) return true;
    prune();
    return e_.size() < cap_;
  }
  /** @p obj was taken for a delivery (rebuilt in, or copied into). */
  void took(void* obj) { put(obj, nullptr, 0); }
  /** @p obj is lent to the application as loan @p loan of @p table. */
  void lent(void* obj, const LoanTable* table, uint32_t loan) { put(obj, table, loan); }
  /** @p obj went back to the pool from the engine (dropped, or never delivered). */
  void freed(void* obj) {
    for (size_t i = 0; i < e_.size(); ++i)
      if (e_[i].obj == obj) return remove(i);
  }
  size_t held() const { return e_.size(); }

 private:
  struct Entry {
    void* obj;
    const LoanTable* table;  ///< nullptr: still the engine's
    uint32_t loan;
  };
  void put(void* obj, const LoanTable* table, uint32_t loan) {
    for (Entry& x : e_)
      if (x.obj == obj) return void(x = {obj, table, loan});
    if (e_.size() < e_.capacity()) e_.push_back({obj, table, loan});  // never more than the pool
  }
  void remove(size_t i) {
    e_[i] = e_.back();
    e_.pop_back();
  }
  /** Forget what the application gave back (its loan no longer current). */
  void prune() {
    for (size_t i = 0; i < e_.size();)
      if (e_[i].table != nullptr && e_[i].table->peek(e_[i].loan) != e_[i].obj) remove(i);
      else ++i;
  }
  uint32_t cap_ = 1;
  std::vector<Entry> e_;
};

}  // namespace imago::api
