/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The hand-off between an engine lcore and an application: a single-producer,
 * single-consumer rte_ring of 64-byte imago_msg descriptors, moved in bursts (what the
 * descriptors hold: tiers.h).
 *
 * A full ring is back-pressure: enqueue returns a short count and the producer keeps the
 * rest (the engine then withholds credit); nothing is dropped here. Hot functions are inline.
 */
#pragma once

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <cstdint>
#include <cstring>

#include "api/imago_msg.h"

namespace imago::api {

/**
 * Create a hand-off ring of @p slots descriptors (a power of two), one producer and one
 * consumer. @return the ring, or nullptr with rte_errno set (EINVAL, ENOMEM, EEXIST).
 */
rte_ring* handoff_create(const char* name, unsigned slots, int socket);

// The ring's slots are reserved and released with DPDK's zero-copy calls (single producer,
// single consumer, as handoff_create() makes them) and filled with memcpy: one call for the
// whole burst (two when it wraps), instead of rte_ring's 4-byte-at-a-time element copy.

/** Slot @p i of a zero-copy reservation @p z (it may wrap: two spans). */
inline imago_msg& zc_slot(const rte_ring_zc_data& z, unsigned i) {
  return i < z.n1 ? static_cast<imago_msg*>(z.ptr1)[i] : static_cast<imago_msg*>(z.ptr2)[i - z.n1];
}

/** Enqueue up to @p n descriptors. @return how many went in; the caller keeps the rest. */
inline unsigned handoff_put(rte_ring* r, const imago_msg* msgs, unsigned n) {
  rte_ring_zc_data z;
  n = rte_ring_enqueue_zc_burst_elem_start(r, sizeof(imago_msg), n, &z, nullptr);
  if (n == 0) return 0;
  std::memcpy(z.ptr1, msgs, z.n1 * sizeof(imago_msg));
  if (n > z.n1) std::memcpy(z.ptr2, msgs + z.n1, (n - z.n1) * sizeof(imago_msg));
  rte_ring_enqueue_zc_elem_finish(r, n);
  return n;
}

/** Dequeue up to @p n descriptors. @return how many were taken. */
inline unsigned handoff_get(rte_ring* r, imago_msg* msgs, unsigned n) {
  rte_ring_zc_data z;
  n = rte_ring_dequeue_zc_burst_elem_start(r, sizeof(imago_msg), n, &z, nullptr);
  if (n == 0) return 0;
  std::memcpy(msgs, z.ptr1, z.n1 * sizeof(imago_msg));
  if (n > z.n1) std::memcpy(msgs + z.n1, z.ptr2, (n - z.n1) * sizeof(imago_msg));
  rte_ring_dequeue_zc_elem_finish(r, n);
  return n;
}

}  // namespace imago::api
