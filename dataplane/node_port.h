/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What every node is built from, whoever builds it (the library's runtime behind imagod and
 * imago_attach_embedded(), imago-perf): a port, its mbuf pool sized for the node's frames,
 * and the fault layer around it; and the incarnation its engine starts with. One builder, so
 * pool sizing, port opening, the MTU check, fault set-up and epochs are decided once.
 */
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>

#include "dataplane/fault.h"
#include "dataplane/port.h"
#include "reliability/config.h"

namespace imago::dp {

/** A node's port seen through the fault layer, with its mbuf pool. */
struct NodePort {
  Port port;
  FaultyPort faulty;
  rte_mempool* pool = nullptr;
  unsigned fenced = 0;  ///< mbufs of the pool a net_af_xdp port cannot use, never handed out (xdp_umem.h)
};

struct NodePortConfig {
  std::string pool_name;        ///< unique in the process
  PortConfig port;              ///< descriptors, MTU
  size_t max_frame = 1514;      ///< the largest frame sent or received: mbuf room; refused above the link's MTU
  unsigned burst = 32;          ///< frames per burst
  unsigned extra_mbufs = 0;     ///< held elsewhere (a ring pair, applications' zero-copy buffers)
  FaultConfig fault_tx, fault_rx;
  unsigned fault_capacity = 1024;  ///< frames each fault stage may hold
  uint32_t fault_offset = 0;       ///< bytes of encapsulation before the payload faults corrupt
};

/**
 * Create the pool, open the port, check @p c.max_frame against the link's MTU (a device
 * without one, net_ring, takes any), start the port and put the fault layer around it.
 * @return 0; -ENOMEM (pool), -EMSGSIZE (frame above the MTU, printed), or the port's errno.
 */
int node_port_open(NodePort& n, uint16_t port_id, const NodePortConfig& c);

/** (Re)build the fault layer of an open @p n. @return 0 or a negative errno. */
int node_port_faults(NodePort& n, const FaultConfig& tx, const FaultConfig& rx, uint32_t offset, unsigned capacity);

/** Release the fault layer, close the port, free the pool (idempotent). */
void node_port_close(NodePort& n);

/**
 * Give @p c the identity of a new incarnation of node @p id: node_id, an epoch from the wall
 * clock in milliseconds (a restart is a new session, even within the same second) and a
 * seed from the TSC. Control path.
 */
void stamp_incarnation(rel::Config& c, uint64_t id);

}  // namespace imago::dp
