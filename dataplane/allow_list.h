/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Who may talk: the peers a node is configured for, each bound to its address, so a frame from
 * any other address, or from one peer's address in the name of another node, is dropped
 * before the reliability engine sees it.
 *
 * The address is the source MAC in the L2 encapsulation and the source IPv4 address in the
 * UDP one (routers rewrite MACs). A peer configured without an address (broadcast MAC,
 * multicast, all-zero, or no IPv4 address in UDP mode) has none to check: its frames are
 * accepted from any address that belongs to no other peer. The rule, in order:
 *
 *   1. the source address is a peer's: the frame must name that peer as its sender
 *      (reliability FrameHeader::src_node), else it is Spoofed;
 *   2. otherwise it must name a peer configured without an address: Allowed; one with an
 *      address (sent from the wrong one): Spoofed; any other node: NotAllowed.
 *
 * docs/PROTOCOL.md ("Who may talk") is the authority. Pure (no DPDK), fixed size, no
 * allocation: the check runs per received frame.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/encap.h"

namespace imago::dp {

/** What the allow-list says of a frame. */
enum class Admit : uint8_t {
  Allowed,     ///< hand it to the engine
  NotAllowed,  ///< from an address and in the name of a node that are no peer of ours
  Spoofed,     ///< in the name of a peer it does not come from
};

class AllowList {
 public:
  static constexpr size_t kMaxPeers = 64;

  /** Start empty, for the encapsulation @p kind (which address is checked). */
  explicit AllowList(Encap kind = Encap::L2) : kind_(kind) {}

  /** Bind peer @p id to its address (control path). @return 0, -ENOSPC (kMaxPeers peers)
   *  or -EEXIST (@p id already bound). */
  int add(uint64_t id, const MacAddr& mac, uint32_t ip);

  /** @return true when peer @p id has an address the frames are checked against. */
  bool has_address(uint64_t id) const;

  /**
   * Judge a received frame: its source addresses (from decode_frame) and its reliability
   * frame @p payload (the sender's node id at offset 4; a frame too short to hold it is
   * judged by its address alone, and the engine rejects it).
   */
  Admit check(const MacAddr& src_mac, uint32_t src_ip, const uint8_t* payload, size_t len) const;

 private:
  struct Entry {
    uint64_t id;
    MacAddr mac;
    uint32_t ip;
    bool known;  // has an address to check
  };
  const Entry* by_id(uint64_t id) const;

  Encap kind_;
  Entry peers_[kMaxPeers] = {};
  size_t n_ = 0;
};

}  // namespace imago::dp
