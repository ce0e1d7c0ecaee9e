/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What the primary shares with applications in one memzone: the nodes, the buffer pools,
 * and a fixed table of endpoint slots (rings, state, counters, loans). Secondary processes
 * find it by name; DPDK maps it at the same address everywhere, so pointers stored here
 * (rings, mempools) are valid in every process.
 *
 * Slot life: kFree -> kSetup (control fills it) -> kOpen (engine serves it) -> kClosing
 * (control asks) -> kDrained (engine let go) -> kFree (control reclaimed loans and rings).
 * Only the control path changes the table; the engine lcore notices through `generation`.
 */
#pragma once

#include <rte_mempool.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>

#include "api/buffers.h"
#include "dataplane/stats_board.h"
#include "api/loan.h"
#include "api/return_journal.h"

namespace imago::api {

inline constexpr char kShmName[] = "imago_shm";
inline constexpr uint32_t kShmMagic = 0x696d6167;  // "imag"
inline constexpr uint32_t kShmVersion = 19;
inline constexpr unsigned kMaxNodes = 4;
inline constexpr unsigned kMaxEndpoints = 32;
inline constexpr uint32_t kNameMax = 31;
inline constexpr uint32_t kFrameClass = 2048;
inline constexpr uint32_t kRingMin = 64, kRingMax = 4096, kRingDefault = 1024;

static_assert(PoolCaches::kOwners == kMaxNodes + kMaxEndpoints, "every owner of a cache is counted");

enum class SlotState : uint32_t { kFree, kSetup, kOpen, kClosing, kDrained };

/** A counter with one writer: a relaxed load and store, never a locked add. */
struct Counter {
  std::atomic<uint64_t> v{0};
  void add(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

/** Written by the engine lcore only. */
struct EngineSideCounters {
  Counter msgs_sent, bytes_sent, msgs_received, bytes_received;
  Counter tx_inline, tx_pool, tx_zero_copy, rx_inline, rx_pool, rx_mbuf, rx_rebuilt;
  Counter rx_ring_full, rx_no_buffer, tx_invalid;
  Counter rx_put;  ///< messages and events put on the rx ring (imago_poll() counts from it)
  // The peer node restarted or died: messages of this endpoint the engine dropped
  // unconfirmed (the last ones it took, always), and the latest such drop's range.
  Counter peer_resets, peer_deaths, msgs_unconfirmed;
  Counter last_unconfirmed_first, last_unconfirmed_count;
  Counter events, events_lost;  // group events put on the rx ring, and dropped (ring full)
  Counter group_members, group_view, group_pending;  // a SEND group endpoint's stream, now
};

/** A group slot's answer from the engine lcore (EndpointSlot::group_rc) before it is known. */
inline constexpr int32_t kGroupPending = 1;

struct alignas(64) EndpointSlot {
  std::atomic<SlotState> state{SlotState::kFree};
  uint32_t node_index = 0;
  uint64_t peer = 0;
  uint32_t hash = 0;  ///< tag of this endpoint's messages on the wire (from the name)
  int32_t pid = 0;    ///< owning process, watched for death
  uint32_t ring_size = 0;
  char name[kNameMax + 1] = {};
  rte_ring* rx = nullptr;  ///< engine -> application
  rte_ring* tx = nullptr;  ///< application -> engine
  /// Application -> engine: received mbufs the application released, for the engine to free
  /// into its own cache (freed straight to the pool's ring, first in first out, the engine's
  /// next frames would come from its far end, out of every cache); and pool buffers its full
  /// cache has no room for (tiers.cc, give_back()). Entries are loan owners (mbufs tagged).
  rte_ring* ret = nullptr;
  std::atomic<uint32_t> peer_ready{0};
  uint32_t group = 0;        ///< a group endpoint's group (peer 0), else 0
  uint32_t group_flags = 0;  ///< IMAGO_GROUP_* for a group endpoint, IMAGO_EP_* for the others
  uint32_t rx_inline = 0;    ///< medium deliveries inline in the rx ring (CtlMsg::rx_inline)
  /** @return whether this is an ordered group's endpoint (only those take pool buffers). */
  bool ordered() const { return group != 0 && rx_inline == 0; }
  std::atomic<int32_t> group_rc{0};  ///< the engine's answer to the group's open (kGroupPending until then)
  std::atomic<uint32_t> max_message{0};  ///< the largest message a send takes on this endpoint
  EngineSideCounters c;
  // Written by the application.
  alignas(64) Counter tx_ring_full;
  Counter release_invalid;  ///< stale, forged or foreign descriptors imago_release() refused
  Counter buffer_invalid;   ///< buffers imago_send_zc() / imago_buf_free() refused
  Counter rx_copy_full;     ///< receives stopped short: the receive area (rx_arena.h) all held
  Counter calls_busy;       ///< calls refused: another thread was inside one on the endpoint
  LoanTable rx_loans;                ///< lent by the engine, returned by the application
  LoanTable tx_loans;                ///< lent by the application, returned by the engine
  PoolCaches app_caches;             ///< the application's (made at open, freed at close or reclaim)
  ReturnJournal app_return;          ///< the application's buffer return under way (a kill half-way)
};

struct ShmRoot {
  uint32_t magic = 0;
  uint32_t version = 0;
  uint32_t n_nodes = 0;
  int32_t primary_pid = 0;  ///< the process that owns EAL and the engines (applications watch it)
  /** imagod is stopping: its applications' calls return -ENOTCONN as if it were gone (it
   *  leaves them the shared memory, unfreed, and exits). */
  std::atomic<uint32_t> primary_stopping{0};
  uint64_t node_ids[kMaxNodes] = {};
  rte_mempool* msg_pool = nullptr;    ///< pool tier: messages up to pool_max bytes
  rte_mempool* frame_pool = nullptr;  ///< up to kFrameClass bytes (about one frame's payload)
  rte_mempool* big_pool = nullptr;    ///< larger messages, up to max_message
  uint32_t pool_max = 0;
  uint32_t max_message = 0;
  std::atomic<uint32_t> generation{0};  ///< bumped by every slot state change
  // Where the three message pools' memory lies (control path fills it): an address the
  // application passes in is checked against it before imago reads anything near it.
  struct Range {
    uintptr_t lo, hi;
  };
  static constexpr unsigned kMaxRanges = 256;
  Range pool_mem[kMaxRanges] = {};
  uint32_t n_pool_mem = 0;
  Counter no_endpoint[kMaxNodes];       ///< messages for an endpoint not open here
  Counter closed_unsent[kMaxNodes];     ///< messages left on closed endpoints' tx rings, dropped
  Counter closed_unreceived[kMaxNodes]; ///< messages left on closed endpoints' rx rings, dropped
  PoolCaches engine_caches[kMaxNodes];  ///< each node's engine lcore's
  dp::StatsBoard boards[kMaxNodes];     ///< each node's engine, published by its lcore
  EndpointSlot slots[kMaxEndpoints];

  /** @return the index of node @p id, or -1. */
  int node_index(uint64_t id) const {
    for (uint32_t i = 0; i < n_nodes && i < kMaxNodes; ++i)
      if (node_ids[i] == id) return static_cast<int>(i);
    return -1;
  }
  /** @return true when [@p p, @p p + @p len) lies in one of the message pools' memory. */
  bool in_pools(const void* p, size_t len) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    for (uint32_t i = 0; i < n_pool_mem; ++i)
      if (a >= pool_mem[i].lo && a + len <= pool_mem[i].hi && a + len >= a) return true;
    return false;
  }
  /** @return the pool a message of @p len bytes is copied into. */
  rte_mempool* pool_for(uint32_t len) const {
    return len <= pool_max ? msg_pool : len <= kFrameClass ? frame_pool : big_pool;
  }
};

/** @return buffers of @p mp out of the pool and out of every owner's cache: held by rings,
 *  loans, the engines and the applications (statistics: reads caches racily). */
unsigned pool_in_use(const ShmRoot& shm, const rte_mempool* mp);

/** @return the wire tag of endpoint @p name: never 0, which is the control channel. */
uint32_t endpoint_hash(const char* name);

}  // namespace imago::api
