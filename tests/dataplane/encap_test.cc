// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for dataplane/encap.h, dataplane/encap_headers.h and dataplane/inet_csum.h: encode/decode
// of both encapsulations, one crafted frame per rejection reason, checksums against reference
// values, and a robustness run over random and mutated frames.
#include "dataplane/encap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dataplane/inet_csum.h"
#include "dataplane/encap_headers.h"
#include "reliability/rng.h"

namespace imago::dp {
namespace {

using Frame = std::vector<uint8_t>;

constexpr MacAddr kSrcMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
constexpr MacAddr kDstMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
constexpr uint32_t kSrcIp = 0x0A000001;  // 10.0.0.1
constexpr uint32_t kDstIp = 0x0A000002;  // 10.0.0.2
constexpr size_t kIpAt = sizeof(EthHdr);
constexpr size_t kUdpAt = kIpAt + sizeof(Ipv4Hdr);

EncapConfig l2_cfg() {
  EncapConfig c;
  c.kind = Encap::L2;
  c.src_mac = kSrcMac;
  c.dst_mac = kDstMac;
  return c;
}

EncapConfig udp_cfg(bool checksum = true) {
  EncapConfig c = l2_cfg();
  c.kind = Encap::Udp;
  c.src_ip = kSrcIp;
  c.dst_ip = kDstIp;
  c.udp_checksum = checksum;
  c.ttl = 17;
  return c;
}

// Two cluster keys, for tagged frames (tests/auth_test.cc tests the tags themselves).
AuthKey test_key(uint8_t seed) {
  uint8_t raw[kAuthKeyBytes];
  for (size_t i = 0; i < kAuthKeyBytes; ++i) raw[i] = static_cast<uint8_t>(seed + i);
  AuthKey k;
  EXPECT_EQ(auth_key_from_bytes(raw, k), 0);
  return k;
}

// @p cfg with cluster key @p key: 0 none, 1 or 2 two different keys.
EncapConfig keyed(EncapConfig cfg, int key) {
  if (key != 0) cfg.auth = test_key(static_cast<uint8_t>(key * 64));
  return cfg;
}

// Encodes @p payload with @p cfg; the result is exactly the frame, nothing after it.
Frame encode(const EncapConfig& cfg, const std::string& payload,
             LinkType type = LinkType::Reliability) {
  Frame f(encap_header_len(cfg.kind) + payload.size() + encap_trailer_len(cfg));
  std::memcpy(f.data() + encap_header_len(cfg.kind), payload.data(), payload.size());
  size_t n = encode_frame(cfg, f.data(), type, static_cast<uint16_t>(payload.size()));
  EXPECT_EQ(n, f.size());
  return f;
}

uint16_t be16_at(const Frame& f, size_t at) {
  return static_cast<uint16_t>(f[at] << 8 | f[at + 1]);
}
uint32_t be32_at(const Frame& f, size_t at) {
  return static_cast<uint32_t>(be16_at(f, at)) << 16 | be16_at(f, at + 2);
}
void put16(Frame& f, size_t at, uint16_t v) {
  f[at] = static_cast<uint8_t>(v >> 8);
  f[at + 1] = static_cast<uint8_t>(v);
}

// Internet checksum written from RFC 1071 independently of inet_csum.cc: fold after every
// 16-bit word, pad an odd tail with zero.
uint16_t ref_csum(const std::vector<uint8_t>& bytes) {
  uint32_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 2) {
    sum += static_cast<uint32_t>(bytes[i] << 8) + (i + 1 < bytes.size() ? bytes[i + 1] : 0);
    sum = (sum & 0xFFFF) + (sum >> 16);
  }
  return static_cast<uint16_t>(~sum);
}

// Reference IPv4 header checksum of a frame's IP header (its checksum field taken as zero).
uint16_t ref_ip_csum(const Frame& f) {
  size_t ihl = static_cast<size_t>(f[kIpAt] & 0xF) * 4;
  std::vector<uint8_t> h(f.begin() + kIpAt, f.begin() + static_cast<long>(kIpAt + ihl));
  h[10] = h[11] = 0;
  return ref_csum(h);
}

// Reference UDP checksum: pseudo-header bytes, then the segment with its checksum zeroed.
uint16_t ref_udp_csum(const Frame& f) {
  size_t ulen = be16_at(f, kUdpAt + 4);
  std::vector<uint8_t> b(f.begin() + kIpAt + 12, f.begin() + kIpAt + 20);  // src, dst
  b.insert(b.end(), {0, kIpProtoUdp, static_cast<uint8_t>(ulen >> 8), static_cast<uint8_t>(ulen)});
  b.insert(b.end(), f.begin() + kUdpAt, f.begin() + static_cast<long>(kUdpAt + ulen));
  b[12 + 6] = b[12 + 7] = 0;
  uint16_t c = ref_csum(b);
  return c == 0 ? 0xFFFF : c;
}

// After a crafted change to a UDP frame, restore the checksums so only the change is wrong.
void refresh_checksums(Frame& f) {
  put16(f, kIpAt + 10, ref_ip_csum(f));
  if (be16_at(f, kUdpAt + 6) != 0) put16(f, kUdpAt + 6, ref_udp_csum(f));
}

struct DecodeResult {
  bool ok;
  DecodedFrame out;
  DecodeCounters counters;
};

DecodeResult decode(const EncapConfig& cfg, const Frame& f) {
  DecodeResult r{};
  r.ok = decode_frame(cfg, f.data(), f.size(), r.out, r.counters);
  return r;
}

// ---- checksums against reference values -------------------------------------------------

TEST(InetCsum, MatchesRfc1071Example) {
  // Do: sum the RFC 1071 section 3 example bytes 00 01 f2 03 f4 f5 f6 f7.
  const uint8_t b[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  // Expect: the RFC's folded sum 0xddf2, i.e. checksum 0x220d.
  EXPECT_EQ(csum_finish(csum_add(0, b, sizeof b)), 0x220d);
}

TEST(InetCsum, MatchesKnownIpv4HeaderChecksum) {
  // Do: checksum the well-known header 192.168.0.1 -> 192.168.0.199, UDP, total length 0x73.
  const uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                         0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  // Expect: 0xb861, as computed by hand for this header.
  EXPECT_EQ(ipv4_header_csum(h, sizeof h), 0xb861);
}

TEST(InetCsum, UdpChecksumMatchesIndependentlyComputedValue) {
  // Do: encode "hello" as a reliability frame 10.0.0.1 -> 10.0.0.2, port 47000.
  Frame f = encode(udp_cfg(), "hello");
  // Expect: 0x37bf, computed outside this code base (Python, RFC 768 pseudo-header).
  EXPECT_EQ(be16_at(f, kUdpAt + 6), 0x37bf);
}

TEST(InetCsum, OddLengthIsPaddedWithZero) {
  // Do: checksum 3 bytes, and the same 3 bytes followed by a zero byte.
  const uint8_t odd[] = {0x12, 0x34, 0x56};
  const uint8_t even[] = {0x12, 0x34, 0x56, 0x00};
  // Expect: identical results, equal to the reference.
  EXPECT_EQ(csum_finish(csum_add(0, odd, 3)), csum_finish(csum_add(0, even, 4)));
  EXPECT_EQ(csum_finish(csum_add(0, odd, 3)), ref_csum({0x12, 0x34, 0x56}));
}

TEST(InetCsum, UdpChecksumNeverZero) {
  // Do: find a 2-byte segment whose checksum computes to zero (sum 0xFFFF).
  const uint32_t pseudo = udp_pseudo_sum(0, 0, 2);  // 17 + 2
  uint16_t word = static_cast<uint16_t>(0xFFFF - pseudo);
  const uint8_t seg[] = {static_cast<uint8_t>(word >> 8), static_cast<uint8_t>(word)};
  ASSERT_EQ(csum_finish(csum_add(pseudo, seg, 2)), 0);
  // Expect: it is sent as 0xFFFF, since 0 means "no checksum".
  EXPECT_EQ(udp_csum(0, 0, seg, 2), 0xFFFF);
}

TEST(InetCsum, LargeBuffersMatchReference) {
  // Do: checksum 9000 bytes of 0xFF (maximal carries) and of random data.
  std::vector<uint8_t> ones(9000, 0xFF), rnd(9001);
  Rng rng(3);
  for (auto& b : rnd) b = static_cast<uint8_t>(rng.next());
  // Expect: the same as the fold-every-word reference.
  EXPECT_EQ(csum_finish(csum_add(0, ones.data(), ones.size())), ref_csum(ones));
  EXPECT_EQ(csum_finish(csum_add(0, rnd.data(), rnd.size())), ref_csum(rnd));
}

// ---- encode/decode round trips ---------------------------------------------------------------

TEST(Codec, HeaderLengthsAndMaxPayload) {
  // Do: ask for the header length and the largest payload of a 1500-byte MTU.
  // Expect: 18/46 bytes of headers; payloads fill the MTU plus the 14-byte Ethernet header.
  EXPECT_EQ(encap_header_len(Encap::L2), 18u);
  EXPECT_EQ(encap_header_len(Encap::Udp), 46u);
  EXPECT_EQ(max_payload(Encap::L2, 1500), 1496u);
  EXPECT_EQ(max_payload(Encap::Udp, 1500), 1468u);
}

TEST(Codec, L2EncodeWritesEveryHeaderField) {
  // Do: encode a 5-byte raw payload in L2.
  Frame f = encode(l2_cfg(), "abcde", LinkType::Raw);
  // Expect: dst MAC, src MAC, EtherType 0x88B5, link version 1, type Raw, length 5, payload.
  ASSERT_EQ(f.size(), 23u);
  EXPECT_EQ(Frame(f.begin(), f.begin() + 6), Frame(kDstMac.b.begin(), kDstMac.b.end()));
  EXPECT_EQ(Frame(f.begin() + 6, f.begin() + 12), Frame(kSrcMac.b.begin(), kSrcMac.b.end()));
  EXPECT_EQ(be16_at(f, 12), 0x88B5);
  EXPECT_EQ(f[14], 1);
  EXPECT_EQ(f[15], static_cast<uint8_t>(LinkType::Raw));
  EXPECT_EQ(be16_at(f, 16), 5);
  EXPECT_EQ(std::string(f.begin() + 18, f.end()), "abcde");
}

TEST(Codec, L2RoundTripReturnsEveryField) {
  // Do: encode a reliability payload in L2 and decode it.
  Frame f = encode(l2_cfg(), "payload!");
  auto r = decode(l2_cfg(), f);
  // Expect: accepted once; type, payload span, length, source MAC back; no IP address.
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.out.type, LinkType::Reliability);
  EXPECT_EQ(r.out.payload, f.data() + 18);
  EXPECT_EQ(r.out.payload_len, 8);
  EXPECT_EQ(r.out.src_mac, kSrcMac);
  EXPECT_EQ(r.out.src_ip, 0u);
  EXPECT_EQ(r.counters.accepted, 1u);
  EXPECT_EQ(r.counters.total_rejected(), 0u);
}

TEST(Codec, L2AcceptsEthernetPadding) {
  // Do: encode a 3-byte payload and pad the frame with zeros to the 60-byte Ethernet minimum.
  Frame f = encode(l2_cfg(), "xyz", LinkType::Raw);
  f.resize(60, 0);
  auto r = decode(l2_cfg(), f);
  // Expect: accepted; the payload ends where the link header says, not at the padding.
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.out.payload_len, 3);
  EXPECT_EQ(std::string(r.out.payload, r.out.payload + 3), "xyz");
}

TEST(Codec, L2EmptyPayloadRoundTrips) {
  // Do: encode and decode a zero-length payload.
  Frame f = encode(l2_cfg(), "");
  auto r = decode(l2_cfg(), f);
  // Expect: accepted with length 0.
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.out.payload_len, 0);
}

TEST(Codec, UdpEncodeWritesEveryHeaderField) {
  // Do: encode a 7-byte payload as UDP/IPv4 with the UDP checksum on.
  Frame f = encode(udp_cfg(), "1234567");
  // Expect: Ethernet, IPv4 and UDP fields as configured, both checksums as the reference's.
  ASSERT_EQ(f.size(), 46u + 7);
  EXPECT_EQ(Frame(f.begin(), f.begin() + 6), Frame(kDstMac.b.begin(), kDstMac.b.end()));
  EXPECT_EQ(be16_at(f, 12), 0x0800);
  EXPECT_EQ(f[kIpAt], 0x45);                           // version 4, IHL 5
  EXPECT_EQ(be16_at(f, kIpAt + 2), 20 + 8 + 4 + 7);    // total length
  EXPECT_EQ(be16_at(f, kIpAt + 6), 0x4000);            // DF, offset 0
  EXPECT_EQ(f[kIpAt + 8], 17);                         // ttl from the config
  EXPECT_EQ(f[kIpAt + 9], kIpProtoUdp);
  EXPECT_EQ(be16_at(f, kIpAt + 10), ref_ip_csum(f));
  EXPECT_EQ(be32_at(f, kIpAt + 12), kSrcIp);
  EXPECT_EQ(be32_at(f, kIpAt + 16), kDstIp);
  EXPECT_EQ(be16_at(f, kUdpAt), kDefaultUdpPort);
  EXPECT_EQ(be16_at(f, kUdpAt + 2), kDefaultUdpPort);
  EXPECT_EQ(be16_at(f, kUdpAt + 4), 8 + 4 + 7);
  EXPECT_EQ(be16_at(f, kUdpAt + 6), ref_udp_csum(f));
  EXPECT_EQ(f[42], kLinkVersion);
  EXPECT_EQ(be16_at(f, 44), 7);
}

TEST(Codec, UdpRoundTripWithChecksumReturnsEveryField) {
  // Do: encode an odd-length payload on a non-default port and decode it.
  EncapConfig cfg = udp_cfg();
  cfg.udp_port = 5000;
  Frame f = encode(cfg, "odd", LinkType::Raw);
  auto r = decode(cfg, f);
  // Expect: accepted; type, payload span, source MAC and source IP back.
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(be16_at(f, kUdpAt + 2), 5000);
  EXPECT_EQ(r.out.type, LinkType::Raw);
  EXPECT_EQ(r.out.payload, f.data() + 46);
  EXPECT_EQ(r.out.payload_len, 3);
  EXPECT_EQ(r.out.src_mac, kSrcMac);
  EXPECT_EQ(r.out.src_ip, kSrcIp);
  EXPECT_EQ(r.counters.accepted, 1u);
}

TEST(Codec, UdpChecksumCoversAPayloadSentApart) {
  // Do: encode frames whose payload's end is elsewhere (a message sent by reference: the
  // headers and the frame's head in one mbuf, the payload chained behind), heads of odd and
  // even length; join the parts as the wire does and decode.
  for (size_t head : {0u, 1u, 2u, 7u, 48u, 63u}) {
    for (size_t rest : {1u, 2u, 3u, 1000u, 1001u}) {
      std::string payload(head + rest, '\0');
      for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 37 + head);
      const EncapConfig cfg = udp_cfg();
      Frame f(encap_header_len(cfg.kind) + head);
      std::memcpy(f.data() + encap_header_len(cfg.kind), payload.data(), head);
      const std::vector<uint8_t> apart(payload.begin() + static_cast<long>(head), payload.end());
      encode_frame(cfg, f.data(), LinkType::Reliability, static_cast<uint16_t>(payload.size()), apart);
      f.insert(f.end(), apart.begin(), apart.end());
      // Expect: the checksum is the whole datagram's, and the frame is accepted (before, it
      // covered the head's part only: imago over UDP lost every message sent by reference).
      EXPECT_EQ(be16_at(f, kUdpAt + 6), ref_udp_csum(f)) << head << "+" << rest;
      EXPECT_TRUE(decode(cfg, f).ok) << head << "+" << rest;
    }
  }
}

TEST(InetCsum, AChecksumInTwoPartsEqualsTheWholes) {
  // Do: split datagrams at every kind of point, heads of 0xFF bytes among them (their sum
  // folds to 0xFFFFFFFF: adding the rest's to it must not wrap), and compare with the
  // checksum of the whole.
  Rng rng(11);
  for (int n = 0; n < 2000; ++n) {
    std::vector<uint8_t> d(1 + rng.next() % 3000);
    const bool ones = n % 2 == 0;
    for (auto& b : d) b = ones ? 0xFF : static_cast<uint8_t>(rng.next());
    if (ones) d.back() = static_cast<uint8_t>(rng.next());
    const size_t head = n % 4 == 0 ? (d.size() - 1) / 8 * 8 : rng.next() % d.size();
    // Expect: the same checksum (before, 1 datagram in a few hundred on a real stream was off).
    EXPECT_EQ(udp_csum2(0x0A000001, 0x0A000002, d.data(), head, d.data() + head, d.size() - head),
              udp_csum(0x0A000001, 0x0A000002, d.data(), d.size())) << n << ": " << head << "+" << d.size() - head;
  }
  // And a head whose sum with the pseudo-header is 0xFFFFFFFF exactly (its high word the rest
  // of it), before rests of every small length.
  for (size_t rest = 1; rest <= 40; ++rest) {
    std::vector<uint8_t> d(8 + rest);
    for (size_t i = 8; i < d.size(); ++i) d[i] = static_cast<uint8_t>(rng.next() | 1);
    const uint32_t high = 0xFFFFFFFFu - udp_pseudo_sum(0x0A000001, 0x0A000002, d.size());
    for (int i = 0; i < 4; ++i) d[i] = static_cast<uint8_t>(high >> (24 - 8 * i));
    EXPECT_EQ(udp_csum2(0x0A000001, 0x0A000002, d.data(), 8, d.data() + 8, rest),
              udp_csum(0x0A000001, 0x0A000002, d.data(), d.size())) << "8+" << rest;
  }
}

TEST(Codec, UdpRoundTripWithoutChecksum) {
  // Do: encode with the UDP checksum off and decode it.
  Frame f = encode(udp_cfg(false), "no checksum here");
  auto r = decode(udp_cfg(false), f);
  // Expect: the checksum field is 0 and the frame is accepted with every field.
  EXPECT_EQ(be16_at(f, kUdpAt + 6), 0);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.out.payload_len, 16);
  EXPECT_EQ(r.out.src_ip, kSrcIp);
  EXPECT_EQ(r.out.src_mac, kSrcMac);
}

TEST(Codec, UdpWithoutChecksumDoesNotVerifyPayload) {
  // Do: corrupt a payload byte of a frame sent without UDP checksum.
  Frame f = encode(udp_cfg(false), "data");
  f[46] ^= 0xFF;
  // Expect: still accepted (nothing to verify); the same change with a checksum is caught.
  EXPECT_TRUE(decode(udp_cfg(false), f).ok);
  Frame g = encode(udp_cfg(true), "data");
  g[46] ^= 0xFF;
  EXPECT_FALSE(decode(udp_cfg(true), g).ok);
}

TEST(Codec, UdpAcceptsEthernetPadding) {
  // Do: pad a short UDP frame to 60 bytes.
  Frame f = encode(udp_cfg(), "ab");
  f.resize(60, 0);
  auto r = decode(udp_cfg(), f);
  // Expect: accepted; the IP total length bounds the payload.
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.out.payload_len, 2);
}

TEST(Codec, UdpAcceptsIpOptions) {
  // Do: insert 4 bytes of NOP options into the IP header (IHL 6), UDP checksum off.
  Frame f = encode(udp_cfg(false), "opts");
  f.insert(f.begin() + kUdpAt, {0x01, 0x01, 0x01, 0x01});
  f[kIpAt] = 0x46;
  put16(f, kIpAt + 2, static_cast<uint16_t>(be16_at(f, kIpAt + 2) + 4));
  put16(f, kIpAt + 10, ref_ip_csum(f));  // UDP moved, so only the IP checksum is refreshed
  auto r = decode(udp_cfg(false), f);
  // Expect: accepted; UDP and the payload are found after the options.
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.out.payload, f.data() + 50);
  EXPECT_EQ(std::string(r.out.payload, r.out.payload + r.out.payload_len), "opts");
}

TEST(Codec, UdpChecksumComputingToZeroIsSentAsFfffAndAccepted) {
  // Do: pick the 2-byte payload that makes the segment sum 0xFFFF (checksum 0): with a zero
  // payload word the checksum is c, so payload word c completes the sum.
  Frame zero = encode(udp_cfg(), std::string(2, '\0'));
  uint16_t c = be16_at(zero, kUdpAt + 6);
  Frame f = encode(udp_cfg(), std::string{static_cast<char>(c >> 8), static_cast<char>(c)});
  // Expect: the checksum is sent as 0xFFFF (0 would mean "none") and the frame is accepted.
  EXPECT_EQ(be16_at(f, kUdpAt + 6), 0xFFFF);
  EXPECT_EQ(ref_udp_csum(f), 0xFFFF);
  EXPECT_TRUE(decode(udp_cfg(), f).ok);
}

TEST(Codec, MulticastDstIpUsesGroupMac) {
  // Do: encode to group 239.129.2.3 (bit 23 set, which the mapping drops).
  EncapConfig cfg = udp_cfg();
  cfg.dst_ip = 0xEF810203;
  Frame f = encode(cfg, "m");
  // Expect: dst MAC 01:00:5e:01:02:03 whatever cfg.dst_mac says; dst IP unchanged.
  const Frame want = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
  EXPECT_EQ(Frame(f.begin(), f.begin() + 6), want);
  EXPECT_EQ(be32_at(f, kIpAt + 16), 0xEF810203u);
  EXPECT_TRUE(decode(cfg, f).ok);
}

TEST(Codec, MulticastHelpers) {
  // Do: classify addresses around 224.0.0.0/4 and map a group to its MAC.
  // Expect: only 224.0.0.0 .. 239.255.255.255 is multicast; the MAC keeps the low 23 bits.
  EXPECT_TRUE(ipv4_is_multicast(0xE0000001));
  EXPECT_TRUE(ipv4_is_multicast(0xEFFFFFFF));
  EXPECT_FALSE(ipv4_is_multicast(0xDFFFFFFF));
  EXPECT_FALSE(ipv4_is_multicast(0xF0000000));
  EXPECT_EQ(ipv4_multicast_mac(0xE0FFFFFF), (MacAddr{{0x01, 0x00, 0x5e, 0x7f, 0xff, 0xff}}));
  EXPECT_TRUE(ipv4_multicast_mac(0xE0000001).is_multicast());
}

TEST(Codec, UnicastDstIpUsesConfiguredMac) {
  // Do: encode to a unicast IP.
  Frame f = encode(udp_cfg(), "u");
  // Expect: the configured destination MAC.
  EXPECT_EQ(Frame(f.begin(), f.begin() + 6), Frame(kDstMac.b.begin(), kDstMac.b.end()));
}

TEST(Codec, DecodeErrorNamesAreDistinct) {
  // Do: name every reason, and one past the end.
  std::vector<std::string> names;
  for (size_t i = 0; i < kDecodeErrorCount; ++i) {
    names.emplace_back(decode_error_name(static_cast<DecodeError>(i)));
  }
  // Expect: non-empty, pairwise distinct names; the first is "short"; out of range is "unknown".
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(names[i].empty());
    for (size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
  }
  EXPECT_EQ(names[0], "short");
  EXPECT_EQ(names[static_cast<size_t>(DecodeError::IpChecksum)], "ip_checksum");
  EXPECT_STREQ(decode_error_name(DecodeError::Count_), "unknown");
}

TEST(Codec, CountersAddAndTotal) {
  // Do: add one set of counters to another.
  DecodeCounters a, b;
  a.accepted = 3;
  a.rejected[1] = 2;
  b.accepted = 4;
  b.rejected[1] = 5;
  b.rejected[13] = 1;
  a.add(b);
  // Expect: element-wise sums, and total_rejected over every reason.
  EXPECT_EQ(a.accepted, 7u);
  EXPECT_EQ(a.rejected[1], 7u);
  EXPECT_EQ(a.total_rejected(), 8u);
}

// ---- one crafted frame per rejection reason -----------------------------------------------

struct BadFrameCase {
  const char* name;
  bool udp;
  const char* payload;
  std::function<void(Frame&)> craft;
  DecodeError want;
  int tx_key = 0;  ///< the sender's cluster key (see keyed())
  int rx_key = 0;  ///< the receiver's
};

void PrintTo(const BadFrameCase& c, std::ostream* os) { *os << c.name; }

class DecodeRejects : public ::testing::TestWithParam<BadFrameCase> {};

TEST_P(DecodeRejects, CountsExactlyItsReason) {
  // Do: encode a valid frame, craft the one defect, decode (with the receiver's key).
  const BadFrameCase& c = GetParam();
  EncapConfig cfg = keyed(c.udp ? udp_cfg() : l2_cfg(), c.tx_key);
  Frame f = encode(cfg, c.payload);
  ASSERT_TRUE(decode(cfg, f).ok) << "the unmodified frame must be valid";
  c.craft(f);
  auto r = decode(keyed(c.udp ? udp_cfg() : l2_cfg(), c.rx_key), f);
  // Expect: rejected; that reason's counter is 1 and no other counter moved.
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.counters.accepted, 0u);
  for (size_t i = 0; i < kDecodeErrorCount; ++i) {
    EXPECT_EQ(r.counters.rejected[i], i == static_cast<size_t>(c.want) ? 1u : 0u)
        << decode_error_name(static_cast<DecodeError>(i));
  }
}

void set_ip_total(Frame& f, uint16_t v) { put16(f, kIpAt + 2, v); }

const BadFrameCase kBadFrames[] = {
    {"L2ShorterThanEthernet", false, "p", [](Frame& f) { f.resize(13); }, DecodeError::Short},
    {"L2ShorterThanLinkHeader", false, "p", [](Frame& f) { f.resize(17); }, DecodeError::Short},
    {"UdpShorterThanIpHeader", true, "p", [](Frame& f) { f.resize(kIpAt + 19); },
     DecodeError::Short},
    {"UdpIpLengthLeavesNoUdpHeader", true, "p",
     [](Frame& f) { set_ip_total(f, 20 + 7); refresh_checksums(f); }, DecodeError::Short},
    {"UdpLeavesNoLinkHeader", true, "p",
     [](Frame& f) {
       set_ip_total(f, 20 + 8 + 3);
       put16(f, kUdpAt + 4, 8 + 3);
       refresh_checksums(f);
     },
     DecodeError::Short},
    {"L2WrongEtherType", false, "p", [](Frame& f) { put16(f, 12, 0x0800); },
     DecodeError::EtherType},
    {"UdpWrongEtherType", true, "p", [](Frame& f) { put16(f, 12, 0x86DD); },
     DecodeError::EtherType},
    {"IpVersion6", true, "p", [](Frame& f) { f[kIpAt] = 0x65; refresh_checksums(f); },
     DecodeError::IpVersion},
    {"IpHeaderLengthBelow5", true, "p", [](Frame& f) { f[kIpAt] = 0x44; },
     DecodeError::IpHeaderLength},
    {"IpHeaderLengthBeyondFrame", true, "p", [](Frame& f) { f[kIpAt] = 0x4F; },
     DecodeError::IpHeaderLength},
    {"IpTotalLengthBeyondFrame", true, "p",
     [](Frame& f) {
       set_ip_total(f, static_cast<uint16_t>(f.size() - kIpAt + 1));
       refresh_checksums(f);
     },
     DecodeError::IpTotalLength},
    {"IpTotalLengthBelowHeader", true, "p",
     [](Frame& f) { set_ip_total(f, 19); refresh_checksums(f); }, DecodeError::IpTotalLength},
    {"IpChecksumWrong", true, "p", [](Frame& f) { f[kIpAt + 11] ^= 0x01; },
     DecodeError::IpChecksum},
    {"IpHeaderBitFlipped", true, "p", [](Frame& f) { f[kIpAt + 1] ^= 0x04; },
     DecodeError::IpChecksum},
    {"IpMoreFragments", true, "p",
     [](Frame& f) { put16(f, kIpAt + 6, 0x2000); refresh_checksums(f); },
     DecodeError::IpFragment},
    {"IpFragmentOffset", true, "p",
     [](Frame& f) { put16(f, kIpAt + 6, 0x4001); refresh_checksums(f); },
     DecodeError::IpFragment},
    {"IpProtocolTcp", true, "p", [](Frame& f) { f[kIpAt + 9] = 6; refresh_checksums(f); },
     DecodeError::IpProtocol},
    {"UdpWrongDstPort", true, "p",
     [](Frame& f) { put16(f, kUdpAt + 2, kDefaultUdpPort + 1); refresh_checksums(f); },
     DecodeError::UdpPort},
    {"UdpLengthAboveIpLength", true, "pp",
     [](Frame& f) { put16(f, kUdpAt + 4, static_cast<uint16_t>(be16_at(f, kUdpAt + 4) + 1)); },
     DecodeError::UdpLength},
    {"UdpLengthBelowHeader", true, "pp", [](Frame& f) { put16(f, kUdpAt + 4, 7); },
     DecodeError::UdpLength},
    {"UdpChecksumWrong", true, "payload", [](Frame& f) { f.back() ^= 0x80; },
     DecodeError::UdpChecksum},
    {"L2LinkVersion2", false, "p", [](Frame& f) { f[14] = 2; }, DecodeError::LinkVersion},
    {"UdpLinkVersion0", true, "p", [](Frame& f) { f[42] = 0; refresh_checksums(f); },
     DecodeError::LinkVersion},
    {"L2LinkLengthPastFrame", false, "pppp", [](Frame& f) { put16(f, 16, 5); },
     DecodeError::LinkLength},
    {"UdpLinkLengthShort", true, "pppp", [](Frame& f) { put16(f, 44, 3); refresh_checksums(f); },
     DecodeError::LinkLength},
    {"UdpLinkLengthLong", true, "pppp", [](Frame& f) { put16(f, 44, 5); refresh_checksums(f); },
     DecodeError::LinkLength},
    {"L2LinkTypeZero", false, "p", [](Frame& f) { f[15] = 0; }, DecodeError::LinkType},
    {"UdpLinkTypeUnknown", true, "p", [](Frame& f) { f[43] = 4; refresh_checksums(f); },
     DecodeError::LinkType},
    {"L2TaggedLinkTypeUnknown", false, "p", [](Frame& f) { f[15] = kLinkAuthFlag | 4; },
     DecodeError::LinkType, 1, 1},
    {"L2TaggedLengthPastTag", false, "pppp", [](Frame& f) { put16(f, 16, 5); },
     DecodeError::LinkLength, 1, 1},
    {"UdpTaggedCutBeforeTagEnd", true, "pppp",
     [](Frame& f) {
       f.resize(f.size() - 1);
       set_ip_total(f, static_cast<uint16_t>(f.size() - kIpAt));
       put16(f, kUdpAt + 4, static_cast<uint16_t>(f.size() - kUdpAt));
       refresh_checksums(f);
     },
     DecodeError::LinkLength, 1, 1},
    {"L2UntaggedToKeyedNode", false, "p", [](Frame&) {}, DecodeError::AuthMissing, 0, 1},
    {"UdpUntaggedToKeyedNode", true, "p", [](Frame&) {}, DecodeError::AuthMissing, 0, 1},
    {"L2FlagClearedTagLeft", false, "p", [](Frame& f) { f[15] &= kLinkTypeMask; },
     DecodeError::AuthMissing, 1, 1},
    {"L2PayloadByteChanged", false, "payload", [](Frame& f) { f[20] ^= 0x01; },
     DecodeError::AuthBad, 1, 1},
    {"UdpTagByteChanged", true, "payload", [](Frame& f) { f.back() ^= 0x80; refresh_checksums(f); },
     DecodeError::AuthBad, 1, 1},
    {"L2OtherClusterKey", false, "payload", [](Frame&) {}, DecodeError::AuthBad, 1, 2},
    {"UdpOtherClusterKey", true, "payload", [](Frame&) {}, DecodeError::AuthBad, 1, 2},
    {"L2TaggedToNodeWithoutKey", false, "p", [](Frame&) {}, DecodeError::AuthUnexpected, 1, 0},
    {"UdpTaggedToNodeWithoutKey", true, "p", [](Frame&) {}, DecodeError::AuthUnexpected, 1, 0},
};

INSTANTIATE_TEST_SUITE_P(EveryReason, DecodeRejects, ::testing::ValuesIn(kBadFrames),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Codec, EveryDecodeErrorHasACraftedFrame) {
  // Do: collect the reasons the crafted-frame table provokes.
  std::vector<bool> seen(kDecodeErrorCount, false);
  for (const auto& c : kBadFrames) seen[static_cast<size_t>(c.want)] = true;
  // Expect: every reason is covered, so a new reason without a test fails here.
  for (size_t i = 0; i < kDecodeErrorCount; ++i) {
    EXPECT_TRUE(seen[i]) << decode_error_name(static_cast<DecodeError>(i));
  }
}

// ---- robustness --------------------------------------------------------------------------

// A random frame: pure noise, or a valid frame with a few bytes flipped and its length cut
// or extended.
Frame random_frame(Rng& rng, const EncapConfig& cfg) {
  if (rng.below(4) == 0) {
    Frame f(rng.below(120));
    for (auto& b : f) b = static_cast<uint8_t>(rng.next());
    return f;
  }
  LinkType type = rng.below(2) ? LinkType::Raw : LinkType::Reliability;
  Frame f = encode(cfg, std::string(rng.below(64), 'x'), type);
  for (uint64_t flips = rng.below(4); flips > 0; --flips) {
    f[rng.below(f.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
  }
  if (rng.below(4) == 0) f.resize(rng.below(f.size() + 16), static_cast<uint8_t>(rng.next()));
  return f;
}

TEST(CodecRobustness, RandomAndMutatedFramesAreAllAccountedFor) {
  // Do: decode 200000 random or mutated frames, alternating L2 and UDP, one in three tagged
  // with a cluster key, each in an exactly-sized buffer (so a sanitizer build catches any
  // read past the end).
  Rng rng(0xC0DEC);
  DecodeCounters total;
  const uint64_t kFrames = 200000;
  const EncapConfig l2_keyed = keyed(l2_cfg(), 1), udp_keyed = keyed(udp_cfg(), 1);
  for (uint64_t i = 0; i < kFrames; ++i) {
    EncapConfig cfg = i % 3 == 0 ? (i % 2 ? udp_keyed : l2_keyed) : i % 2 ? udp_cfg(i % 4 == 1) : l2_cfg();
    Frame f = random_frame(rng, cfg);
    DecodedFrame out;
    if (decode_frame(cfg, f.data(), f.size(), out, total)) {
      // Expect: an accepted payload lies inside the frame.
      ASSERT_GE(out.payload, f.data());
      ASSERT_LE(out.payload + out.payload_len, f.data() + f.size());
    }
  }
  // Expect: every frame counted once, with both outcomes and many reasons exercised.
  EXPECT_EQ(total.accepted + total.total_rejected(), kFrames);
  EXPECT_GT(total.accepted, 0u);
  size_t reasons = 0;
  for (uint64_t r : total.rejected) reasons += r > 0;
  EXPECT_GE(reasons, 10u);
}

}  // namespace
}  // namespace imago::dp
