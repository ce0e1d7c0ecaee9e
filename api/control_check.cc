// SPDX-License-Identifier: BSD-3-Clause
#include "api/control_check.h"

#include <cerrno>
#include <cstring>

#include "api/imago.h"
#include "reliability/crc32c.h"

namespace imago::api {

uint32_t endpoint_hash(const char* name) {
  const uint32_t h = crc32c(0, name, std::strlen(name));
  return h == 0 ? 1 : h;
}

int ctl_decode(const void* param, size_t len, const ShmRoot& shm, CtlMsg* out) {
  *out = CtlMsg{};
  if (param == nullptr || len != sizeof(CtlMsg)) return -EPROTO;
  std::memcpy(out, param, sizeof(CtlMsg));
  if (out->version != kShmVersion) return *out = CtlMsg{}, -EPROTO;
  switch (out->op) {
    case CtlOp::kHello:
    case CtlOp::kOpen: return 0;
    case CtlOp::kClose:
      // Another process's endpoint is not the sender's to close.
      return out->slot < kMaxEndpoints && shm.slots[out->slot].pid == out->pid ? 0 : -EINVAL;
  }
  return -EINVAL;
}

namespace {

bool group_flags_ok(const CtlMsg& req) {
  const uint32_t f = req.group_flags;
  return req.peer == 0 &&
         (f & ~(IMAGO_GROUP_SEND | IMAGO_GROUP_RECV | IMAGO_GROUP_FROM_OLDEST | IMAGO_GROUP_NACK)) == 0 &&
         (f & (IMAGO_GROUP_SEND | IMAGO_GROUP_RECV)) != 0 && (!(f & IMAGO_GROUP_FROM_OLDEST) || (f & IMAGO_GROUP_RECV)) &&
         (!(f & IMAGO_GROUP_NACK) || (f & IMAGO_GROUP_SEND));
}

}  // namespace

int ctl_check_open(const CtlMsg& req, const ShmRoot& shm, const ServesPeer& serves, int* node_index) {
  const size_t len = strnlen(req.name, sizeof req.name);
  if (len == 0 || len > kNameMax) return -EINVAL;
  const uint32_t ring = req.ring_size ? req.ring_size : kRingDefault;
  if (ring < kRingMin || ring > kRingMax || (ring & (ring - 1)) != 0) return -EINVAL;
  *node_index = req.node == 0 ? 0 : shm.node_index(req.node);
  if (*node_index < 0 || static_cast<uint32_t>(*node_index) >= shm.n_nodes) return -EINVAL;
  if (req.group != 0 ? !group_flags_ok(req)
                     : (req.group_flags & ~IMAGO_EP_NET_EVENTS) != 0 || !serves(*node_index, req.peer))
    return -EINVAL;
  const uint32_t hash = endpoint_hash(req.name);
  for (const EndpointSlot& s : shm.slots) {
    if (s.state.load(std::memory_order_acquire) == SlotState::kFree || s.node_index != static_cast<uint32_t>(*node_index))
      continue;
    if (req.group != 0 ? s.group == req.group : s.group == 0 && s.peer == req.peer && s.hash == hash) return -EEXIST;
  }
  return 0;
}

}  // namespace imago::api
