// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/allow_list.h"

#include <cerrno>
#include <cstring>

#include "reliability/wire.h"

namespace imago::dp {
namespace {

// A unicast MAC that names one station: broadcast and multicast name many, zero none.
bool unicast_mac(const MacAddr& m) {
  return !m.is_multicast() && m != MacAddr{{0, 0, 0, 0, 0, 0}};
}

bool unicast_ip(uint32_t ip) { return ip != 0 && ip != 0xFFFFFFFF && !ipv4_is_multicast(ip); }

}  // namespace

int AllowList::add(uint64_t id, const MacAddr& mac, uint32_t ip) {
  if (by_id(id) != nullptr) return -EEXIST;
  if (n_ == kMaxPeers) return -ENOSPC;
  bool known = kind_ == Encap::L2 ? unicast_mac(mac) : unicast_ip(ip);
  peers_[n_++] = Entry{id, mac, ip, known};
  return 0;
}

bool AllowList::has_address(uint64_t id) const {
  const Entry* e = by_id(id);
  return e != nullptr && e->known;
}

const AllowList::Entry* AllowList::by_id(uint64_t id) const {
  for (size_t i = 0; i < n_; ++i)
    if (peers_[i].id == id) return &peers_[i];
  return nullptr;
}

Admit AllowList::check(const MacAddr& src_mac, uint32_t src_ip, const uint8_t* payload, size_t len) const {
  // Node ids are 1 .. 2^32 - 1: 0 stands for "the frame names no sender".
  uint64_t claimed = 0;
  if (len >= offsetof(rel::FrameHeader, src_node) + sizeof(Be32)) {
    Be32 v;
    std::memcpy(&v, payload + offsetof(rel::FrameHeader, src_node), sizeof v);
    claimed = v.get();
  }
  bool peer_address = false;  // several peers may share one (nodes behind one host)
  for (size_t i = 0; i < n_; ++i) {
    const Entry& e = peers_[i];
    if (!e.known || !(kind_ == Encap::L2 ? e.mac == src_mac : e.ip == src_ip)) continue;
    if (claimed == 0 || claimed == e.id) return Admit::Allowed;
    peer_address = true;
  }
  if (peer_address) return Admit::Spoofed;
  const Entry* e = claimed != 0 ? by_id(claimed) : nullptr;
  if (e == nullptr) return Admit::NotAllowed;
  return e->known ? Admit::Spoofed : Admit::Allowed;
}

}  // namespace imago::dp
