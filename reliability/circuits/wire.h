/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Virtual circuits on the wire (docs/PROTOCOL.md 3.10, after "Routing in Barrelfish"): the
 * 12-byte circuit header before every frame that travels over a circuit, and the bodies of
 * the hop-by-hop control messages that set circuits up and tear them down.
 *
 * A VCI is local to one link and one direction: the node that receives on a link chooses it
 * (at random: a forged frame must guess 32 bits) and tells its neighbour in the set-up, so a
 * forwarding node finds a frame's circuit by (the port it came in on, its VCI), and rewrites
 * the VCI to the one its next hop chose. A CRC32C covers the header and a control body; a
 * data frame's payload (an engine frame, end to end) carries its own.
 */
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <nmmintrin.h>

#include "reliability/be.h"
#include "reliability/crc32c.h"
#include "reliability/wire.h"

namespace imago::rel::circ {

/** First byte of a circuit frame: neither a reliability frame's version nor the redundancy
 *  shim's magic, so each kind of node rejects the other's frames as a bad version. */
inline constexpr uint8_t kCircuitMagic = 0xC1;

enum class CircKind : uint8_t {
  kData = 1,      ///< an end-to-end frame follows; vci: the receiver's for this circuit and link
  kSetup = 2,     ///< SetupBody; vci 0: a new circuit asks its way toward its destination
  kSetupOk = 3,   ///< ReplyBody; vci: the one the receiver gave in its SETUP (back_vci)
  kSetupFail = 4, ///< ReplyBody (reason); vci: as kSetupOk
  kTeardown = 5,  ///< ReplyBody (reason); vci: as a data frame's
  kHello = 6,     ///< HelloBody, vci kHelloHears, kHelloDeaf or kHelloLeaving: a neighbour's keep-alive on a link
                  ///< (a link silent for a while, or whose neighbour hears nothing of us, is down)
};

/** Why a circuit did not come up, or went down (ReplyBody::reason, and to the application). */
enum class CircReason : uint8_t {
  kNone = 0,
  kClosed = 1,    ///< an end closed it
  kNoRoute = 2,   ///< a node on the way has no route to the destination
  kFull = 3,      ///< a node on the way has no room for another circuit
  kHops = 4,      ///< longer than the hop limit (a routing loop)
  kHopDead = 5,   ///< a link on the way died
  kTimeout = 6,   ///< the set-up got no answer
  kIdle = 7,      ///< nothing crossed it for the idle time: its entries were let go
  kReplaced = 8,  ///< the opener set up a new circuit to us while this one was up (an end's own report)
};

/** @return a short name of @p r ("closed", "no-route", ...). */
const char* reason_name(CircReason r);

struct __attribute__((packed)) CircuitHeader {
  uint8_t magic;  ///< kCircuitMagic
  uint8_t kind;   ///< CircKind
  uint8_t hops;   ///< kSetup: hops left (decremented per hop); else 0
  uint8_t flags;  ///< 0 (reserved)
  Be32 vci;
  Be32 crc;       ///< CRC32C of the header (this field 0) and, for control, the body
};
static_assert(sizeof(CircuitHeader) == 12);
static_assert(offsetof(CircuitHeader, vci) == 4);
static_assert(offsetof(CircuitHeader, crc) == 8);

struct __attribute__((packed)) SetupBody {
  Be32 origin;    ///< the node that opened the circuit
  Be32 dst;       ///< the node it is for
  Be32 nonce;     ///< the origin's random name for this set-up (a retry repeats it)
  Be32 back_vci;  ///< the VCI the receiver sends back to the sender with on this circuit
};
static_assert(sizeof(SetupBody) == 16);

struct __attribute__((packed)) ReplyBody {
  Be32 fwd_vci;   ///< kSetupOk: the VCI the receiver sends toward the destination with; else 0
  uint8_t reason; ///< CircReason (kSetupFail, kTeardown); else 0
  uint8_t pad[3];
};
static_assert(sizeof(ReplyBody) == 8);

/** A HELLO's VCI: whether its sender hears the node it is sent to (a link is used only when
 *  both ends hear each other), or that it stops (its last HELLO: the link is down at once).
 *  Any other value counts as kHelloHears. */
inline constexpr uint32_t kHelloHears = 1;
inline constexpr uint32_t kHelloDeaf = 2;
inline constexpr uint32_t kHelloLeaving = 3;

/** Who sends a HELLO, so that a link wired or numbered otherwise than the topology says is
 *  found (same --topology everywhere, the --vdevs in port order, no --node-id twice). */
struct __attribute__((packed)) HelloBody {
  Be32 node;      ///< the sender's node id
  Be32 port;      ///< the sender's topology port the HELLO left by
};
static_assert(sizeof(HelloBody) == 8);

inline constexpr size_t kMaxControl = sizeof(CircuitHeader) + sizeof(SetupBody);

/** @return crc32c(0, the 12-byte header at @p f with its CRC field zero): a DATA frame's CRC,
 *  computed on every hop, in two instructions (crc32c() sets up lanes for long inputs). */
inline uint32_t circ_header_crc(const uint8_t* f) {
  uint64_t first;
  std::memcpy(&first, f, 8);
  return ~_mm_crc32_u32(static_cast<uint32_t>(_mm_crc32_u64(0xFFFFFFFFu, first)), 0);
}

/** @return the VCI of the circuit frame @p f (its header read already). */
inline uint32_t circ_vci(const uint8_t* f) {
  Be32 v;
  std::memcpy(&v, f + offsetof(CircuitHeader, vci), 4);
  return v.get();
}

/** A forwarding hop's rewrite of a DATA frame's header: @p vci in, the CRC again. The new
 *  header is built in a register and its CRC taken from there: storing the VCI and reading
 *  the header back would stall on the store (a 4-byte store cannot feed an 8-byte load). */
inline void circ_rewrite_vci(uint8_t* f, uint32_t vci) {
  static_assert(std::endian::native == std::endian::little);
  uint64_t first;
  std::memcpy(&first, f, 8);
  Be32 v;
  v.set(vci);
  uint32_t raw;
  std::memcpy(&raw, &v, 4);
  first = (first & 0xFFFFFFFFu) | uint64_t{raw} << 32;  // bytes 4..7: the VCI
  Be32 c;
  c.set(~_mm_crc32_u32(static_cast<uint32_t>(_mm_crc32_u64(0xFFFFFFFFu, first)), 0));
  std::memcpy(f + offsetof(CircuitHeader, vci), &raw, 4);
  std::memcpy(f + offsetof(CircuitHeader, crc), &c, 4);
}

/** Fill the CRC of the circuit frame @p f (its header and @p covered bytes after it). */
inline void circ_seal(uint8_t* f, size_t covered) {
  std::memset(f + offsetof(CircuitHeader, crc), 0, 4);
  const uint32_t c = covered == 0 ? circ_header_crc(f) : crc32c(0, f, sizeof(CircuitHeader) + covered);
  Be32 be;
  be.set(c);
  std::memcpy(f + offsetof(CircuitHeader, crc), &be, 4);
}

/** @return the body length a frame of kind @p k must have, or -1 for kData (any). */
inline int circ_body_len(uint8_t k) {
  switch (static_cast<CircKind>(k)) {
    case CircKind::kData: return -1;
    case CircKind::kSetup: return sizeof(SetupBody);
    case CircKind::kSetupOk:
    case CircKind::kSetupFail:
    case CircKind::kTeardown: return sizeof(ReplyBody);
    case CircKind::kHello: return sizeof(HelloBody);
  }
  return -2;
}

/**
 * Read the circuit header of @p f. Control frames must be exactly header + body with a good
 * CRC over both; a data frame's CRC covers its header only. @return false for anything else.
 */
inline bool circ_read(std::span<const uint8_t> f, CircuitHeader* h) {
  if (f.size() < sizeof(CircuitHeader)) return false;
  std::memcpy(h, f.data(), sizeof *h);
  if (h->magic != kCircuitMagic || h->flags != 0) return false;
  const int body = circ_body_len(h->kind);
  if (body == -2 || (body >= 0 && f.size() != sizeof(CircuitHeader) + static_cast<size_t>(body))) return false;
  const size_t covered = body >= 0 ? static_cast<size_t>(body) : 0;
  if (covered == 0) return circ_header_crc(f.data()) == h->crc.get();
  uint8_t hdr[sizeof(CircuitHeader)];
  std::memcpy(hdr, f.data(), sizeof hdr);
  std::memset(hdr + offsetof(CircuitHeader, crc), 0, 4);
  const uint32_t c = crc32c(crc32c(0, hdr, sizeof hdr), f.data() + sizeof hdr, covered);
  return c == h->crc.get();
}

/** Write a circuit header of kind @p k at @p f (the CRC is circ_seal()'s). */
inline void circ_header(uint8_t* f, CircKind k, uint32_t vci, uint8_t hops = 0) {
  CircuitHeader h{};
  h.magic = kCircuitMagic;
  h.kind = static_cast<uint8_t>(k);
  h.hops = hops;
  h.vci.set(vci);
  std::memcpy(f, &h, sizeof h);
}

}  // namespace imago::rel::circ
