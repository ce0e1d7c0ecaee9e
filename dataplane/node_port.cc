// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/node_port.h"

#include <rte_cycles.h>
#include <rte_lcore.h>

#include <cerrno>
#include <cstdio>
#include <ctime>

#include "dataplane/encap_headers.h"
#include "dataplane/log.h"
#include "dataplane/xdp_umem.h"
#include "reliability/epoch.h"

namespace imago::dp {

int node_port_open(NodePort& n, uint16_t port_id, const NodePortConfig& c) {
  // Held besides the descriptors: each fault stage's queue, what the caller holds elsewhere.
  const unsigned extra = 4 * c.fault_capacity + 4 * c.burst + c.extra_mbufs;
  const unsigned count = mbufs_needed(c.port, rte_lcore_count(), c.burst, 256, extra);
  const bool xdp = port_driver(port_id) == "net_af_xdp";
  n.pool = create_mbuf_pool(c.pool_name, count, mbuf_room_for(c.max_frame), rte_socket_id(), xdp && xdp_pool_packed());
  if (n.pool == nullptr) return -ENOMEM;
  if (xdp) n.fenced = fence_outside_xdp_umem(n.pool);
  if (n.fenced != 0)
    IMAGO_LOG(NOTICE, dataplane, "port %u: %u of %u mbufs lie outside net_af_xdp's UMEM: never used\n", port_id,
              n.fenced, count);
  if (int rc = n.port.open(port_id, c.port, n.pool); rc < 0) return rc;
  // Only a device with a real MTU (not net_ring) limits the frames.
  if (const uint32_t mtu = n.port.link_mtu(); mtu != 0 && c.max_frame > size_t{mtu} + sizeof(EthHdr)) {
    std::fprintf(stderr, "imago: %zu-byte frames exceed port %u's MTU %u (less --mtu or --size, or raise the "
                 "interface's MTU)\n", c.max_frame, port_id, mtu);
    return -EMSGSIZE;
  }
  if (const uint32_t room = n.port.ring_frame_limit(); room != 0 && c.max_frame > room) {
    std::fprintf(stderr, "imago: %zu-byte frames do not fit port %u's net_af_packet ring frames (%u bytes of "
                 "frame each: its framesz devarg, 2048 by default): give its vdev blocksz and framesz, e.g. "
                 "net_af_packet0,iface=NAME,blocksz=36864,framesz=9216, or less --mtu\n", c.max_frame, port_id, room);
    return -EMSGSIZE;
  }
  if (int rc = n.port.start(); rc < 0) return rc;
  return node_port_faults(n, c.fault_tx, c.fault_rx, c.fault_offset, c.fault_capacity);
}

int node_port_faults(NodePort& n, const FaultConfig& tx, const FaultConfig& rx, uint32_t offset, unsigned capacity) {
  n.faulty.release();
  return n.faulty.init(n.port.id(), 0, tx, rx, n.pool, offset, capacity);
}

void node_port_close(NodePort& n) {
  n.faulty.release();
  n.port.close();
  rte_mempool_free(n.pool);
  n.pool = nullptr;
  n.fenced = 0;
}

void stamp_incarnation(rel::Config& c, uint64_t id) {
  c.node_id = static_cast<rel::NodeId>(id);
  std::timespec wall{};
  std::timespec_get(&wall, TIME_UTC);
  c.epoch = rel::make_epoch(uint64_t(wall.tv_sec) * 1'000'000'000u + uint64_t(wall.tv_nsec), rte_rdtsc());
  c.seed = rte_rdtsc() ^ (id << 56);
}

}  // namespace imago::dp
