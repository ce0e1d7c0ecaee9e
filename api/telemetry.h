/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The runtime's own rte_telemetry commands, beside dataplane/telemetry.h's nodes, peers,
 * ports and lcores: what applications have open and what the buffer pools hold.
 *
 *   /imago/endpoints        the open endpoints' slot numbers
 *   /imago/endpoint,SLOT    one endpoint: name, node, peer, owner pid, rings, every counter
 *   /imago/pools            the message pools and the ports' mbuf pools: size, in use
 */
#pragma once

#include <vector>

#include <rte_mempool.h>

#include "api/shm.h"

namespace imago::api {

/** Answer from @p shm (and count @p mbuf_pools' use) from now on; registers the commands the
 *  first time. @return 0 or a negative errno. */
int telemetry_serve(const ShmRoot* shm, const std::vector<rte_mempool*>& mbuf_pools);

/** Answer nothing any more: the runtime is stopping. */
void telemetry_stop_serving();

}  // namespace imago::api
