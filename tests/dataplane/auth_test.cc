// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for dataplane/auth.h and the tagged frames of dataplane/encap.h: the tag against
// an independent implementation, every changed byte rejected, another key rejected, tags
// missing or unexpected rejected, the MTU accounting, and the key file formats. No EAL.
#include "dataplane/auth.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/encap.h"

namespace imago::dp {
namespace {

using Bytes = std::vector<uint8_t>;

AuthKey key_from(uint8_t first) {
  uint8_t raw[kAuthKeyBytes];
  for (size_t i = 0; i < kAuthKeyBytes; ++i) raw[i] = static_cast<uint8_t>(first + i);
  AuthKey k;
  EXPECT_EQ(auth_key_from_bytes(raw, k), 0);
  return k;
}

EncapConfig config(Encap kind, const AuthKey* key) {
  EncapConfig c;
  c.kind = kind;
  c.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 1}};
  c.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 2}};
  c.src_ip = 0x0A000001;
  c.dst_ip = 0x0A000002;
  if (key) c.auth = *key;
  return c;
}

Bytes encode(const EncapConfig& cfg, const std::string& payload) {
  Bytes f(encap_header_len(cfg.kind) + payload.size() + encap_trailer_len(cfg));
  std::memcpy(f.data() + encap_header_len(cfg.kind), payload.data(), payload.size());
  EXPECT_EQ(encode_frame(cfg, f.data(), LinkType::Reliability, static_cast<uint16_t>(payload.size())), f.size());
  return f;
}

bool decodes(const EncapConfig& cfg, const Bytes& f, DecodeError* why = nullptr) {
  DecodedFrame out;
  DecodeCounters c;
  bool ok = decode_frame(cfg, f.data(), f.size(), out, c);
  for (size_t i = 0; i < kDecodeErrorCount && why; ++i)
    if (c.rejected[i]) *why = static_cast<DecodeError>(i);
  return ok;
}

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) s += (std::snprintf(b, sizeof b, "%02x", p[i]), b);
  return s;
}

// A file under /tmp holding @p bytes, removed when the test ends.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& bytes) {
    char name[] = "/tmp/imago_auth_test_XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(fd);
    path = name;
  }
  ~TempFile() { unlink(path.c_str()); }
};

// ---- the tag ----------------------------------------------------------------------------

TEST(AuthTag, MatchesAnIndependentBlake2bImplementation) {
  // Do: tag the 9 covered bytes of a tagged L2 frame carrying "hello" (link header 01 82 00 05
  // and the payload) under the key 00 01 .. 1f.
  AuthKey k = key_from(0);
  Bytes f = encode(config(Encap::L2, &k), "hello");
  // Expect: the link header has the tag flag, and the trailer is keyed BLAKE2b-128 with the
  // personalisation "imago-link-v1", as Python computes it: hashlib.blake2b(b"\x01\x82\x00\x05
  // hello", key=bytes(range(32)), digest_size=16, person=b"imago-link-v1").hexdigest().
  ASSERT_EQ(f.size(), 18u + 5 + 16);
  EXPECT_EQ(f[15], kLinkAuthFlag | static_cast<uint8_t>(LinkType::Reliability));
  EXPECT_EQ(hex(f.data() + 23, 16), "0ed5c10b8f127a04c5bfdcfa6b3ef7d7");
  uint8_t tag[kAuthTagBytes];
  auth_tag(k, f.data() + 14, 9, tag);
  EXPECT_EQ(hex(tag, sizeof tag), "0ed5c10b8f127a04c5bfdcfa6b3ef7d7");
}

TEST(AuthTag, VerifiesWhatItSigned) {
  // Do: tag 0, 1, 64, 1024 and 8192 bytes, then verify each.
  AuthKey k = key_from(7);
  for (size_t n : {0u, 1u, 64u, 1024u, 8192u}) {
    Bytes data(n, static_cast<uint8_t>(n));
    uint8_t tag[kAuthTagBytes];
    auth_tag(k, data.data(), n, tag);
    // Expect: accepted; with one more byte, or a changed tag, refused.
    EXPECT_TRUE(auth_verify(k, data.data(), n, tag)) << n;
    data.push_back(0);
    EXPECT_FALSE(auth_verify(k, data.data(), n + 1, tag)) << n;
    tag[n % kAuthTagBytes] ^= 1;
    EXPECT_FALSE(auth_verify(k, data.data(), n, tag)) << n;
  }
}

TEST(AuthTag, OtherKeyRefuses) {
  // Do: tag with one key, verify with a key differing in one bit.
  AuthKey a = key_from(1), b = a;
  b.bytes[31] ^= 0x01;
  const uint8_t data[] = "a frame";
  uint8_t tag[kAuthTagBytes];
  auth_tag(a, data, sizeof data, tag);
  // Expect: refused.
  EXPECT_TRUE(auth_verify(a, data, sizeof data, tag));
  EXPECT_FALSE(auth_verify(b, data, sizeof data, tag));
}

// ---- tagged frames ---------------------------------------------------------------------------

TEST(AuthFrame, RoundTripsInBothEncapsulations) {
  // Do: encode and decode "payload" with a key, L2 and UDP.
  AuthKey k = key_from(3);
  for (Encap kind : {Encap::L2, Encap::Udp}) {
    EncapConfig cfg = config(kind, &k);
    Bytes f = encode(cfg, "payload");
    DecodedFrame out;
    DecodeCounters c;
    // Expect: accepted; the payload is the payload, the tag not part of it; frame = headers
    // + payload + 16.
    ASSERT_TRUE(decode_frame(cfg, f.data(), f.size(), out, c));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.payload), out.payload_len), "payload");
    EXPECT_EQ(f.size(), encap_header_len(kind) + 7 + kAuthTagBytes);
    EXPECT_EQ(c.accepted, 1u);
  }
}

TEST(AuthFrame, EveryCoveredByteChangedIsRejected) {
  // Do: in a tagged L2 frame, flip each bit of every byte from the link header to the end of
  // the tag, one at a time.
  AuthKey k = key_from(9);
  EncapConfig cfg = config(Encap::L2, &k);
  const Bytes good = encode(cfg, "sixteen byte msg");
  for (size_t at = sizeof(EthHdr); at < good.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes f = good;
      f[at] ^= static_cast<uint8_t>(1u << bit);
      // Expect: never accepted (most fail the tag; header bits fail their own checks).
      EXPECT_FALSE(decodes(cfg, f)) << "byte " << at << " bit " << bit;
    }
  }
}

TEST(AuthFrame, EveryPayloadOrTagByteChangedFailsTheTag) {
  // Do: flip one bit in each payload and tag byte of a tagged L2 frame.
  AuthKey k = key_from(10);
  EncapConfig cfg = config(Encap::L2, &k);
  const Bytes good = encode(cfg, std::string(64, 'm'));
  for (size_t at = encap_header_len(Encap::L2); at < good.size(); ++at) {
    Bytes f = good;
    f[at] ^= 0x10;
    DecodeError why = DecodeError::Count_;
    // Expect: rejected as auth_bad.
    EXPECT_FALSE(decodes(cfg, f, &why));
    EXPECT_EQ(why, DecodeError::AuthBad) << "byte " << at;
  }
}

TEST(AuthFrame, TagDoesNotCoverTheEthernetAddresses) {
  // Do: change the source MAC of a tagged L2 frame (as a bridge would not, but the allow-list
  // decides about addresses, not the tag).
  AuthKey k = key_from(11);
  EncapConfig cfg = config(Encap::L2, &k);
  Bytes f = encode(cfg, "x");
  f[6] ^= 0x02;
  // Expect: still accepted: addresses are the allow-list's business (PROTOCOL.md).
  EXPECT_TRUE(decodes(cfg, f));
}

TEST(AuthFrame, WrongKeyMissingOrUnexpectedTagIsRejectedByReason) {
  // Do: decode (a) a frame tagged with another key, (b) an untagged frame at a keyed node,
  // (c) a tagged frame at a node without a key.
  AuthKey a = key_from(20), b = key_from(21);
  DecodeError why = DecodeError::Count_;
  // Expect: auth_bad, auth_missing, auth_unexpected.
  EXPECT_FALSE(decodes(config(Encap::Udp, &b), encode(config(Encap::Udp, &a), "m"), &why));
  EXPECT_EQ(why, DecodeError::AuthBad);
  EXPECT_FALSE(decodes(config(Encap::L2, &a), encode(config(Encap::L2, nullptr), "m"), &why));
  EXPECT_EQ(why, DecodeError::AuthMissing);
  EXPECT_FALSE(decodes(config(Encap::L2, nullptr), encode(config(Encap::L2, &a), "m"), &why));
  EXPECT_EQ(why, DecodeError::AuthUnexpected);
}

TEST(AuthFrame, TagAfterPaddedShortL2FrameStillVerifies) {
  // Do: a tagged 1-byte L2 frame padded to Ethernet's 60-byte minimum.
  AuthKey k = key_from(30);
  EncapConfig cfg = config(Encap::L2, &k);
  Bytes f = encode(cfg, "x");
  f.resize(60, 0);
  // Expect: accepted: the tag sits right after the payload the link header measures.
  EXPECT_TRUE(decodes(cfg, f));
}

TEST(AuthFrame, MaxPayloadLeavesRoomForTheTag) {
  // Do: ask for the largest payload of a 1500-byte MTU with and without a key.
  AuthKey k = key_from(40);
  // Expect: 16 bytes less with a key, in both encapsulations; the frame then fits exactly.
  EXPECT_EQ(max_payload(config(Encap::L2, nullptr), 1500), 1496u);
  EXPECT_EQ(max_payload(config(Encap::L2, &k), 1500), 1480u);
  EXPECT_EQ(max_payload(config(Encap::Udp, &k), 1500), 1452u);
  EncapConfig cfg = config(Encap::Udp, &k);
  Bytes f = encode(cfg, std::string(max_payload(cfg, 1500), 'z'));
  EXPECT_EQ(f.size(), 1500u + sizeof(EthHdr));
}

// ---- keys ------------------------------------------------------------------------------

TEST(AuthKeyLoad, ReadsRawAndHexFiles) {
  // Do: load the same key as 32 raw bytes, as 64 hex digits, and as hex with a newline.
  std::string raw;
  for (int i = 0; i < 32; ++i) raw += static_cast<char>(0xA0 + i);
  std::string hexed = hex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
  TempFile f1(raw), f2(hexed), f3(hexed + "\n");
  AuthKey k1, k2, k3;
  std::string err;
  // Expect: all three load, to the same key.
  ASSERT_EQ(auth_key_load(f1.path, k1, &err), 0) << err;
  ASSERT_EQ(auth_key_load(f2.path, k2, &err), 0) << err;
  ASSERT_EQ(auth_key_load(f3.path, k3, &err), 0) << err;
  EXPECT_EQ(0, std::memcmp(k1.bytes.data(), raw.data(), 32));
  EXPECT_EQ(k1.bytes, k2.bytes);
  EXPECT_EQ(k1.bytes, k3.bytes);
}

TEST(AuthKeyLoad, AKeyOthersMayReadIsTakenAndSaid) {
  // An outside tester: a world-readable key file was taken without a word.
  TempFile f(std::string(32, '\x5a'));  // mkstemp: 0600
  AuthKey k;
  std::string err;
  testing::internal::CaptureStderr();
  ASSERT_EQ(auth_key_load(f.path, k, &err), 0) << err;
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "mode 600: nothing to say";
  ASSERT_EQ(chmod(f.path.c_str(), 0644), 0);
  testing::internal::CaptureStderr();
  ASSERT_EQ(auth_key_load(f.path, k, &err), 0) << err;
  EXPECT_NE(testing::internal::GetCapturedStderr().find("is open to other users (mode 644): chmod 600 it"),
            std::string::npos);
}

TEST(AuthKeyLoad, RefusesWhatIsNotAKey) {
  // Do: load a missing file, 31 and 33 raw bytes, 63 hex digits, a non-hex digit, and zeros.
  std::string err;
  AuthKey k;
  TempFile short_raw(std::string(31, 'k')), long_raw(std::string(33, 'k')), short_hex(std::string(63, 'a')),
      bad_hex(std::string(63, 'a') + "g"), zeros(std::string(32, '\0')), zero_hex(std::string(64, '0'));
  // Expect: -ENOENT for the missing file; -EINVAL with a reason for the others.
  EXPECT_EQ(auth_key_load("/nonexistent/imago.key", k, &err), -ENOENT);
  EXPECT_NE(err.find("/nonexistent/imago.key"), std::string::npos);
  for (const TempFile* f : {&short_raw, &long_raw, &short_hex, &bad_hex, &zeros, &zero_hex}) {
    err.clear();
    EXPECT_EQ(auth_key_load(f->path, k, &err), -EINVAL) << f->path;
    EXPECT_NE(err.find("holds no key"), std::string::npos) << err;
  }
}

// An outside tester: a FIFO given as the key file held the start for ever (opening it waits
// for a writer), a directory was "cannot read key file" with no reason, and /dev/zero was to
// be made a key with `head -c 32 /dev/urandom > /dev/zero`.
TEST(AuthKeyLoad, AFileThatIsNotRegularIsRefusedUnread) {
  char dir[] = "/tmp/imago-auth-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string(dir), std::string("/dev/zero")}) {
    // Do: load it on a thread of its own, a FIFO no process writes to among them.
    auto load = std::async(std::launch::async, [path] {
      AuthKey k;
      std::string err;
      const int rc = auth_key_load(path, k, &err);
      return std::make_pair(rc, err);
    });
    if (load.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << path << ": still waiting after 5 s";
      close(open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // a writer comes and goes: the wait ends
      load.wait();
      continue;
    }
    // Expect: refused at once, saying it is not a regular file; no advice to write a key there.
    const auto [rc, err] = load.get();
    EXPECT_EQ(rc, -EINVAL) << path;
    EXPECT_NE(err.find(path + " is not a regular file"), std::string::npos) << err;
    EXPECT_EQ(err.find("make one with"), std::string::npos) << err;
  }
  unlink(fifo.c_str());
  rmdir(dir);
}

TEST(AuthKeyLoad, FromBytesWantsExactlyOneKey) {
  // Do: make keys from 16 bytes, 32 zero bytes and 32 good bytes.
  uint8_t b[kAuthKeyBytes] = {};
  AuthKey k;
  // Expect: only the last works.
  EXPECT_EQ(auth_key_from_bytes(std::span<const uint8_t>(b, 16), k), -EINVAL);
  EXPECT_EQ(auth_key_from_bytes(b, k), -EINVAL);
  b[0] = 1;
  EXPECT_EQ(auth_key_from_bytes(b, k), 0);
}

}  // namespace
}  // namespace imago::dp
