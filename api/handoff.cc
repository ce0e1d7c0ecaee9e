// SPDX-License-Identifier: BSD-3-Clause
#include "api/handoff.h"

#include <rte_errno.h>

#include <cerrno>

namespace imago::api {

rte_ring* handoff_create(const char* name, unsigned slots, int socket) {
  return rte_ring_create_elem(name, sizeof(imago_msg), slots, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
}

int describe_message(imago_msg& m, uint64_t src, const void* data, uint32_t len, uint16_t flags,
                     rte_mempool* pool, rte_mbuf* mbuf) {
  m.src = src;
  m.len = len;
  m.flags = flags;
  m.reserved = 0;
  if (len <= IMAGO_MSG_INLINE_MAX) {
    m.tier = IMAGO_TIER_INLINE;
    std::memcpy(m.u.inline_data, data, len);
    return 0;
  }
  if (pool && len <= pool->elt_size) {
    void* buf;
    if (rte_mempool_get(pool, &buf) < 0) return -ENOBUFS;
    std::memcpy(buf, data, len);
    m.tier = IMAGO_TIER_POOL;
    m.u.ext = {buf, buf};
    return 0;
  }
  if (!mbuf) return -EMSGSIZE;
  auto* first = static_cast<const uint8_t*>(mbuf->buf_addr);
  auto* at = static_cast<const uint8_t*>(data);
  if (at < first || at + len > first + mbuf->buf_len) return -EINVAL;
  rte_mbuf_refcnt_update(mbuf, 1);  // the application's reference, dropped by release
  m.tier = IMAGO_TIER_MBUF;
  m.u.ext = {const_cast<void*>(data), mbuf};
  return 0;
}

}  // namespace imago::api
