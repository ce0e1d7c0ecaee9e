/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The ordering header of an ordered group's messages (docs/PROTOCOL.md 3.11.3): what a member
 * puts in front of each message it sends to an IMAGO_GROUP_CAUSAL or IMAGO_GROUP_TOTAL group,
 * and the records the ordering itself sends in the same stream. It travels inside the group
 * stream's message bytes, so the engine and the wire below know nothing of it.
 *
 * Every record starts with the same 8 bytes (magic, kind, mode, width, set); a causal DATA or
 * CREDIT record follows them with `width` 32-bit counts (the vector stamp); a total DATA record
 * with its sender's 64-bit stamp, a total CTL record with a TotalCtl; a GONE record with the node id of the member that left. Little-endian.
 * Parsing assumes hostile bytes: every length and field is checked.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "reliability/order/total.h"
#include "reliability/wire.h"

namespace imago::api::order {

/** An event kind of ours (imago_group_event.kind, above the public ones) on an ordered group
 *  endpoint's rx ring: the node of `source` died (its session, --dead-after-ms). The ordering
 *  takes it (group_order.h): a member whose stream never started here leaves the order, which
 *  would otherwise wait for it to join for ever. Never given to the application. */
inline constexpr uint32_t kEventNodeGone = 0x100;

inline constexpr uint8_t kMagic = 0xB7;
inline constexpr uint32_t kMaxWidth = 64;  ///< IMAGO_GROUP_ORDER_MAX_MEMBERS
inline constexpr uint32_t kHeadLen = 8;
inline constexpr uint32_t kCtlLen = 40;    ///< a TotalCtl on the wire, and a destination
inline constexpr uint32_t kMaxRecord = kHeadLen + 4 * kMaxWidth;

enum class Mode : uint8_t { kCausal = 1, kTotal = 2 };
enum class Kind : uint8_t {
  kData = 1,    ///< an application message follows (causal: after the stamp)
  kCredit = 2,  ///< causal: the sender's delivered counts (the stamp), no message
  kCtl = 3,     ///< total: a TotalCtl
  kGone = 4,    ///< a member left the order (its stream ended, or it was expired)
};

struct Head {
  Kind kind;
  Mode mode;
  uint8_t width;  ///< members
  uint32_t set;   ///< fingerprint of mode, window and members: every member's must agree
};

inline void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint32_t get32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline uint64_t get64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

inline void put_head(uint8_t* p, const Head& h) {
  p[0] = kMagic, p[1] = static_cast<uint8_t>(h.kind), p[2] = static_cast<uint8_t>(h.mode), p[3] = h.width;
  put32(p + 4, h.set);
}

/** @return the head of @p b if it is one of @p expect's group (magic, mode, width, set), else
 *  false. */
inline bool get_head(std::span<const uint8_t> b, const Head& expect, Head* out) {
  if (b.size() < kHeadLen || b[0] != kMagic) return false;
  const Head h{static_cast<Kind>(b[1]), static_cast<Mode>(b[2]), b[3], get32(&b[4])};
  if (h.mode != expect.mode || h.width != expect.width || h.set != expect.set) return false;
  if (h.kind < Kind::kData || h.kind > Kind::kGone) return false;
  return *out = h, true;
}

/** @return the bytes of a record of @p kind in group @p h, before any message. */
inline uint32_t record_len(const Head& h, Kind kind) {
  switch (kind) {
    case Kind::kData: return kHeadLen + (h.mode == Mode::kCausal ? 4u * h.width : 8u);
    case Kind::kCredit: return kHeadLen + 4u * h.width;
    case Kind::kCtl: return kHeadLen + kCtlLen;
    case Kind::kGone: return kHeadLen + 8;
  }
  return 0;
}

inline void put_ctl(uint8_t* p, const rel::order::TotalCtl& c, rel::NodeId dst) {
  std::memset(p, 0, kCtlLen);
  p[0] = c.kind;
  put32(p + 4, c.epoch);
  put64(p + 8, c.g);
  put32(p + 16, c.src);
  put32(p + 20, dst);
  put64(p + 24, c.s);
  put64(p + 32, c.d);
}

inline rel::order::TotalCtl get_ctl(const uint8_t* p, rel::NodeId* dst) {
  *dst = get32(p + 20);
  return rel::order::TotalCtl{static_cast<rel::order::TotalCtl::Kind>(p[0]), get32(p + 4), get64(p + 8),
                              get32(p + 16), get64(p + 24), get64(p + 32)};
}

/** FNV-1a over mode, window and the sorted members: a member opened otherwise is told apart. */
inline uint32_t fingerprint(Mode mode, uint32_t window, std::span<const rel::NodeId> sorted) {
  uint32_t h = 2166136261u;
  auto mix = [&h](uint32_t v) {
    for (int i = 0; i < 4; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 16777619u;
  };
  mix(static_cast<uint32_t>(mode)), mix(window);
  for (rel::NodeId n : sorted) mix(n);
  return h;
}

}  // namespace imago::api::order
