// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/encap.h"

#include <cstring>

#include "dataplane/inet_csum.h"

namespace imago::dp {
namespace {

constexpr const char* kDecodeErrorNames[kDecodeErrorCount] = {
    "short",         "ethertype",      "ip_version", "ip_header_length", "ip_total_length",
    "ip_checksum",   "ip_fragment",    "ip_protocol", "udp_port",        "udp_length",
    "udp_checksum",  "link_version",   "link_length", "link_type",       "auth_missing",
    "auth_bad",      "auth_unexpected",
};

bool reject(DecodeCounters& c, DecodeError e) {
  ++c.rejected[static_cast<size_t>(e)];
  return false;
}

void write_eth(uint8_t* frame, const MacAddr& dst, const MacAddr& src, uint16_t ethertype) {
  EthHdr eth;
  eth.dst = dst;
  eth.src = src;
  eth.ethertype.set(ethertype);
  std::memcpy(frame, &eth, sizeof eth);
}

void write_link(uint8_t* at, LinkType type, uint16_t payload_len, bool tagged) {
  LinkHdr lh;
  lh.version = kLinkVersion;
  lh.type = static_cast<uint8_t>(static_cast<uint8_t>(type) | (tagged ? kLinkAuthFlag : 0));
  lh.length.set(payload_len);
  std::memcpy(at, &lh, sizeof lh);
}

// @p apart: the end of the payload, not after the headers but elsewhere (chained).
void write_ip_udp(const EncapConfig& cfg, uint8_t* ip_at, uint16_t udp_len, std::span<const uint8_t> apart) {
  Ipv4Hdr ip{};
  ip.version_ihl = 0x45;
  ip.total_length.set(static_cast<uint16_t>(sizeof(Ipv4Hdr) + udp_len));
  ip.frag.set(0x4000);  // don't fragment
  ip.ttl = cfg.ttl;
  ip.proto = kIpProtoUdp;
  ip.src.set(cfg.src_ip);
  ip.dst.set(cfg.dst_ip);
  ip.checksum.set(ipv4_header_csum(&ip, sizeof ip));
  std::memcpy(ip_at, &ip, sizeof ip);

  UdpHdr udp{};
  udp.src_port.set(cfg.udp_port);
  udp.dst_port.set(cfg.udp_port);
  udp.length.set(udp_len);
  uint8_t* udp_at = ip_at + sizeof ip;
  std::memcpy(udp_at, &udp, sizeof udp);
  if (cfg.udp_checksum) {
    Be16 c;
    c.set(udp_csum2(cfg.src_ip, cfg.dst_ip, udp_at, udp_len - apart.size(), apart.data(), apart.size()));
    std::memcpy(udp_at + offsetof(UdpHdr, checksum), &c, sizeof c);
  }
}

// Validates IPv4 + UDP starting at @p p (n bytes to the end of the frame); on success
// returns the UDP payload span through @p body / @p body_len.
bool decode_ip_udp(const EncapConfig& cfg, const uint8_t* p, size_t n, DecodedFrame& out,
                   const uint8_t*& body, size_t& body_len, DecodeCounters& c) {
  if (n < sizeof(Ipv4Hdr)) return reject(c, DecodeError::Short);
  Ipv4Hdr ip;
  std::memcpy(&ip, p, sizeof ip);
  if ((ip.version_ihl >> 4) != 4) return reject(c, DecodeError::IpVersion);
  size_t ihl = static_cast<size_t>(ip.version_ihl & 0xF) * 4;
  if (ihl < sizeof(Ipv4Hdr) || ihl > n) return reject(c, DecodeError::IpHeaderLength);
  size_t total = ip.total_length.get();
  if (total < ihl || total > n) return reject(c, DecodeError::IpTotalLength);
  if (csum_finish(csum_add(0, p, ihl)) != 0) return reject(c, DecodeError::IpChecksum);
  if ((ip.frag.get() & 0x3FFF) != 0) return reject(c, DecodeError::IpFragment);
  if (ip.proto != kIpProtoUdp) return reject(c, DecodeError::IpProtocol);

  const uint8_t* u = p + ihl;
  size_t udp_room = total - ihl;
  if (udp_room < sizeof(UdpHdr)) return reject(c, DecodeError::Short);
  UdpHdr udp;
  std::memcpy(&udp, u, sizeof udp);
  if (udp.dst_port.get() != cfg.udp_port) return reject(c, DecodeError::UdpPort);
  size_t ulen = udp.length.get();
  if (ulen < sizeof(UdpHdr) || ulen != udp_room) return reject(c, DecodeError::UdpLength);
  if (udp.checksum.get() != 0 &&
      csum_finish(csum_add(udp_pseudo_sum(ip.src.get(), ip.dst.get(), ulen), u, ulen)) != 0) {
    return reject(c, DecodeError::UdpChecksum);
  }
  out.src_ip = ip.src.get();
  body = u + sizeof(UdpHdr);
  body_len = ulen - sizeof(UdpHdr);
  return true;
}

}  // namespace

const char* decode_error_name(DecodeError e) {
  auto i = static_cast<size_t>(e);
  return i < kDecodeErrorCount ? kDecodeErrorNames[i] : "unknown";
}

uint64_t DecodeCounters::total_rejected() const {
  uint64_t t = 0;
  for (uint64_t r : rejected) t += r;
  return t;
}

void DecodeCounters::add(const DecodeCounters& o) {
  accepted += o.accepted;
  for (size_t i = 0; i < kDecodeErrorCount; ++i) rejected[i] += o.rejected[i];
}

MacAddr ipv4_multicast_mac(uint32_t ip) {
  return MacAddr{{0x01, 0x00, 0x5e, static_cast<uint8_t>((ip >> 16) & 0x7F),
                  static_cast<uint8_t>(ip >> 8), static_cast<uint8_t>(ip)}};
}

size_t encode_frame(const EncapConfig& cfg, uint8_t* frame, LinkType type, uint16_t payload_len,
                    std::span<const uint8_t> apart) {
  size_t hdr = encap_header_len(cfg.kind);
  size_t trailer = encap_trailer_len(cfg);
  uint8_t* link = frame + hdr - sizeof(LinkHdr);
  write_link(link, type, payload_len, cfg.auth.has_value());
  // The tag covers the link header and the payload; written before the UDP checksum, which
  // covers it in turn.
  if (cfg.auth) auth_tag(*cfg.auth, link, sizeof(LinkHdr) + payload_len, frame + hdr + payload_len);
  if (cfg.kind == Encap::L2) {
    write_eth(frame, cfg.dst_mac, cfg.src_mac, kEtherTypeImago);
  } else {
    MacAddr dst = ipv4_is_multicast(cfg.dst_ip) ? ipv4_multicast_mac(cfg.dst_ip) : cfg.dst_mac;
    write_eth(frame, dst, cfg.src_mac, kEtherTypeIpv4);
    auto udp_len = static_cast<uint16_t>(sizeof(UdpHdr) + sizeof(LinkHdr) + payload_len + trailer);
    write_ip_udp(cfg, frame + sizeof(EthHdr), udp_len, apart);
  }
  return hdr + payload_len + trailer;
}

bool decode_frame(const EncapConfig& cfg, const uint8_t* frame, size_t len, DecodedFrame& out,
                  DecodeCounters& c) {
  if (len < sizeof(EthHdr)) return reject(c, DecodeError::Short);
  EthHdr eth;
  std::memcpy(&eth, frame, sizeof eth);
  out.src_mac = eth.src;
  out.src_ip = 0;
  const uint8_t* body = frame + sizeof eth;
  size_t body_len = len - sizeof eth;
  uint16_t want = cfg.kind == Encap::L2 ? kEtherTypeImago : kEtherTypeIpv4;
  if (eth.ethertype.get() != want) return reject(c, DecodeError::EtherType);
  if (cfg.kind == Encap::Udp &&
      !decode_ip_udp(cfg, body, body_len, out, body, body_len, c)) {
    return false;
  }
  if (body_len < sizeof(LinkHdr)) return reject(c, DecodeError::Short);
  LinkHdr lh;
  std::memcpy(&lh, body, sizeof lh);
  if (lh.version != kLinkVersion) return reject(c, DecodeError::LinkVersion);
  const bool tagged = (lh.type & kLinkAuthFlag) != 0;
  const uint8_t type = lh.type & kLinkTypeMask;
  size_t plen = lh.length.get();
  size_t used = plen + (tagged ? kAuthTagBytes : 0);
  // L2 frames may carry Ethernet padding after the payload; UDP lengths must match exactly.
  bool fits = cfg.kind == Encap::L2 ? used <= body_len - sizeof lh : used == body_len - sizeof lh;
  if (!fits) return reject(c, DecodeError::LinkLength);
  if (type < static_cast<uint8_t>(LinkType::Raw) || type > static_cast<uint8_t>(LinkType::Circuit)) {
    return reject(c, DecodeError::LinkType);
  }
  if (tagged != cfg.auth.has_value()) return reject(c, tagged ? DecodeError::AuthUnexpected : DecodeError::AuthMissing);
  if (tagged && !auth_verify(*cfg.auth, body, sizeof lh + plen, body + sizeof lh + plen)) {
    return reject(c, DecodeError::AuthBad);
  }
  out.type = static_cast<LinkType>(type);
  out.payload = body + sizeof lh;
  out.payload_len = static_cast<uint16_t>(plen);
  ++c.accepted;
  return true;
}

}  // namespace imago::dp
