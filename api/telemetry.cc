// SPDX-License-Identifier: BSD-3-Clause
#include "api/telemetry.h"

#include <rte_ring.h>
#include <rte_telemetry.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "dataplane/telemetry.h"

namespace imago::api {
namespace {

// Under dp::TelemetryLock, as the dataplane's sources are.
const ShmRoot* g_shm = nullptr;
std::vector<rte_mempool*> g_mbuf_pools;

bool open_slot(const EndpointSlot& s) { return s.state.load(std::memory_order_acquire) == SlotState::kOpen; }

int cmd_endpoints(const char*, const char*, rte_tel_data* d) {
  rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
  dp::TelemetryLock hold;
  if (g_shm == nullptr) return 0;
  for (uint32_t i = 0; i < kMaxEndpoints; ++i)
    if (open_slot(g_shm->slots[i])) rte_tel_data_add_array_u64(d, i);
  return 0;
}

void add_slot(rte_tel_data* d, const ShmRoot& shm, uint32_t i) {
  const EndpointSlot& s = shm.slots[i];
  const EngineSideCounters& c = s.c;
  rte_tel_data_add_dict_u64(d, "slot", i);
  rte_tel_data_add_dict_string(d, "name", s.name);
  rte_tel_data_add_dict_u64(d, "node", s.node_index < kMaxNodes ? shm.node_ids[s.node_index] : 0);
  rte_tel_data_add_dict_u64(d, "peer", s.peer);
  rte_tel_data_add_dict_int(d, "pid", s.pid);
  rte_tel_data_add_dict_int(d, "peer_ready", static_cast<int>(s.peer_ready.load(std::memory_order_relaxed)));
  rte_tel_data_add_dict_u64(d, "ring_size", s.ring_size);
  rte_tel_data_add_dict_u64(d, "tx_ring_used", s.tx ? rte_ring_count(s.tx) : 0);
  rte_tel_data_add_dict_u64(d, "rx_ring_used", s.rx ? rte_ring_count(s.rx) : 0);
  rte_tel_data_add_dict_u64(d, "rx_held", s.rx_loans.outstanding());
  for (auto [k, v] : {std::pair{"msgs_sent", &c.msgs_sent}, {"bytes_sent", &c.bytes_sent},
                      {"msgs_received", &c.msgs_received}, {"bytes_received", &c.bytes_received},
                      {"tx_inline", &c.tx_inline}, {"tx_pool", &c.tx_pool}, {"tx_zero_copy", &c.tx_zero_copy},
                      {"rx_inline", &c.rx_inline}, {"rx_pool", &c.rx_pool}, {"rx_mbuf", &c.rx_mbuf},
                      {"rx_rebuilt", &c.rx_rebuilt},
                      {"rx_ring_full", &c.rx_ring_full}, {"rx_no_buffer", &c.rx_no_buffer},
                      {"tx_invalid", &c.tx_invalid}, {"peer_resets", &c.peer_resets},
                      {"peer_deaths", &c.peer_deaths}, {"msgs_unconfirmed", &c.msgs_unconfirmed},
                      {"last_unconfirmed_first", &c.last_unconfirmed_first},
                      {"last_unconfirmed_count", &c.last_unconfirmed_count}, {"events", &c.events},
                      {"events_lost", &c.events_lost}, {"group_members", &c.group_members},
                      {"group_view", &c.group_view}, {"group_pending", &c.group_pending},
                      {"tx_ring_full", &s.tx_ring_full}, {"release_invalid", &s.release_invalid},
                      {"buffer_invalid", &s.buffer_invalid}, {"rx_copy_full", &s.rx_copy_full},
                      {"calls_busy", &s.calls_busy}})
    rte_tel_data_add_dict_u64(d, k, v->get());
}

int cmd_endpoint(const char*, const char* params, rte_tel_data* d) {
  if (params == nullptr || *params == '\0') return -EINVAL;
  char* end = nullptr;
  const unsigned long i = std::strtoul(params, &end, 10);
  if (*end != '\0' || i >= kMaxEndpoints) return -EINVAL;
  dp::TelemetryLock hold;
  if (g_shm == nullptr || !open_slot(g_shm->slots[i])) return -ENOENT;
  rte_tel_data_start_dict(d);
  add_slot(d, *g_shm, static_cast<uint32_t>(i));
  return 0;
}

int cmd_pools(const char*, const char*, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  dp::TelemetryLock hold;
  if (g_shm == nullptr) return 0;
  const ShmRoot& shm = *g_shm;
  for (auto [name, mp] : {std::pair{"msgs", shm.msg_pool}, {"frames", shm.frame_pool}, {"big", shm.big_pool}}) {
    // in use: held by rings, engines and applications; free: in the pool; cached: in the
    // engines' and applications' own caches, neither.
    const unsigned in_use = pool_in_use(shm, mp), free = rte_mempool_avail_count(mp);
    const std::string n(name);
    rte_tel_data_add_dict_u64(d, (n + "_size").c_str(), mp->size);
    rte_tel_data_add_dict_u64(d, (n + "_in_use").c_str(), in_use);
    rte_tel_data_add_dict_u64(d, (n + "_free").c_str(), free);
    rte_tel_data_add_dict_u64(d, (n + "_cached").c_str(), mp->size > in_use + free ? mp->size - in_use - free : 0);
  }
  uint64_t size = 0, used = 0;
  for (rte_mempool* mp : g_mbuf_pools) size += mp->size, used += rte_mempool_in_use_count(mp);
  rte_tel_data_add_dict_u64(d, "mbufs_size", size);
  rte_tel_data_add_dict_u64(d, "mbufs_in_use", used);
  return 0;
}

}  // namespace

int telemetry_serve(const ShmRoot* shm, const std::vector<rte_mempool*>& mbuf_pools) {
  {
    dp::TelemetryLock hold;
    g_shm = shm;
    g_mbuf_pools = mbuf_pools;
  }
  static bool registered = false;
  if (registered) return 0;
  registered = true;
  if (int rc = dp::telemetry_add("/imago/endpoints", cmd_endpoints, "The open endpoints' slots. No parameters."); rc < 0)
    return rc;
  if (int rc = dp::telemetry_add("/imago/endpoint", cmd_endpoint,
                                 "One endpoint: name, node, peer, owner, rings, counters. Parameter: slot.");
      rc < 0)
    return rc;
  return dp::telemetry_add("/imago/pools", cmd_pools, "Message and mbuf pools: size and in use. No parameters.");
}

void telemetry_stop_serving() {
  dp::TelemetryLock hold;
  g_shm = nullptr;
  g_mbuf_pools.clear();
}

}  // namespace imago::api
