// SPDX-License-Identifier: BSD-3-Clause
// The buffer tiers: describe, check and give back, for both sides of an endpoint.
#include "api/tiers.h"

#include <cerrno>
#include <cstring>

namespace imago::api {

namespace {

uint32_t& loan_of(void* obj) { return *static_cast<uint32_t*>(obj); }  // headroom bytes 0..3

// A pool buffer for @p len bytes, lent to the engine (handed over already when @p handed: a
// copy about to go on the tx ring). @return it, or nullptr with *err -EAGAIN or -ENOSPC.
void* lend_tx_buffer(const TierSide& t, uint32_t len, bool handed, int* err) {
  rte_mempool* mp = t.shm->pool_for(len);
  // Senders and deliveries share the pools. A sender that took every buffer (they wait in
  // its tx ring while the engine's window is full) would starve the deliveries that free the
  // window: a deadlock. So applications leave the last send_reserve() buffers to the engines.
  if (rte_mempool_avail_count(mp) <= send_reserve(mp)) return *err = -EAGAIN, nullptr;
  // Before the get: a buffer put back to a pool without a cache would go to its shared ring.
  if (t.slot->tx_loans.outstanding() >= LoanTable::kSlots) return *err = -ENOSPC, nullptr;
  void* obj = buffer_get(mp, t.caches);
  if (obj == nullptr) return *err = -EAGAIN, nullptr;
  const uint32_t loan = t.slot->tx_loans.lend(obj, handed);
  if (loan != LoanTable::kNone) return loan_of(obj) = loan, obj;
  buffer_put(obj, t.caches);
  return *err = -ENOSPC, nullptr;
}

void head(imago_msg& d, uint64_t src, uint32_t len, uint16_t flags, uint8_t tier) {
  d.src = src;
  d.len = len;
  d.flags = flags;
  d.tier = tier;
  d.reserved = 0;
}

// @return the pool object behind @p buf if it is a buffer this endpoint lent, else nullptr.
void* own_buffer(const TierSide& t, void* buf) {
  // Only inside pool memory is it safe to read the loan id in front of the buffer. The
  // address is computed as an integer: a wild pointer must not be stepped back (that is UB).
  const auto addr = reinterpret_cast<uintptr_t>(buf);
  if (addr < kHeadroom) return nullptr;
  auto* obj = reinterpret_cast<uint8_t*>(addr - kHeadroom);
  if (!t.shm->in_pools(obj, kHeadroom)) return nullptr;
  return t.slot->tx_loans.peek(loan_of(obj)) == obj ? obj : nullptr;
}

bool inside(const rte_mbuf* m, const uint8_t* p, size_t len) {
  auto* first = static_cast<const uint8_t*>(m->buf_addr);
  return p >= first && p + len <= first + m->buf_len;
}

}  // namespace

int describe_send_pooled(const TierSide& t, uint64_t peer, const void* data, uint32_t len, uint16_t flags,
                         imago_msg& d) {
  return describe_send_parts(t, peer, {}, {static_cast<const uint8_t*>(data), len}, flags, d);
}

int describe_send_parts(const TierSide& t, uint64_t peer, std::span<const uint8_t> first,
                        std::span<const uint8_t> second, uint16_t flags, imago_msg& d) {
  const auto len = static_cast<uint32_t>(first.size() + second.size());
  uint8_t* to = d.u.inline_data;
  if (len <= IMAGO_MSG_INLINE_MAX) {
    head(d, peer, len, flags, IMAGO_TIER_INLINE);
  } else {
    int err;
    void* obj = lend_tx_buffer(t, len, true, &err);
    if (obj == nullptr) return -EAGAIN;
    to = static_cast<uint8_t*>(obj) + kHeadroom;
    head(d, peer, len, flags, IMAGO_TIER_POOL);
    d.u.ext = {to, obj, loan_of(obj)};
  }
  if (!first.empty()) std::memcpy(to, first.data(), first.size());
  if (!second.empty()) std::memcpy(to + first.size(), second.data(), second.size());
  return 0;
}

void* alloc_send_buffer(const TierSide& t, uint32_t len, int* err) {
  void* obj = lend_tx_buffer(t, len, false, err);
  return obj ? static_cast<uint8_t*>(obj) + kHeadroom : nullptr;
}

int describe_send_zc(const TierSide& t, void* buf, uint32_t len, uint16_t flags, imago_msg& d) {
  void* obj = own_buffer(t, buf);
  if (obj == nullptr) return -EINVAL;
  if (len > rte_mempool_from_obj(obj)->elt_size - kHeadroom) return -EMSGSIZE;  // the caller's mistake, not a bad buffer
  // From here the buffer is imago's: sending it again or freeing it is refused.
  if (!t.slot->tx_loans.hand_over(loan_of(obj), obj)) return -EINVAL;
  head(d, t.slot->peer, len, static_cast<uint16_t>(flags | IMAGO_MSG_F_ZERO_COPY), IMAGO_TIER_POOL);
  d.u.ext = {buf, obj, loan_of(obj)};
  return 0;
}

void undo_send_zc(const TierSide& t, const imago_msg& d) { t.slot->tx_loans.hand_back(d.u.ext.loan, d.u.ext.owner); }

namespace {
// A journal stage, written before what follows it in the code: a kill lands between
// instructions, so the compiler must not move the put's stores above it either.
void journal(ReturnJournal& j, uint32_t stage) {
  j.stage.store(stage, std::memory_order_release);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}
}  // namespace

// The application gives back loan @p id of @p owner (return_journal.h): journaled, so a kill
// half-way is finished by the reclaim. @p table 1: tx_loans, held only (not handed over).
// @return true when it was this endpoint's to give back (and now is the pool's).
bool give_back(const TierSide& t, uint32_t table, uint32_t id, void* owner) {
  ReturnJournal& j = t.slot->app_return;
  j.loan = id, j.table = table, j.obj = owner;
  journal(j, 1);
  LoanTable& loans = table ? t.slot->tx_loans : t.slot->rx_loans;
  if (loans.claim(id, owner, table != 0) == nullptr) {
    journal(j, 0);
    return false;
  }
  // Validated now: the buffer is a pool object (or a tagged mbuf) this endpoint lent. It goes
  // into the application's cache of its pool when that has room. Anything else goes back to
  // the engine to free (free_returned()): a received mbuf, a buffer whose cache is full (the
  // put would flush the cache to the pool's ring first) and one of a pool without caches (the
  // big one: the put would go to its ring). A kill inside a put to a pool's ring could not be
  // settled, and left the ring's producers waiting for it: the engine wedged (an outside
  // tester, 4 of 4 receivers of 9000 B messages killed mid-stream).
  rte_mempool_cache* c = is_mbuf_tag(owner) || t.caches == nullptr ? nullptr : t.caches->of(rte_mempool_from_obj(owner));
  if (c != nullptr && c->len >= c->flushthresh) c = nullptr;
  rte_ring* ret = c == nullptr ? t.slot->ret : nullptr;
  j.cache = c, j.len = ret ? ret->prod.head : c ? c->len : 0;
  journal(j, ret || c ? 2 : 3);
  if (c != nullptr) {
    put_loaned(owner, t.caches);
  } else if (ret == nullptr || rte_ring_sp_enqueue(ret, owner) != 0) {  // full (never while the engine runs): straight to the pool
    journal(j, 3);
    put_loaned(owner, nullptr);
  }
  loans.finish(id);
  journal(j, 0);
  return true;
}

namespace {

// A kill inside the enqueue of mbuf @p o on the return ring (single producer: the dead
// application), its head before in @p head: once the tail moved the engine may have freed it.
ReturnSettled settle_ring_put(rte_ring* r, uint32_t head, void* o) {
  if (r->prod.tail != head) return ReturnSettled::kCompleted;  // on the ring, or freed from it
  r->prod.head = r->prod.tail;  // a slot reserved, never published: nobody reads it
  put_loaned(o, nullptr);
  return ReturnSettled::kPut;
}

// A kill inside the put of @p o into cache @p c, whose length was @p len before.
ReturnSettled settle_cache_put(rte_mempool_cache* c, uint32_t len, void* o) {
  if (c->len == len) {  // not begun
    put_loaned(o, nullptr);
    return ReturnSettled::kPut;
  }
  if (c->len == len + 1) {  // the put raised the length: its pointer may not be written
    c->objs[len] = o;
    return ReturnSettled::kCompleted;
  }
  return ReturnSettled::kUnknown;  // never: a put that would flush is not made (give_back())
}

}  // namespace

ReturnSettled settle_return(EndpointSlot& s) {
  ReturnJournal& j = s.app_return;
  const uint32_t stage = j.stage.load(std::memory_order_acquire);
  if (stage == 0) return ReturnSettled::kNone;
  j.stage.store(0, std::memory_order_relaxed);
  LoanTable& loans = j.table ? s.tx_loans : s.rx_loans;
  // Not claimed: never taken (the loans' reclaim frees it), finished, or a stale or forged
  // descriptor's return that was refused.
  if (!loans.claimed(j.loan, j.obj)) return ReturnSettled::kNone;
  // The journal is the application's memory: only a cache of its own is read or written.
  const ReturnSettled r = stage == 1                         ? (put_loaned(j.obj, nullptr), ReturnSettled::kPut)
                          : stage == 3                       ? ReturnSettled::kUnknown  // straight to a pool's ring
                          : j.cache == nullptr && s.ret      ? settle_ring_put(s.ret, j.len, j.obj)
                          : s.app_caches.has(j.cache)        ? settle_cache_put(j.cache, j.len, j.obj)
                                                             : ReturnSettled::kUnknown;
  loans.finish(j.loan);  // settled, or left: never freed again by the loans' reclaim
  return r;
}

unsigned free_returned(EndpointSlot& s, const PoolCaches* engine) {
  if (s.ret == nullptr) return 0;
  void* o[64];
  rte_mbuf* m[64];
  unsigned total = 0, n;
  while ((n = rte_ring_sc_dequeue_burst(s.ret, o, 64, nullptr)) > 0) {
    total += n;
    unsigned k = 0;
    for (unsigned i = 0; i < n; ++i) {
      if (!is_mbuf_tag(o[i])) buffer_put(o[i], engine);  // a pool without the application's cache
      else if (engine != nullptr) m[k++] = untag_mbuf(o[i]);
      else mbuf_put(untag_mbuf(o[i]));
    }
    if (engine == nullptr) continue;
    rte_pktmbuf_free_bulk(m, k);  // into this lcore's mempool caches
    break;                        // one burst a poll
  }
  return total;
}

int free_send_buffer(const TierSide& t, void* buf) {
  void* obj = own_buffer(t, buf);
  if (obj == nullptr || !give_back(t, 1, loan_of(obj), obj)) return -EINVAL;  // not ours, or sent already
  return 0;
}

namespace {

// Received descriptor @p m is as it was given: its loan holds @p expect (validated first: only
// then is the buffer read), and its data is that buffer's (where a pool buffer's bytes begin,
// or inside the buffer, or the mbuf). A copy with its pointer moved would otherwise free
// what the genuine one holds.
bool lent_as_described(const TierSide& t, const imago_msg& m, void* expect) {
  if (t.slot->rx_loans.peek(m.u.ext.loan) != expect) return false;
  const auto* data = static_cast<const uint8_t*>(m.u.ext.data);
  if (m.tier == IMAGO_TIER_MBUF) return inside(static_cast<const rte_mbuf*>(m.u.ext.owner), data, m.len);
  const auto* first = static_cast<const uint8_t*>(expect) + kHeadroom;
  if (t.exact_data) return data == first;
  return data >= first && data + m.len <= first + (rte_mempool_from_obj(expect)->elt_size - kHeadroom);
}

}  // namespace

unsigned release_received(const TierSide& t, imago_msg* msgs, unsigned n) {
  unsigned refused = 0;
  for (unsigned i = 0; i < n; ++i) {
    imago_msg& m = msgs[i];
    if (m.tier == IMAGO_TIER_INLINE) continue;  // nothing held: the common, cheap case
    // Only what this endpoint lent, in this loan's generation, once. A descriptor refused is
    // left as it was: given to another endpoint by mistake, it is still the application's to
    // give back to its own (and its bytes still readable).
    bool ok;
    if (m.tier == IMAGO_TIER_COPY) {  // in the application's own receive area
      ok = t.arena != nullptr && m.u.ext.owner == t.arena->base() && t.arena->give(m.u.ext.loan, m.u.ext.data);
    } else {
      void* expect = m.tier == IMAGO_TIER_MBUF ? tag_mbuf(static_cast<rte_mbuf*>(m.u.ext.owner)) : m.u.ext.owner;
      ok = m.tier <= IMAGO_TIER_MBUF && expect != nullptr && lent_as_described(t, m, expect) &&
           give_back(t, 0, m.u.ext.loan, expect);
    }
    if (ok)
      m.tier = IMAGO_TIER_INLINE;
    else
      ++refused;
  }
  return refused;
}

std::span<const uint8_t> send_bytes(const EndpointSlot& s, const imago_msg& d) {
  if (d.tier == IMAGO_TIER_INLINE) {
    if (d.len > IMAGO_MSG_INLINE_MAX) return {};
    return {d.u.inline_data, d.len};
  }
  if (d.tier == kTierRing) {
    if (ring_spill_of(d) == 0) return {};
    return {d.u.inline_data, d.len};
  }
  if (d.tier != IMAGO_TIER_POOL) return {};
  // Only a loan the application handed over (a copy, or a zero-copy buffer it sent).
  void* owner = s.tx_loans.peek(d.u.ext.loan);
  if (owner == nullptr || owner != d.u.ext.owner || is_mbuf_tag(owner) || !s.tx_loans.handed(d.u.ext.loan)) return {};
  auto* data = static_cast<uint8_t*>(owner) + kHeadroom;
  if (d.u.ext.data != data || d.len > rte_mempool_from_obj(owner)->elt_size - kHeadroom) return {};
  return {data, d.len};
}

void release_sent(const TierSide& t, const imago_msg& d) {
  if (d.tier != IMAGO_TIER_POOL) return;  // nothing lent
  if (void* o = t.slot->tx_loans.take(d.u.ext.loan)) put_loaned(o, t.caches);
}

int describe_received(const TierSide& t, uint64_t peer, std::span<const uint8_t> body, rte_mbuf* frame,
                      uint32_t mbuf_cap, imago_msg& d, const rte_mempool* closed) {
  EndpointSlot& s = *t.slot;
  const auto len = static_cast<uint32_t>(body.size());
  if (len <= IMAGO_MSG_INLINE_MAX) {
    head(d, peer, len, 0, IMAGO_TIER_INLINE);
    std::memcpy(d.u.inline_data, body.data(), len);
    s.c.rx_inline.add();
    return 0;
  }
  if (len > t.shm->pool_max && frame != nullptr && inside(frame, body.data(), len) &&
      s.rx_loans.outstanding() < mbuf_cap) {
    const uint32_t loan = s.rx_loans.lend(tag_mbuf(frame));
    if (loan == LoanTable::kNone) return -ENOSPC;
    rte_mbuf_refcnt_update(frame, 1);  // the application's reference, dropped by release
    head(d, peer, len, 0, IMAGO_TIER_MBUF);
    d.u.ext = {const_cast<uint8_t*>(body.data()), frame, loan};
    s.c.rx_mbuf.add();
    return 0;
  }
  rte_mempool* mp = t.shm->pool_for(len);
  if (len > mp->elt_size - kHeadroom) return -EMSGSIZE;
  if (mp == closed) return -ENOBUFS;
  void* obj = buffer_get(mp, t.caches);
  if (obj == nullptr) return -ENOBUFS;
  std::memcpy(static_cast<uint8_t*>(obj) + kHeadroom, body.data(), len);
  const int rc = describe_pooled(t, peer, obj, len, d);
  if (rc < 0) buffer_put(obj, t.caches);
  return rc;
}

int describe_pooled(const TierSide& t, uint64_t peer, void* obj, uint32_t len, imago_msg& d) {
  EndpointSlot& s = *t.slot;
  const uint32_t loan = s.rx_loans.lend(obj);
  if (loan == LoanTable::kNone) return -ENOSPC;
  head(d, peer, len, 0, IMAGO_TIER_POOL);
  d.u.ext = {static_cast<uint8_t*>(obj) + kHeadroom, obj, loan};
  s.c.rx_pool.add();
  return 0;
}

}  // namespace imago::api
