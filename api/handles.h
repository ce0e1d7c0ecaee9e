/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Handles the application holds (imago_t*, imago_ep_t*) are not pointers to our objects but
 * a table index and that entry's generation, so a handle used after close or detach, twice
 * closed, or forged is recognised and refused (-EINVAL) instead of touching freed memory.
 *
 * The table is per process and fixed in size; its objects are never freed, only retired (the
 * generation moves on). add() and remove() are the control path (serialised by the caller);
 * get() is the hot path: an index check and one acquire load.
 */
#pragma once

#include <atomic>
#include <cstdint>

namespace imago::api {

template <typename T, unsigned N>
class HandleTable {
  static_assert(N < 0xffff, "indexes fit the low 16 bits of a handle");

 public:
  /** Control path: a free entry, set up by @p init(T&). @return its handle, or 0 (full). */
  template <typename Init>
  uintptr_t add(Init&& init) {
    for (unsigned i = 0; i < N; ++i) {
      Entry& e = e_[i];
      if (e.live) continue;
      init(e.obj);
      e.live = true;
      const uint32_t gen = e.gen.load(std::memory_order_relaxed);
      return static_cast<uintptr_t>(gen) << 16 | (i + 1);
    }
    return 0;
  }

  /** @return the object of handle @p h, or nullptr when @p h is not a live handle. */
  T* get(uintptr_t h) {
    const uintptr_t i = (h & 0xffff) - 1;
    if (i >= N) return nullptr;
    Entry& e = e_[i];
    // Acquire: pairs with remove()'s release; a retired handle never matches again.
    return (h >> 16) == e.gen.load(std::memory_order_acquire) && e.live ? &e.obj : nullptr;
  }

  /** Control path: retire handle @p h (its generation moves on). @return false if not live. */
  bool remove(uintptr_t h) {
    if (get(h) == nullptr) return false;
    Entry& e = e_[(h & 0xffff) - 1];
    e.live = false;
    e.gen.store((e.gen.load(std::memory_order_relaxed) + 1) & kGenMask, std::memory_order_release);
    return true;
  }

  /** Control path: call @p fn(handle) for every live entry. */
  template <typename Fn>
  void for_each(Fn&& fn) {
    for (unsigned i = 0; i < N; ++i)
      if (e_[i].live) fn(static_cast<uintptr_t>(e_[i].gen.load(std::memory_order_relaxed)) << 16 | (i + 1));
  }

 private:
  // Generations start at 1 and stay below 2^31: a handle is never null nor a small integer.
  static constexpr uint32_t kGenMask = 0x7fffffff;
  struct Entry {
    T obj{};
    bool live = false;
    std::atomic<uint32_t> gen{1};
  };
  Entry e_[N];
};

}  // namespace imago::api
