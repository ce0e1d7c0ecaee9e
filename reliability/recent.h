/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A value kept per key for the last few keys put, in a fixed array (no allocation): the
 * oldest entry is overwritten. For small memories of rare control-path events (where a freed
 * group stream ended; which port a refused circuit set-up left by).
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace imago::rel {

template <typename K, typename V, size_t N>
class Recent {
 public:
  /** @return the value kept for @p k, or nullptr. */
  const V* find(K k) const {
    for (const Entry& e : e_)
      if (e.used && e.key == k) return &e.value;
    return nullptr;
  }
  /** Keep @p v for @p k: in place of what was kept for it, else of the oldest entry. */
  void put(K k, V v) {
    Entry* e = entry(k);
    if (e == nullptr) e = &e_[next_++ % N];
    *e = {true, k, v};
  }
  void erase(K k) {
    if (Entry* e = entry(k)) e->used = false;
  }

 private:
  struct Entry {
    bool used = false;
    K key{};
    V value{};
  };
  Entry* entry(K k) {
    for (Entry& e : e_)
      if (e.used && e.key == k) return &e;
    return nullptr;
  }
  Entry e_[N] = {};
  uint32_t next_ = 0;
};

}  // namespace imago::rel
