/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A loan table: which buffers one side of an endpoint handed to the other and did not get
 * back yet, kept in shared memory so a process that dies holding buffers can be cleaned up.
 *
 * One lender (the engine for received messages, the application for zero-copy sends) and one
 * returner. The lender writes an owner pointer into a free slot and passes the slot's index
 * along with the buffer; the returner takes it back with an atomic exchange. Whoever gets
 * the non-null pointer frees the buffer, so a reclaim after the returner died frees every
 * buffer exactly once (at worst one buffer leaks if it dies between exchange and free).
 */
#pragma once

#include <atomic>
#include <cstdint>

namespace imago::api {

class LoanTable {
 public:
  static constexpr uint32_t kSlots = 8192;
  static constexpr uint32_t kNone = UINT32_MAX;

  /** Lender: record @p owner. @return its slot, or kNone when every slot is taken. */
  uint32_t lend(void* owner) {
    if (lent_ - returned_.load(std::memory_order_acquire) >= kSlots) return kNone;
    // Returns come back mostly in order, so the slot after the last one is nearly always free.
    for (uint32_t tries = 0; tries < kSlots; ++tries) {
      uint32_t i = cursor_++ % kSlots;
      if (slot_[i].load(std::memory_order_acquire) == nullptr) {
        slot_[i].store(owner, std::memory_order_release);
        ++lent_;
        return i;
      }
    }
    return kNone;
  }

  /** Returner (or reclaim): take slot @p i back. @return its owner, or nullptr (bad index,
   *  or already returned). */
  void* take(uint32_t i) {
    if (i >= kSlots) return nullptr;
    void* o = slot_[i].exchange(nullptr, std::memory_order_acq_rel);
    if (o != nullptr) returned_.fetch_add(1, std::memory_order_release);
    return o;
  }

  /** @return the owner recorded in slot @p i without taking it (validation). */
  void* peek(uint32_t i) const {
    return i < kSlots ? slot_[i].load(std::memory_order_acquire) : nullptr;
  }

  /** @return buffers lent and not returned. */
  uint32_t outstanding() const { return lent_ - returned_.load(std::memory_order_acquire); }

  /** Control path, nobody else using the table: give every loan to @p free_fn. @return how many. */
  template <typename Fn>
  uint32_t reclaim(Fn&& free_fn) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < kSlots; ++i) {
      if (void* o = take(i)) free_fn(o), ++n;
    }
    return n;
  }

  /** Control path: an empty table. */
  void reset() {
    for (auto& s : slot_) s.store(nullptr, std::memory_order_relaxed);
    lent_ = 0;
    cursor_ = 0;
    returned_.store(0, std::memory_order_release);
  }

 private:
  std::atomic<void*> slot_[kSlots];
  uint32_t lent_ = 0;    // lender only
  uint32_t cursor_ = 0;  // lender only
  alignas(64) std::atomic<uint32_t> returned_{0};
};

}  // namespace imago::api
