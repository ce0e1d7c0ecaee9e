/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * On-the-wire headers of the link encapsulation: Ethernet, IPv4, UDP and imago's link header.
 *
 * Packed, big-endian typed, size- and offset-checked right below each struct. docs/PROTOCOL.md
 * ("Link encapsulation") is the authority; these structs follow it.
 */
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "reliability/be.h"

namespace imago::dp {

/** imago's EtherType in the L2 encapsulation (IEEE local experimental 2). */
inline constexpr uint16_t kEtherTypeImago = 0x88B5;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint8_t kIpProtoUdp = 17;
/** Default UDP port of the UDP/IPv4 encapsulation (source and destination). */
inline constexpr uint16_t kDefaultUdpPort = 47000;
/** The only link-header version this build speaks. */
inline constexpr uint8_t kLinkVersion = 1;

/** A 48-bit MAC address in wire order. */
struct __attribute__((packed)) MacAddr {
  std::array<uint8_t, 6> b;  // no initializer: keeps MacAddr POD so packed structs hold it
  bool operator==(const MacAddr&) const = default;
  bool is_multicast() const { return (b[0] & 1) != 0; }
};
static_assert(sizeof(MacAddr) == 6);
inline constexpr MacAddr kBroadcastMac{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

struct __attribute__((packed)) EthHdr {
  MacAddr dst;
  MacAddr src;
  Be16 ethertype;
};
static_assert(sizeof(EthHdr) == 14);
static_assert(offsetof(EthHdr, ethertype) == 12);

struct __attribute__((packed)) Ipv4Hdr {
  uint8_t version_ihl;  ///< version (4) in the high nibble, header length in 32-bit words low
  uint8_t tos;
  Be16 total_length;    ///< IP header + payload, bytes
  Be16 id;
  Be16 frag;            ///< flags (3 bits) and fragment offset (13 bits)
  uint8_t ttl;
  uint8_t proto;
  Be16 checksum;        ///< ones' complement of the header
  Be32 src;
  Be32 dst;
};
static_assert(sizeof(Ipv4Hdr) == 20);
static_assert(offsetof(Ipv4Hdr, total_length) == 2);
static_assert(offsetof(Ipv4Hdr, ttl) == 8);
static_assert(offsetof(Ipv4Hdr, checksum) == 10);
static_assert(offsetof(Ipv4Hdr, src) == 12);
static_assert(offsetof(Ipv4Hdr, dst) == 16);

struct __attribute__((packed)) UdpHdr {
  Be16 src_port;
  Be16 dst_port;
  Be16 length;    ///< UDP header + payload, bytes
  Be16 checksum;  ///< 0 means "not computed" (IPv4 only)
};
static_assert(sizeof(UdpHdr) == 8);
static_assert(offsetof(UdpHdr, length) == 4);

/**
 * imago's link header, first bytes after Ethernet (L2) or UDP. Its length field is needed
 * because Ethernet pads short frames: the payload ends where it says, not where the frame ends.
 */
struct __attribute__((packed)) LinkHdr {
  uint8_t version;  ///< kLinkVersion
  uint8_t type;     ///< LinkType of the payload (bits 0-6), kLinkAuthFlag (bit 7)
  Be16 length;      ///< payload bytes after this header (the tag, if any, not counted)
};
static_assert(sizeof(LinkHdr) == 4);
static_assert(offsetof(LinkHdr, length) == 2);

/** LinkHdr::type bit 7: a kAuthTagBytes tag (dataplane/auth.h) follows the payload. */
inline constexpr uint8_t kLinkAuthFlag = 0x80;
/** LinkHdr::type bits 0-6: the LinkType. */
inline constexpr uint8_t kLinkTypeMask = 0x7F;

/** What the payload after the link header is. */
enum class LinkType : uint8_t {
  Raw = 1,          ///< imago-perf raw mode test payload (no reliability)
  Reliability = 2,  ///< a reliability-engine frame
  Circuit = 3,      ///< a virtual-circuit frame (reliability/circuits/wire.h): a hop's, or an end's
};

}  // namespace imago::dp
