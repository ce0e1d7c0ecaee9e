/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The three buffer tiers of a message descriptor, in one place: how a message is described
 * for sending (by the application) and on receipt (by the engine), how a descriptor the other
 * side wrote is checked, and how each side gives back what a descriptor holds.
 *
 * Small messages travel inline in the descriptor; medium ones in a pool buffer; large
 * received ones stay in the frame's mbuf (Pupa's three tiers). Every buffer that crosses
 * between application and engine is recorded in one of the endpoint's loan tables (loan.h),
 * so a stale, forged or foreign descriptor frees nothing, and a process that dies holding
 * buffers is cleaned up by its slot's reclaim.
 *
 * Pool buffers keep kHeadroom bytes in front of the message: bytes 0..3 hold the loan id of
 * an application's zero-copy buffer, bytes 4..7 the endpoint tag the engine writes when it
 * sends the message (so the message is never copied to make room).
 */
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <span>

#include "api/handoff.h"
#include "api/imago_msg.h"
#include "api/rx_arena.h"
#include "api/shm.h"

namespace imago::api {

/** One side's view of an endpoint: the shared table, the slot and that side's caches. */
struct TierSide {
  const ShmRoot* shm;
  EndpointSlot* slot;
  const PoolCaches* caches;  ///< the calling thread's (an application's, an engine lcore's)
  RxArena* arena = nullptr;  ///< the application's receive area (IMAGO_TIER_COPY), if any
  /** Received pool buffers' data is where it was given (else anywhere in the buffer: an
   *  ordered group's messages start past their ordering header, and its drops do not). */
  bool exact_data = true;
};

/** The tier of a ring descriptor whose message goes on, inline, in the ring slots right
 *  after it (IMAGO_SEND_INLINE_MAX): internal to the rings (imago_recv_burst() turns it into
 *  IMAGO_TIER_COPY), never in a descriptor the application is given. */
inline constexpr uint8_t kTierRing = 4;

/** Ring slots after its descriptor that a kTierRing message of @p len bytes takes. */
constexpr unsigned ring_spill(uint32_t len) {
  return (len - IMAGO_MSG_INLINE_MAX + sizeof(imago_msg) - 1) / sizeof(imago_msg);
}
/** @return the tx ring slots a message of @p len bytes sent by copy takes. */
constexpr unsigned tx_slots(uint32_t len) {
  return len > IMAGO_MSG_INLINE_MAX && len <= IMAGO_SEND_INLINE_MAX ? 1 + ring_spill(len) : 1;
}
/** @return the slots after @p d that belong to it: nonzero only for a well-formed kTierRing. */
inline unsigned ring_spill_of(const imago_msg& d) {
  return d.tier == kTierRing && d.len > IMAGO_MSG_INLINE_MAX && d.len <= IMAGO_SEND_INLINE_MAX ? ring_spill(d.len) : 0;
}

/** Buffers of pool @p mp an application's send may not take: deliveries always find one
 *  (an eighth of the pool, at least one). */
inline unsigned send_reserve(const rte_mempool* mp) { return mp->size / 8 > 0 ? mp->size / 8 : 1; }

// --- the application's side ---

/** describe_send_copy() for a message above IMAGO_MSG_INLINE_MAX (out of line). */
int describe_send_pooled(const TierSide& t, uint64_t peer, const void* data, uint32_t len, uint16_t flags,
                         imago_msg& d);

/** Describe one message made of @p first then @p second, copied (inline when they fit, else
 *  in a pool buffer handed over). @return 0; -EAGAIN no pool buffer now. */
int describe_send_parts(const TierSide& t, uint64_t peer, std::span<const uint8_t> first,
                        std::span<const uint8_t> second, uint16_t flags, imago_msg& d);

/** Copy @p len <= IMAGO_MSG_INLINE_MAX bytes with fixed-size (overlapping) moves the compiler
 *  turns into a few loads and stores, instead of a call to memcpy for every small message. */
inline void copy_inline(uint8_t* to, const uint8_t* from, uint32_t len) {
  if (len >= 16) {
    std::memcpy(to, from, 16);
    if (len > 32) std::memcpy(to + 16, from + 16, 16);
    std::memcpy(to + len - 16, from + len - 16, 16);
  } else if (len >= 8) {
    std::memcpy(to, from, 8);
    std::memcpy(to + len - 8, from + len - 8, 8);
  } else if (len >= 4) {
    std::memcpy(to, from, 4);
    std::memcpy(to + len - 4, from + len - 4, 4);
  } else if (len > 0) {
    to[0] = from[0];
    to[len / 2] = from[len / 2];
    to[len - 1] = from[len - 1];
  }
}

/** Describe a message of at most IMAGO_MSG_INLINE_MAX bytes, or above IMAGO_SEND_INLINE_MAX,
 *  to send by copy into @p d (every field written: @p d may be ring memory). Inline here, on
 *  the hot path. @return 0; -EAGAIN no pool buffer now. */
inline int describe_send_copy(const TierSide& t, uint64_t peer, const void* data, uint32_t len, uint16_t flags,
                              imago_msg& d) {
  if (len > IMAGO_MSG_INLINE_MAX) [[unlikely]]
    return describe_send_pooled(t, peer, data, len, flags, d);
  d.src = peer;
  d.len = len;
  d.flags = flags;
  d.tier = IMAGO_TIER_INLINE;
  d.reserved = 0;
  copy_inline(d.u.inline_data, static_cast<const uint8_t*>(data), len);
  return 0;
}

/** Describe a message of IMAGO_MSG_INLINE_MAX < @p len <= IMAGO_SEND_INLINE_MAX bytes into
 *  @p d as kTierRing, its bytes going on into the tx_slots(@p len) - 1 slots after @p d
 *  (either ring: the application's sends, the engine's unicast deliveries). @p cont is where
 *  those slots are: nullptr when they follow @p d in memory, else each one's address. */
inline void describe_ring(uint64_t peer, const void* data, uint32_t len, uint16_t flags, imago_msg& d,
                               imago_msg* const* cont) {
  d.src = peer;
  d.len = len;
  d.flags = flags;
  d.tier = kTierRing;
  d.reserved = 0;
  const auto* from = static_cast<const uint8_t*>(data);
  if (cont == nullptr) {
    std::memcpy(d.u.inline_data, from, len);
    return;
  }
  std::memcpy(d.u.inline_data, from, IMAGO_MSG_INLINE_MAX);
  for (uint32_t at = IMAGO_MSG_INLINE_MAX, i = 0; at < len; at += sizeof(imago_msg), ++i)
    std::memcpy(cont[i], from + at, std::min<uint32_t>(sizeof(imago_msg), len - at));
}

/** @return true when the @p k slots after slot @p at of reservation @p z follow it in memory. */
inline bool ring_contiguous(const rte_ring_zc_data& z, unsigned at, unsigned k) { return at + k < z.n1 || at >= z.n1; }

/** describe_ring() into slot @p at of ring reservation @p z and the slots after it. */
inline void describe_ring_zc(const rte_ring_zc_data& z, unsigned at, uint64_t peer, const void* data, uint32_t len,
                             uint16_t flags) {
  const unsigned k = ring_spill(len);
  if (ring_contiguous(z, at, k)) return describe_ring(peer, data, len, flags, zc_slot(z, at), nullptr);
  imago_msg* cont[IMAGO_SEND_INLINE_MAX / sizeof(imago_msg)];
  for (unsigned i = 1; i <= k; ++i) cont[i - 1] = &zc_slot(z, at + i);
  describe_ring(peer, data, len, flags, zc_slot(z, at), cont);
}

/** Copy the bytes of the kTierRing message at slot @p at of reservation @p z to @p to: one
 *  span, whether or not the ring wraps inside it. */
inline void ring_gather(const rte_ring_zc_data& z, unsigned at, uint8_t* to) {
  const imago_msg& h = zc_slot(z, at);
  if (ring_contiguous(z, at, ring_spill(h.len))) return (void)std::memcpy(to, h.u.inline_data, h.len);
  std::memcpy(to, h.u.inline_data, IMAGO_MSG_INLINE_MAX);
  for (uint32_t off = IMAGO_MSG_INLINE_MAX, i = 1; off < h.len; off += sizeof(imago_msg), ++i)
    std::memcpy(to + off, &zc_slot(z, at + i), std::min<uint32_t>(sizeof(imago_msg), h.len - off));
}

/** A buffer of at least @p len bytes for a zero-copy send, lent to the engine but still the
 *  application's. @return it; nullptr with *err -EAGAIN (pool empty) or -ENOSPC (loans full). */
void* alloc_send_buffer(const TierSide& t, uint32_t len, int* err);

/** Hand the application's buffer @p buf over for sending @p len bytes, described in @p d.
 *  @return 0; -EINVAL not a buffer the application holds (foreign, freed, sent already);
 *  -EMSGSIZE @p len beyond it (the buffer stays the application's). After 0 the buffer is
 *  imago's; call undo_send_zc() if @p d is not sent. */
int describe_send_zc(const TierSide& t, void* buf, uint32_t len, uint16_t flags, imago_msg& d);
/** The descriptor of describe_send_zc() could not be queued: the buffer is the application's again. */
void undo_send_zc(const TierSide& t, const imago_msg& d);

/** Give back a buffer from alloc_send_buffer() that was not sent. @return 0 or -EINVAL. */
int free_send_buffer(const TierSide& t, void* buf);

/** What settle_return() found. */
enum class ReturnSettled { kNone, kPut, kCompleted, kUnknown };
/**
 * Control path, the application dead, before the loans are reclaimed and its caches freed:
 * finish the buffer return it was in the middle of (return_journal.h). kNone: none, or one
 * the loans' reclaim frees; kPut: the buffer was put now; kCompleted: its put was finished;
 * kUnknown: a put straight to a pool's ring (a pool without caches, the big one), which
 * cannot be told (the buffer is left).
 */
ReturnSettled settle_return(EndpointSlot& s);

/** Slots of an endpoint's return ring (EndpointSlot::ret). Whatever is on it was a loan, and
 *  the engine empties it before each delivery, so between two emptyings a loan slot (of
 *  LoanTable::kSlots, rx and tx) is given back at most twice: the ring holds that, and a
 *  release finds room while the engine runs (one that does not is put straight back). */
inline constexpr unsigned kReturnSlots = 65536;

/** Free what the application gave back on @p s's return ring (received mbufs, and buffers
 *  its full caches had no room for): on the engine lcore one burst, into its caches
 *  (@p engine, its PoolCaches), so its next frames are mbufs still in its caches; on the
 *  control path (the application gone, @p engine nullptr) all of it, straight to the pools.
 *  @return how many. */
unsigned free_returned(EndpointSlot& s, const PoolCaches* engine = nullptr);

/** Give back @p n received descriptors (each marked released). @return how many were
 *  refused: stale, forged, or lent by another endpoint. */
unsigned release_received(const TierSide& t, imago_msg* msgs, unsigned n);

// --- the engine's side ---

/** @return the bytes of a descriptor the application queued for sending, checked (tier,
 *  length, a loan it handed over); an empty span when it is malformed. For the pool tier
 *  the span starts kHeadroom bytes into the buffer, so @p tag_room bytes in front of it are
 *  writable. For kTierRing the span goes on past @p d: its ring_spill_of() slots must
 *  follow @p d in memory. */
std::span<const uint8_t> send_bytes(const EndpointSlot& s, const imago_msg& d);

/** The engine is done with a descriptor it took from the tx ring: free what it holds. */
void release_sent(const TierSide& t, const imago_msg& d);

/** Describe in @p d a received message of @p len bytes already in pool buffer @p obj (at
 *  kHeadroom), lending it to the application. @return 0, or -ENOSPC (loan table full; @p obj
 *  stays the caller's). */
int describe_pooled(const TierSide& t, uint64_t peer, void* obj, uint32_t len, imago_msg& d);
/** Describe the received message @p body into @p d: inline, zero-copy in @p frame (when the
 *  bytes lie in it, the message is above the pool tier and the endpoint holds fewer than
 *  @p mbuf_cap mbufs), or copied into a pool buffer (not of @p closed: deliveries hold
 *  their share of it). Counts the tier in the slot.
 *  @return 0; -ENOBUFS pool empty (or closed); -ENOSPC loans full; -EMSGSIZE larger than
 *  any buffer. */
int describe_received(const TierSide& t, uint64_t peer, std::span<const uint8_t> body, rte_mbuf* frame,
                      uint32_t mbuf_cap, imago_msg& d, const rte_mempool* closed = nullptr);

}  // namespace imago::api
