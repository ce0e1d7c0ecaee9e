/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A loan table: which buffers one side of an endpoint handed to the other and did not get
 * back yet, kept in shared memory so a process that dies holding buffers can be cleaned up.
 *
 * One lender (the engine for received messages, the application for zero-copy sends) and one
 * returner. The lender writes an owner pointer into a free slot and passes the loan's id
 * along with the buffer; the returner takes it back with a compare-and-swap. Whoever wins
 * the swap frees the buffer, so a reclaim after the returner died frees every buffer exactly
 * once (a returner that dies between the swap and the free is finished by the reclaim from
 * its slot's ReturnJournal, return_journal.h).
 *
 * A loan id is a slot index and that slot's generation, which grows at every loan: ids and
 * buffers are reused, so without it a stale id (a descriptor released twice, or kept from
 * before the slot was reused) would free a buffer somebody else now holds. With it, a stale
 * or forged id matches nothing and frees nothing.
 *
 * The lender may also mark a loan "handed over" (an application's zero-copy buffer once it
 * is on the tx ring): from then on only the returner may take it, so a second send or a free
 * of a buffer already sent is refused instead of losing the message in flight.
 *
 * An application returns in two steps, claim() then finish(), with the buffer's put between:
 * a claimed loan is nobody else's to take, and the word itself says the claim won, so the
 * reclaim after a kill anywhere in between knows the buffer is this return's to finish.
 */
#pragma once

#include <atomic>
#include <cstdint>

namespace imago::api {

class LoanTable {
 public:
  static constexpr uint32_t kIndexBits = 13;
  static constexpr uint32_t kSlots = 1u << kIndexBits;  ///< 8192
  static constexpr uint32_t kNone = UINT32_MAX;

  /** Lender: record @p owner (8-byte aligned, below 2^48; bit 0 is the caller's), already
   *  handed over if @p handed. @return the loan id, or kNone (every slot taken). */
  uint32_t lend(void* owner, bool handed = false) {
    const auto o = reinterpret_cast<uint64_t>(owner);
    if ((o & ~kOwnerMask) != 0 || (o & kFlags) != 0 || o == 0) return kNone;
    if (lent_ - returned_.load(std::memory_order_acquire) >= kSlots) return kNone;
    // Returns come back mostly in order, so the slot after the last one is nearly always free.
    for (uint32_t tries = 0; tries < kSlots; ++tries) {
      const uint32_t i = cursor_++ & (kSlots - 1);
      const uint64_t w = slot_[i].load(std::memory_order_acquire);
      if ((w & kOwnerMask) != 0) continue;
      const uint64_t gen = ((w >> kGenShift) + 1) & kGenMax;
      // Release: the returner that reads this word sees the buffer the owner points to.
      slot_[i].store(gen << kGenShift | o | (handed ? kHanded : 0), std::memory_order_release);
      ++lent_;
      return i | static_cast<uint32_t>(gen) << kIndexBits;
    }
    return kNone;
  }

  /** Returner (or reclaim): take loan @p id back. @return its owner, or nullptr (bad or
   *  stale id, already returned, or claimed). */
  void* take(uint32_t id) {
    uint64_t w = current(id);
    while (w != 0 && (w & kClaimed) == 0) {
      // Acq_rel: the buffer's bytes are the winner's from here on.
      if (slot_[id & (kSlots - 1)].compare_exchange_weak(w, w & ~kOwnerMask, std::memory_order_acq_rel)) {
        returned_.fetch_add(1, std::memory_order_release);
        return reinterpret_cast<void*>(w & kOwnerMask & ~kHanded);
      }
      w = (w >> kGenShift) == (id >> kIndexBits) && (w & kOwnerMask) != 0 ? w : 0;
    }
    return nullptr;
  }

  /** Returner (@p held_only false), or the lender taking back a loan it did not hand over
   *  (true): claim loan @p id of @p owner, the first step of a return. @return owner, or
   *  nullptr (bad, stale or foreign id, returned or claimed already). finish() ends it. */
  void* claim(uint32_t id, const void* owner, bool held_only) {
    uint64_t w = current(id);
    const auto o = reinterpret_cast<uint64_t>(owner);
    if (w == 0 || o == 0 || (w & kOwnerMask & ~kHanded) != o || (held_only && (w & kHanded))) return nullptr;
    // Acq_rel: the buffer's bytes are the claimer's from here on.
    return slot_[id & (kSlots - 1)].compare_exchange_strong(w, w | kClaimed, std::memory_order_acq_rel) ? const_cast<void*>(owner) : nullptr;
  }
  /** The claimer (or the reclaim, once the claimer died): end the return of loan @p id. */
  void finish(uint32_t id) {
    std::atomic<uint64_t>& s = slot_[id & (kSlots - 1)];
    s.store(s.load(std::memory_order_relaxed) & ~kOwnerMask, std::memory_order_release);
    returned_.fetch_add(1, std::memory_order_release);
  }
  /** @return true when loan @p id of @p owner is current and claimed (a return under way). */
  bool claimed(uint32_t id, const void* owner) const {
    const uint64_t w = current(id);
    return (w & kClaimed) != 0 && (w & kOwnerMask & ~kFlags) == reinterpret_cast<uint64_t>(owner);
  }

  /** Lender: mark loan @p id of @p owner handed over. @return false when @p id is stale, of
   *  another owner, or handed over already. */
  bool hand_over(uint32_t id, const void* owner) { return swap_flag(id, owner, 0, kHanded); }
  /** Lender: undo hand_over() when the hand-over failed (the returner never saw it). */
  void hand_back(uint32_t id, const void* owner) { swap_flag(id, owner, kHanded, 0); }

  /** @return the owner of loan @p id if it is current, else nullptr (validation). A claimed
   *  loan's has kClaimed set: it matches no owner. */
  void* peek(uint32_t id) const {
    const uint64_t w = current(id);
    return reinterpret_cast<void*>(w & kOwnerMask & ~kHanded);
  }
  /** @return true when loan @p id is current and handed over. */
  bool handed(uint32_t id) const { return (current(id) & kHanded) != 0; }

  /** @return buffers lent and not returned. */
  uint32_t outstanding() const { return lent_ - returned_.load(std::memory_order_acquire); }

  /** Control path, nobody else using the table: give every loan to @p free_fn (not claimed
   *  ones: their returns are settled from the journal). @return how many. */
  template <typename Fn>
  uint32_t reclaim(Fn&& free_fn) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < kSlots; ++i) {
      const uint64_t w = slot_[i].load(std::memory_order_acquire);
      if (void* o = take(i | static_cast<uint32_t>(w >> kGenShift) << kIndexBits)) free_fn(o), ++n;
    }
    return n;
  }

  /** Control path: an empty table. Generations go on, so ids from the slot's previous
   *  endpoint stay stale for the next one. */
  void reset() {
    for (auto& s : slot_) s.store(s.load(std::memory_order_relaxed) & ~kOwnerMask, std::memory_order_relaxed);
    lent_ = 0;
    cursor_ = 0;
    returned_.store(0, std::memory_order_release);
  }

 private:
  // A slot's word: generation in bits 63..48, the owner in bits 47..0 (zero: free), and
  // kHanded and kClaimed in bits 1 and 2 of the owner, which owners leave clear (8-byte aligned).
  static constexpr uint32_t kGenShift = 48;
  static constexpr uint64_t kGenMax = 0xffff;
  static constexpr uint64_t kOwnerMask = (uint64_t{1} << kGenShift) - 1;
  static constexpr uint64_t kHanded = 2;
  static constexpr uint64_t kClaimed = 4;
  static constexpr uint64_t kFlags = kHanded | kClaimed;
  static_assert(kIndexBits + 16 <= 31, "a loan id never equals kNone");

  /** @return slot @p id's word if @p id is current (its generation, a loan in it), else 0. */
  uint64_t current(uint32_t id) const {
    if (id >> kIndexBits > kGenMax) return 0;
    const uint64_t w = slot_[id & (kSlots - 1)].load(std::memory_order_acquire);
    return (w >> kGenShift) == (id >> kIndexBits) && (w & kOwnerMask) != 0 ? w : 0;
  }

  bool swap_flag(uint32_t id, const void* owner, uint64_t from, uint64_t to) {
    uint64_t w = current(id);
    if (w == 0 || reinterpret_cast<void*>(w & kOwnerMask & ~kHanded) != owner || (w & kHanded) != from) return false;
    return slot_[id & (kSlots - 1)].compare_exchange_strong(w, (w & ~kHanded) | to, std::memory_order_acq_rel);
  }

  std::atomic<uint64_t> slot_[kSlots];
  uint32_t lent_ = 0;    // lender only
  uint32_t cursor_ = 0;  // lender only
  alignas(64) std::atomic<uint32_t> returned_{0};
};

}  // namespace imago::api
