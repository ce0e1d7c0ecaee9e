/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Frame encapsulation: encode imago payloads into Ethernet (EtherType 0x88B5) or UDP/IPv4
 * frames, and decode received frames, rejecting every malformed one with a counted reason.
 * With a cluster key (EncapConfig::auth) every frame carries a tag after its payload, and a
 * frame without a valid one is rejected (auth.h).
 *
 * Works on plain byte spans (no mbufs), so it is tested and fuzzed without EAL; the mbuf
 * glue is the caller's. Every decode path assumes hostile input.
 */
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <optional>

#include "dataplane/auth.h"
#include "dataplane/encap_headers.h"

namespace imago::dp {

/** The two link encapsulations. */
enum class Encap : uint8_t {
  L2,   ///< Ethernet + LinkHdr
  Udp,  ///< Ethernet + IPv4 + UDP + LinkHdr
};

/** How frames are addressed; IPv4 addresses are host order. */
struct EncapConfig {
  Encap kind = Encap::L2;
  MacAddr src_mac{};
  MacAddr dst_mac{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t udp_port = kDefaultUdpPort;  ///< source and destination port; decode checks dst
  bool udp_checksum = true;             ///< compute on encode; verify on decode when non-zero
  uint8_t ttl = 64;
  /** The cluster key: set, encode appends a tag to every frame and decode rejects a frame
   *  without a valid one; unset, decode rejects tagged frames. */
  std::optional<AuthKey> auth;
};

/** @return true when @p ip (host order) is an IPv4 multicast group (224.0.0.0/4). */
constexpr bool ipv4_is_multicast(uint32_t ip) { return (ip >> 28) == 0xE; }
/** @return the Ethernet address of IPv4 group @p ip: 01:00:5e and its low 23 bits (RFC 1112). */
MacAddr ipv4_multicast_mac(uint32_t ip);

/** @return the IPv4 group of imago group @p g: 239.0.0.0/8 and its low 24 bits. Groups
 *  whose ids differ above bit 23 share an address; receivers tell them apart by the id in
 *  the frame (docs/PROTOCOL.md 3.7.5). */
constexpr uint32_t group_ipv4(uint32_t g) { return 0xEF000000u | (g & 0x00FFFFFFu); }
/** @return the Ethernet address frames of imago group @p g go to, in either encapsulation:
 *  that of group_ipv4(@p g) (01:00:5e and its low 23 bits). */
inline MacAddr group_mac(uint32_t g) { return ipv4_multicast_mac(group_ipv4(g)); }

/** @return the bytes in front of the payload for @p kind (18 for L2, 46 for UDP). */
constexpr size_t encap_header_len(Encap kind) {
  return kind == Encap::L2 ? sizeof(EthHdr) + sizeof(LinkHdr)
                           : sizeof(EthHdr) + sizeof(Ipv4Hdr) + sizeof(UdpHdr) + sizeof(LinkHdr);
}

/** @return the bytes after the payload: the tag with a key, else none. */
inline size_t encap_trailer_len(const EncapConfig& cfg) { return cfg.auth ? kAuthTagBytes : 0; }

/** Largest payload whose frame fits an IP MTU of @p mtu bytes (no tag). */
constexpr size_t max_payload(Encap kind, size_t mtu) {
  return mtu + sizeof(EthHdr) - encap_header_len(kind);
}

/** Largest payload whose frame, tag included if @p cfg has a key, fits an IP MTU of @p mtu. */
inline size_t max_payload(const EncapConfig& cfg, size_t mtu) {
  return max_payload(cfg.kind, mtu) - encap_trailer_len(cfg);
}

/**
 * Write the headers in front of a payload that the caller already placed at
 * frame + encap_header_len(cfg.kind), and with cfg.auth the tag after it (the buffer must
 * hold encap_trailer_len(cfg) more bytes). For UDP with multicast dst_ip, the destination
 * MAC is the group's (RFC 1112), whatever cfg.dst_mac says.
 *
 * @p apart: the last apart.size() bytes of the payload are not in @p frame but there (a
 * payload chained behind the headers' part): the UDP checksum covers them where they are.
 * With a tag (which follows the whole payload) nothing may be apart.
 *
 * @return the frame length: header length + @p payload_len + trailer length.
 */
size_t encode_frame(const EncapConfig& cfg, uint8_t* frame, LinkType type, uint16_t payload_len,
                    std::span<const uint8_t> apart = {});

/** Why decode_frame() rejected a frame; each has its own counter. */
enum class DecodeError : uint8_t {
  Short,           ///< shorter than the headers it claims
  EtherType,       ///< neither imago's EtherType (L2) nor IPv4 (UDP)
  IpVersion,       ///< IPv4 version field is not 4
  IpHeaderLength,  ///< IHL below 5 or beyond the frame
  IpTotalLength,   ///< total length disagrees with the frame
  IpChecksum,      ///< IPv4 header checksum wrong
  IpFragment,      ///< an IP fragment (imago fragments above IP, never below)
  IpProtocol,      ///< not UDP
  UdpPort,         ///< destination port is not ours
  UdpLength,       ///< UDP length disagrees with the IP length
  UdpChecksum,     ///< UDP checksum present and wrong
  LinkVersion,     ///< link header version we do not speak
  LinkLength,      ///< link header length runs past the frame
  LinkType,        ///< unknown payload type
  AuthMissing,     ///< we have a key and the frame carries no tag
  AuthBad,         ///< the tag is wrong: another key, or bytes changed on the way
  AuthUnexpected,  ///< the frame carries a tag and we have no key
  Count_,
};
inline constexpr size_t kDecodeErrorCount = static_cast<size_t>(DecodeError::Count_);

/** @return a short lower-case name for @p e, e.g. "ip_checksum". */
const char* decode_error_name(DecodeError e);

/** Counters of one decoder: accepted frames and rejections by reason. */
struct DecodeCounters {
  uint64_t accepted = 0;
  std::array<uint64_t, kDecodeErrorCount> rejected{};

  uint64_t total_rejected() const;
  void add(const DecodeCounters& o);
};

/** A decoded frame: the payload points into the caller's frame buffer (tag checked, not
 *  included). */
struct DecodedFrame {
  LinkType type{};
  const uint8_t* payload = nullptr;
  uint16_t payload_len = 0;
  MacAddr src_mac{};
  uint32_t src_ip = 0;  ///< host order; 0 for L2
};

/**
 * Decode one received frame of @p len bytes as the encapsulation @p cfg.kind, and check its
 * tag with cfg.auth (a frame with no tag when there is a key, or one when there is none, is
 * rejected too).
 *
 * @return true with @p out filled in; false when the frame is malformed, after counting the
 *         reason in @p counters. Never reads outside [frame, frame + len).
 */
bool decode_frame(const EncapConfig& cfg, const uint8_t* frame, size_t len, DecodedFrame& out,
                  DecodeCounters& counters);

}  // namespace imago::dp
