/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An endpoint's receive area in the application's process: where imago_recv_burst() copies
 * a message that came inline in the rx ring's slots (49 to IMAGO_SEND_INLINE_MAX bytes), so
 * the descriptor the application holds points at memory nobody else writes
 * (IMAGO_TIER_COPY).
 *
 * The engine never sees it: no loans, no atomics, nothing to reclaim if the process dies.
 * Chunks are taken and given back in any order (a stack of free chunks, so the chunk just
 * given back, still in the cache, is the next one taken). Each chunk has a generation that
 * steps at every take and every give: an id is the chunk's index and its generation while
 * held, so a stale or forged descriptor gives back nothing.
 */
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "api/imago_msg.h"

namespace imago::api {

class RxArena {
 public:
  static constexpr uint32_t kChunk = (IMAGO_SEND_INLINE_MAX + 63) / 64 * 64;
  static constexpr uint32_t kMaxChunks = 1u << 16;

  /** Control path: room for @p chunks messages held at once (at most kMaxChunks).
   *  @return false when out of memory. */
  bool init(uint32_t chunks) {
    if (chunks == 0 || chunks > kMaxChunks) return false;
    mem_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, size_t{chunks} * kChunk)));
    free_.reset(new (std::nothrow) uint32_t[chunks]);
    gen_.reset(new (std::nothrow) uint16_t[chunks]());
    if (!mem_ || !free_ || !gen_) return false;
    n_ = n_free_ = chunks;
    for (uint32_t i = 0; i < chunks; ++i) free_[i] = chunks - 1 - i;  // chunk 0 first
    return true;
  }

  /** @return a free chunk of kChunk bytes and its id in *id, or nullptr when all are held. */
  uint8_t* take(uint32_t* id) {
    if (n_free_ == 0) return nullptr;
    const uint32_t i = free_[--n_free_];
    const uint16_t g = ++gen_[i];  // odd: held
    *id = i | uint32_t{g} << 16;
    return mem_.get() + size_t{i} * kChunk;
  }

  /** Give back chunk @p id whose bytes are at @p data. @return false (nothing given back)
   *  when @p id is not a chunk held now, or @p data is not its. */
  bool give(uint32_t id, const void* data) {
    const uint32_t i = id & 0xffff;
    if (i >= n_ || gen_[i] != id >> 16 || (gen_[i] & 1) == 0 || data != mem_.get() + size_t{i} * kChunk) return false;
    ++gen_[i];  // even: free
    free_[n_free_++] = i;
    return true;
  }

  /** @return the arena's memory (the descriptors' owner), nullptr before init(). */
  void* base() const { return mem_.get(); }
  uint32_t held() const { return n_ - n_free_; }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], FreeDeleter> mem_;
  std::unique_ptr<uint32_t[]> free_;
  std::unique_ptr<uint16_t[]> gen_;
  uint32_t n_ = 0, n_free_ = 0;
};

}  // namespace imago::api
