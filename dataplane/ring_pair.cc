// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/ring_pair.h"

#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_lcore.h>

#include "dataplane/log.h"

namespace imago::dp {

int create_ring_pair(const std::string& name, unsigned ring_size, RingPair& out) {
  int socket = static_cast<int>(rte_socket_id());
  unsigned flags = RING_F_SP_ENQ | RING_F_SC_DEQ;
  out.a_to_b = rte_ring_create((name + "_ab").c_str(), ring_size, socket, flags);
  out.b_to_a = rte_ring_create((name + "_ba").c_str(), ring_size, socket, flags);
  if (!out.a_to_b || !out.b_to_a) {
    int err = rte_errno;
    IMAGO_LOG(ERR, dataplane, "ring pair %s: ring create: %s\n", name.c_str(), rte_strerror(err));
    destroy_ring_pair(out);
    return -err;
  }
  int a = rte_eth_from_rings((name + "_a").c_str(), &out.b_to_a, 1, &out.a_to_b, 1, socket);
  int b = a < 0 ? -1 : rte_eth_from_rings((name + "_b").c_str(), &out.a_to_b, 1, &out.b_to_a, 1, socket);
  if (a < 0 || b < 0) {
    int err = rte_errno ? rte_errno : EINVAL;
    IMAGO_LOG(ERR, dataplane, "ring pair %s: net_ring port: %s\n", name.c_str(), rte_strerror(err));
    destroy_ring_pair(out);
    return -err;
  }
  out.port_a = static_cast<uint16_t>(a);
  out.port_b = static_cast<uint16_t>(b);
  return 0;
}

void destroy_ring_pair(RingPair& pair) {
  rte_ring_free(pair.a_to_b);
  rte_ring_free(pair.b_to_a);
  pair.a_to_b = pair.b_to_a = nullptr;
}

}  // namespace imago::dp
