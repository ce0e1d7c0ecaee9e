// SPDX-License-Identifier: BSD-3-Clause
#include "api/handoff.h"

#include <rte_errno.h>

#include <cerrno>

namespace imago::api {

rte_ring* handoff_create(const char* name, unsigned slots, int socket) {
  return rte_ring_create_elem(name, sizeof(imago_msg), slots, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
}

}  // namespace imago::api
