// SPDX-License-Identifier: BSD-3-Clause
// Unit tests of reliability/codec.h and wire.h: byte order and offsets, the compact record
// length, and one crafted frame per header rejection reason.
#include "reliability/codec.h"

#include <gtest/gtest.h>

#include <vector>

namespace imago::rel {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes frame(uint8_t type = 3, bool crc = true) {
  Bytes f(sizeof(FrameHeader));
  HeaderOut h{static_cast<FrameType>(type), 0, 0x01020304, 5,          6,
              0x1112131415161718ull,        9, 0xA0B0C0D0, 0xFFFFFFFF, kCreditUnlimited};
  encode_header(h, f.data());
  finish_frame(f.data(), f.size(), crc);
  return f;
}

TEST(RelCodecTest, HeaderFieldsAreBigEndianAtDocumentedOffsets) {
  // Do: encode a header.
  Bytes f = frame();
  // Expect: version/type first, node id big-endian at 4, token at 16, seq at 32.
  EXPECT_EQ(f[0], kWireVersion);
  EXPECT_EQ(f[1], 3);
  EXPECT_EQ(f[4], 0x01);
  EXPECT_EQ(f[7], 0x04);
  EXPECT_EQ(f[16], 0x11);
  EXPECT_EQ(f[23], 0x18);
  EXPECT_EQ(f[32], 0xA0);
  Header h;
  std::span<const uint8_t> body;
  ASSERT_EQ(decode_header(f, true, &h, &body), Reject::kNone);
  EXPECT_EQ(h.src_node, 0x01020304u);
  EXPECT_EQ(h.src_token, 0x1112131415161718ull);
  EXPECT_EQ(h.seq, 0xA0B0C0D0u);
  EXPECT_TRUE(body.empty());
}

TEST(RelCodecTest, RecordLengthIsOneByteBelow255AndEscapedAbove) {
  uint8_t buf[16];
  // Expect: 254 bytes -> flags + 1 length byte; 255 -> flags + 0xFF + Be16.
  EXPECT_EQ(encode_record_header(buf, 0, 0, false, 254), 2u);
  EXPECT_EQ(buf[1], 254);
  EXPECT_EQ(encode_record_header(buf, 0, 0, false, 255), 4u);
  EXPECT_EQ(buf[1], kLenEscape);
  EXPECT_EQ(buf[2], 0);
  EXPECT_EQ(buf[3], 255);
  EXPECT_EQ(encode_record_header(buf, 0, 7, true, 10), 6u);
  EXPECT_EQ(buf[0] & rec_flag::kSeq, rec_flag::kSeq);
}

TEST(RelCodecTest, RecordReaderRoundTripsAndRejectsTruncation) {
  Bytes body(64);
  size_t n = encode_record_header(body.data(), rec_flag::kMore, 0, false, 3);
  n += 3;
  n += encode_record_header(body.data() + n, 0, 100, true, 2);
  n += 2;
  body.resize(n);
  RecordReader rd(body, 50);
  Record r;
  ASSERT_EQ(rd.next(&r), 1);
  EXPECT_EQ(r.seq, 50u);
  EXPECT_EQ(r.flags, rec_flag::kMore);
  ASSERT_EQ(rd.next(&r), 1);
  EXPECT_EQ(r.seq, 100u);
  EXPECT_EQ(rd.next(&r), 0);
  // Do: cut the last byte. Expect: -EBADMSG.
  body.pop_back();
  RecordReader bad(body, 50);
  ASSERT_EQ(bad.next(&r), 1);
  EXPECT_EQ(bad.next(&r), -EBADMSG);
}

TEST(RelCodecTest, EveryHeaderRejectionHasItsReason) {
  Header h;
  std::span<const uint8_t> body;
  Bytes f = frame();
  EXPECT_EQ(decode_header(std::span(f).first(10), true, &h, &body), Reject::kTooShort);
  Bytes v = f;
  v[0] = 9;
  EXPECT_EQ(decode_header(v, false, &h, &body), Reject::kBadVersion);
  EXPECT_EQ(decode_header(frame(8, false), false, &h, &body), Reject::kBadType);  // 7 is GROUP_PARITY
  Bytes fl = frame(3, false);
  fl[2] = 0x80;
  EXPECT_EQ(decode_header(fl, false, &h, &body), Reject::kBadFlags);
  Bytes c = f;
  c[40] ^= 1;
  EXPECT_EQ(decode_header(c, true, &h, &body), Reject::kBadCrc);
  EXPECT_EQ(decode_header(frame(3, false), true, &h, &body), Reject::kMissingCrc);
  Bytes s = frame(3, false);
  s[3] = kMaxSackRanges + 1;
  EXPECT_EQ(decode_header(s, false, &h, &body), Reject::kBadSack);
  s[3] = 2;  // two ranges announced, none present
  EXPECT_EQ(decode_header(s, false, &h, &body), Reject::kTooShort);
  Bytes a = frame(4, false);
  a.push_back(0);  // an ACK frame has no body
  EXPECT_EQ(decode_header(a, false, &h, &body), Reject::kBadRecord);
}

}  // namespace
}  // namespace imago::rel
