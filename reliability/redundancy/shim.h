/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The redundancy shim (docs/PROTOCOL.md 3.8): 20 bytes before every reliability frame a node
 * on two networks sends, and the whole of its heartbeats. It says which network a frame was
 * sent on, which networks the sender hears us on, and a sequence number per channel that
 * lets the receiver keep the first copy of a frame and drop the second.
 *
 * The sender's node id sits at offset 4, where the reliability header has it, so a link's
 * allow list checks both alike. A CRC32C covers the shim: a damaged sequence number would
 * otherwise move the duplicate window and make good frames look stale.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "reliability/be.h"
#include "reliability/crc32c.h"
#include "reliability/wire.h"

namespace imago::rel::red {

/** First byte of a shim: never a reliability frame's version, so a node that expects the
 *  other kind rejects it as a bad version. */
inline constexpr uint8_t kShimMagic = 0xD2;
inline constexpr uint8_t kBothNets = 0xFF;  ///< Shim::net of a frame sent on every network
inline constexpr uint8_t kMaxNets = 2;

enum class ShimKind : uint8_t {
  kFrame = 1,      ///< a reliability frame to one peer follows; seq: the peer's channel
  kGroup = 2,      ///< a group frame follows; seq: the sender's group channel
  kHeartbeat = 3,  ///< nothing follows; seq: heartbeats sent to this peer on this network
};

struct __attribute__((packed)) Shim {
  uint8_t magic;  ///< kShimMagic
  uint8_t kind;   ///< ShimKind
  uint8_t net;    ///< network it was sent on (0: A, 1: B), or kBothNets
  uint8_t heard;  ///< bit n: the sender heard the receiver on network n lately
  Be32 src_node;  ///< the sender's node id
  Be32 epoch;     ///< the sender's redundancy incarnation (random): a new one restarts seq
  Be32 seq;
  Be32 crc;       ///< CRC32C of the bytes before it
};
static_assert(sizeof(Shim) == 20);
static_assert(offsetof(Shim, src_node) == 4);

/** Write a shim at @p out. */
inline void shim_write(uint8_t* out, ShimKind kind, uint8_t net, uint8_t heard, NodeId src,
                       uint32_t epoch, uint32_t seq) {
  Shim s;
  s.magic = kShimMagic;
  s.kind = static_cast<uint8_t>(kind);
  s.net = net;
  s.heard = heard;
  s.src_node.set(src);
  s.epoch.set(epoch);
  s.seq.set(seq);
  s.crc.set(crc32c(0, &s, offsetof(Shim, crc)));
  std::memcpy(out, &s, sizeof s);
}

/** Read the shim at the start of @p frame. @return false when there is none (too short, bad
 *  magic or kind, a network number out of range). */
inline bool shim_read(std::span<const uint8_t> frame, Shim* out) {
  if (frame.size() < sizeof(Shim)) return false;
  std::memcpy(out, frame.data(), sizeof(Shim));
  if (out->magic != kShimMagic) return false;
  if (out->crc.get() != crc32c(0, out, offsetof(Shim, crc))) return false;
  if (out->kind < static_cast<uint8_t>(ShimKind::kFrame) ||
      out->kind > static_cast<uint8_t>(ShimKind::kHeartbeat))
    return false;
  if (out->net >= kMaxNets && out->net != kBothNets) return false;
  return (out->kind == static_cast<uint8_t>(ShimKind::kHeartbeat)) == (frame.size() == sizeof(Shim));
}

}  // namespace imago::rel::red
