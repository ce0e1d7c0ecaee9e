/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The primary's checks on the control messages applications send it (api/control.h): pure
 * decisions over the shared table, with no EAL call, so they are unit-tested and fuzzed
 * without a running primary (tests/fuzz/control_fuzz.cc). The runtime acts on the verdicts.
 */
#pragma once

#include <cstddef>
#include <functional>

#include "api/control.h"

namespace imago::api {

/** Whether node @p node_index (an index into ShmRoot::node_ids) has peer @p peer configured. */
using ServesPeer = std::function<bool(int node_index, uint64_t peer)>;

/**
 * Decode the @p len bytes at @p param as a request: a whole CtlMsg of this kShmVersion with a
 * known operation; a close must name a slot below kMaxEndpoints owned by the sender's pid.
 * @return 0 with *out the request; -EPROTO (wrong length or version: *out zeroed) or -EINVAL
 * (unknown operation, a close of a slot not the sender's: *out is the request as received).
 */
int ctl_decode(const void* param, size_t len, const ShmRoot& shm, CtlMsg* out);

/**
 * Check an open request against the table (call with the table's writers excluded).
 * @return 0 with *node_index the node to open it on (node 0 means the first); -EINVAL (empty
 * or over-long name, ring size not a power of two in [kRingMin, kRingMax], unknown node, a
 * peer that node does not serve) or -EEXIST (a live endpoint with that node, peer and name).
 * A group endpoint (group not 0) has peer 0 and flags of IMAGO_GROUP_* with SEND or RECV
 * (FROM_OLDEST only with RECV), else -EINVAL; -EEXIST: a live one of that node and group.
 */
int ctl_check_open(const CtlMsg& req, const ShmRoot& shm, const ServesPeer& serves, int* node_index);

}  // namespace imago::api
