// SPDX-License-Identifier: BSD-3-Clause
// An application killed in the middle of giving a buffer back (api/return_journal.h): at each
// point the kill can land, the primary's reclaim (settle_return, the loans' reclaim, the
// caches' flush) brings the pool back to exactly its size: no buffer lost, none twice.
#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <memory>
#include <set>
#include <vector>

#include "api/tiers.h"

namespace imago::api {
namespace {

struct Rig {
  rte_mempool* mp = rte_mempool_create("journal_test", 255, 256, 0, 0, nullptr, nullptr, nullptr, nullptr,
                                       SOCKET_ID_ANY, 0);
  std::unique_ptr<EndpointSlot> slot = std::make_unique<EndpointSlot>();
  PoolCaches& pc = slot->app_caches;  // the application's caches, as imago.h's side() gives them
  ShmRoot* shm = nullptr;  // the tiers' return path does not read it

  Rig() {
    pc.pool[0] = mp;
    pc.cache[0] = rte_mempool_cache_create(32, SOCKET_ID_ANY);
    slot->ret = rte_ring_create("journal_pool_ret", kReturnSlots, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  }
  ~Rig() {
    if (pc.cache[0] != nullptr) rte_mempool_cache_free(pc.cache[0]);
    rte_ring_free(slot->ret);
    rte_mempool_free(mp);
  }
  TierSide side() { return {shm, slot.get(), &pc}; }
  /** A buffer lent to the application: @return its loan id in *id. */
  void* lend(uint32_t* id) {
    void* o = nullptr;
    EXPECT_EQ(rte_mempool_get(mp, &o), 0);
    *id = slot->rx_loans.lend(o);
    return o;
  }
  /** A buffer lent, and the application's return of it begun (journal stage 1): the kill
   *  comes next. @return the buffer, its loan id in *id. */
  void* lend_and_name(uint32_t* id) {
    void* o = lend(id);
    slot->app_return.loan = *id, slot->app_return.obj = o;
    slot->app_return.stage.store(1);
    return o;
  }
  /** The claim of loan @p id of @p o won and stage 2 was written: the put comes next. */
  void take_and_record(uint32_t id, void* o) {
    ASSERT_EQ(slot->rx_loans.claim(id, o, false), o);
    ReturnJournal& j = slot->app_return;
    j.cache = pc.cache[0], j.len = pc.cache[0]->len, j.stage.store(2);
  }
  /** A buffer lent and given back by an ordinary return. @return it, its loan id in *id. */
  void* lend_and_return(uint32_t* id);
  /** What the primary does once the application is dead. */
  ReturnSettled reclaim() {
    const ReturnSettled r = settle_return(*slot);
    slot->rx_loans.reclaim(put_loaned_uncached);
    pool_caches_free(pc);
    free_returned(*slot);
    return r;
  }
  unsigned avail() const { return rte_mempool_avail_count(mp); }
  /** @return true when the pool holds all its 255 buffers, each once, @p o among them. */
  bool whole(void* o) {
    void* all[255];
    if (avail() != 255 || rte_mempool_get_bulk(mp, all, 255) != 0) return false;
    std::set<void*> seen(all, all + 255);
    rte_mempool_put_bulk(mp, all, 255);
    return seen.size() == 255 && seen.count(o) == 1;
  }
};

imago_msg received(void* o, uint32_t id) {
  imago_msg m{};
  m.tier = IMAGO_TIER_POOL, m.len = 1;
  m.u.ext = {static_cast<uint8_t*>(o) + kHeadroom, o, id};  // where its bytes are
  return m;
}

void* Rig::lend_and_return(uint32_t* id) {
  void* o = lend(id);
  imago_msg m = received(o, *id);
  EXPECT_EQ(release_received(side(), &m, 1), 0u);
  return o;
}

TEST(ReturnJournal, KilledBeforeTheSwapTheLoansReclaimFreesIt) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  uint32_t id;
  void* o = r.lend_and_name(&id);  // named, not yet taken
  EXPECT_EQ(r.reclaim(), ReturnSettled::kNone);
  EXPECT_TRUE(r.whole(o));
}

TEST(ReturnJournal, KilledAfterTheSwapBeforeThePutItIsPut) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  uint32_t id;
  void* o = r.lend_and_name(&id);
  r.take_and_record(id, o);  // then the kill
  EXPECT_EQ(r.reclaim(), ReturnSettled::kPut);
  EXPECT_TRUE(r.whole(o));
}

TEST(ReturnJournal, KilledRightAfterTheClaimItIsPut) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  uint32_t id;
  void* o = r.lend_and_name(&id);
  ASSERT_EQ(r.slot->rx_loans.claim(id, o, false), o);  // then the kill, before stage 2
  EXPECT_EQ(r.reclaim(), ReturnSettled::kPut);
  EXPECT_TRUE(r.whole(o));
}

TEST(ReturnJournal, AStaleDescriptorsJournalNeverFreesAnothersBuffer) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  // A buffer lent and given back (into the cache), its descriptor kept and released again:
  // the killed application had named the stale loan when it died.
  uint32_t id;
  void* o = r.lend_and_return(&id);
  ReturnJournal& j = r.slot->app_return;
  j.loan = id, j.obj = o, j.stage.store(1);
  EXPECT_EQ(r.reclaim(), ReturnSettled::kNone);
  EXPECT_TRUE(r.whole(o)) << "the buffer was put twice";
}

TEST(ReturnJournal, KilledInsideTheCachePutItIsCompletedNotDoubled) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  // Some buffers go through the application's cache first (a stale pointer stays in its array).
  imago_msg m[4];
  for (imago_msg& x : m) {
    uint32_t id;
    void* o = r.lend(&id);
    x = received(o, id);
  }
  ASSERT_EQ(release_received(r.side(), m, 2), 0u);  // two in the cache
  void* stale = nullptr;
  ASSERT_EQ(rte_mempool_generic_get(r.mp, &stale, 1, r.pc.cache[0]), 0);  // one out again: its pointer stays
  uint32_t id;
  void* o = r.lend_and_name(&id);
  r.take_and_record(id, o);
  ++r.pc.cache[0]->len;  // DPDK's put raised the length; the kill came before the pointer
  EXPECT_EQ(r.reclaim(), ReturnSettled::kCompleted);  // m[2] and m[3] come back with the loans
  rte_mempool_put(r.mp, stale);  // whoever held it gives it back
  EXPECT_TRUE(r.whole(o)) << "a buffer lost, or in the pool twice";
}

TEST(ReturnJournal, AReturnIntoAFullCacheGoesToTheEngineNotThroughAFlush) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  ASSERT_NE(r.slot->ret, nullptr);
  rte_mempool_cache* c = r.pc.cache[0];
  std::vector<imago_msg> m(c->flushthresh + 1);
  for (imago_msg& x : m) {
    uint32_t id;
    void* o = r.lend(&id);
    x = received(o, id);
  }
  // The cache fills to its threshold; the next return would flush it to the pool's ring (a
  // kill inside that could not be settled), so it goes on the return ring instead.
  ASSERT_EQ(release_received(r.side(), m.data(), c->flushthresh), 0u);
  ASSERT_EQ(c->len, c->flushthresh);
  ASSERT_EQ(release_received(r.side(), &m.back(), 1), 0u);
  EXPECT_EQ(c->len, c->flushthresh);
  EXPECT_EQ(rte_ring_count(r.slot->ret), 1u);
  EXPECT_EQ(r.reclaim(), ReturnSettled::kNone);
  EXPECT_EQ(r.avail(), 255u);
}

// A pool too small for caches (the big one): a return would be a put to the pool's ring, which
// a kill inside leaves waiting for ever (every later put spins on it: the engine wedged, an
// outside tester); it goes on the return ring, for the engine to free.
TEST(ReturnJournal, AReturnToAPoolWithoutACacheGoesToTheEngineNotToTheRing) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  rte_mempool_cache_free(r.pc.cache[0]);
  r.pc.cache[0] = nullptr;
  uint32_t id;
  void* o = r.lend(&id);
  imago_msg m = received(o, id);
  const unsigned before = r.avail();
  ASSERT_EQ(release_received(r.side(), &m, 1), 0u);
  EXPECT_EQ(r.avail(), before) << "put to the pool's ring by the application";
  EXPECT_EQ(rte_ring_count(r.slot->ret), 1u);
  EXPECT_EQ(r.reclaim(), ReturnSettled::kNone);
  EXPECT_EQ(r.avail(), 255u);
}

TEST(ReturnJournal, KilledInsideTheReturnRingPutOfAPoolBufferItIsPut) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  uint32_t id;
  void* o = r.lend_and_name(&id);
  ASSERT_EQ(r.slot->rx_loans.claim(id, o, false), o);
  ReturnJournal& j = r.slot->app_return;
  j.cache = nullptr, j.len = r.slot->ret->prod.head, j.stage.store(2);  // then the kill, before the enqueue
  EXPECT_EQ(r.reclaim(), ReturnSettled::kPut);
  EXPECT_TRUE(r.whole(o));
}

TEST(ReturnJournal, AJournalNamingAnotherCacheIsLeftAndTheCacheUntouched) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  rte_mempool_cache* other = rte_mempool_cache_create(32, SOCKET_ID_ANY);
  ASSERT_NE(other, nullptr);
  uint32_t id;
  void* o = r.lend_and_name(&id);
  r.take_and_record(id, o);
  // Do: the journal (the application's memory) names a cache that is not the endpoint's,
  // with a length whose next (0, wrapped) matches it: a completion would write at objs[2^32 - 1].
  // Expect: left, and nothing written there.
  ReturnJournal& j = r.slot->app_return;
  j.cache = other, j.len = UINT32_MAX;
  EXPECT_EQ(r.reclaim(), ReturnSettled::kUnknown);
  EXPECT_EQ(other->len, 0u);
  rte_mempool_cache_free(other);
}

TEST(ReturnJournal, AnOrdinaryReturnLeavesNothingToSettle) {
  Rig r;
  ASSERT_NE(r.mp, nullptr);
  uint32_t id;
  void* o = r.lend_and_return(&id);
  EXPECT_EQ(r.slot->app_return.stage.load(), 0u);
  EXPECT_EQ(r.reclaim(), ReturnSettled::kNone);
  EXPECT_TRUE(r.whole(o));
}

// Received mbufs go back on the endpoint's return ring (single producer: the application).
struct MbufRig {
  rte_mempool* mp = rte_pktmbuf_pool_create("journal_mbufs", 63, 0, 0, 128, SOCKET_ID_ANY);
  std::unique_ptr<EndpointSlot> slot = std::make_unique<EndpointSlot>();

  MbufRig() {
    slot->ret = rte_ring_create("journal_ret", kReturnSlots, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  }
  ~MbufRig() {
    rte_ring_free(slot->ret);
    rte_mempool_free(mp);
  }
  /** An mbuf lent to the application, its return begun and claimed: @return its tag, the loan in *id. */
  void* lend_and_claim(uint32_t* id) {
    rte_mbuf* m = rte_pktmbuf_alloc(mp);
    EXPECT_NE(m, nullptr);
    void* o = tag_mbuf(m);
    *id = slot->rx_loans.lend(o);
    ReturnJournal& j = slot->app_return;
    j.loan = *id, j.table = 0, j.obj = o, j.stage.store(1);
    EXPECT_EQ(slot->rx_loans.claim(*id, o, false), o);
    j.cache = nullptr, j.len = slot->ret->prod.head, j.stage.store(2);
    return o;
  }
  /** The primary, the application dead: settle, reclaim the loans, free the return ring. */
  ReturnSettled reclaim() {
    const ReturnSettled r = settle_return(*slot);
    slot->rx_loans.reclaim(put_loaned_uncached);
    free_returned(*slot);
    return r;
  }
};

// An mbuf lent, its return begun and claimed (stage 2 written): the kill comes next.
class MbufReturn : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(r.mp, nullptr);
    ASSERT_NE(r.slot->ret, nullptr);
    o = r.lend_and_claim(&id);
  }
  MbufRig r;
  uint32_t id = 0;
  void* o = nullptr;
};

TEST_F(MbufReturn, KilledBeforeTheReturnRingItIsFreedOnce) {
  EXPECT_EQ(r.reclaim(), ReturnSettled::kPut);
  EXPECT_EQ(rte_mempool_avail_count(r.mp), 63u);
}

TEST_F(MbufReturn, KilledInsideTheRingEnqueueItIsFreedOnceAndTheRingStaysUsable) {
  rte_ring* ring = r.slot->ret;
  ring->prod.head = ring->prod.head + 1;  // the slot reserved (and maybe written), the tail not moved
  static_cast<void**>(static_cast<void*>(&ring[1]))[ring->prod.tail & ring->mask] = o;
  EXPECT_EQ(r.reclaim(), ReturnSettled::kPut);
  EXPECT_EQ(rte_mempool_avail_count(r.mp), 63u);
  EXPECT_EQ(ring->prod.head, ring->prod.tail);
  rte_mbuf* m = rte_pktmbuf_alloc(r.mp);
  EXPECT_EQ(rte_ring_sp_enqueue(ring, tag_mbuf(m)), 0);  // the next endpoint's returns go on
  EXPECT_EQ(free_returned(*r.slot), 1u);
  EXPECT_EQ(rte_mempool_avail_count(r.mp), 63u);
}

TEST_F(MbufReturn, KilledAfterTheRingEnqueueItIsFreedFromTheRingOnce) {
  ASSERT_EQ(rte_ring_sp_enqueue(r.slot->ret, o), 0);  // then the kill, before the finish
  EXPECT_EQ(r.reclaim(), ReturnSettled::kCompleted);
  EXPECT_EQ(rte_mempool_avail_count(r.mp), 63u);
}

}  // namespace
}  // namespace imago::api
