/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A virtual link inside one process: two net_ring ethdev ports whose rings are crossed, so
 * what port A transmits port B receives and back. The embedded default's "wire".
 */
#pragma once

#include <rte_ring.h>

#include <cstdint>
#include <string>

namespace imago::dp {

struct RingPair {
  uint16_t port_a = 0;
  uint16_t port_b = 0;
  rte_ring* a_to_b = nullptr;
  rte_ring* b_to_a = nullptr;
};

/**
 * Create the two rings (@p ring_size slots each, single producer and consumer) and the two
 * ports "<name>_a" and "<name>_b". A full ring makes tx_burst return short: back-pressure.
 *
 * @return 0; -ENOMEM, -EEXIST (name in use) or -EINVAL after logging.
 */
int create_ring_pair(const std::string& name, unsigned ring_size, RingPair& out);

/** Free the rings after both ports were closed. */
void destroy_ring_pair(RingPair& pair);

}  // namespace imago::dp
