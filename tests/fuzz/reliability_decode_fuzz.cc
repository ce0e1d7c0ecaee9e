// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the reliability codec (reliability/codec.h) over hostile frames of every type:
// decode_header() (HELLO, HELLO_ACK, DATA, ACK, GROUP_DATA, GROUP_CTL), the SACK ranges, and RecordReader over a
// DATA body (whole messages, fragments, explicit sequence numbers, escaped lengths).
//
// Input: a mode byte (bit 0: require a CRC, as engines do; bit 1: seal the frame with a
// correct CRC32C when its kCrc flag is set, so the fuzzer gets past the checksum), then the
// frame.
//
// Invariants: an accepted header is in range (version, type, flags, SACK count) and its body
// is exactly the bytes after the SACK ranges; only DATA has a body; the header re-encodes to
// the same bytes; records lie inside the body, number at most one per body byte, and
// re-encode to records that decode the same; every rejection has a name.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "reliability/codec.h"
#include "reliability/counters.h"
#include "reliability/wire.h"
#include "tests/fuzz/capture.h"
#include "tests/fuzz/fuzz_common.h"

namespace imago::fuzz {
namespace {

using rel::FrameHeader;
using rel::Header;
using rel::Record;
using rel::Reject;
using imago::Seq;

constexpr uint8_t kRequireCrc = 0x01, kSeal = 0x02;
constexpr size_t kMaxFrame = 9216;

void seal(uint8_t* f, size_t len) {
  if (len < sizeof(FrameHeader) || !(f[offsetof(FrameHeader, flags)] & rel::frame_flag::kCrc)) return;
  std::memset(f + offsetof(FrameHeader, crc), 0, 4);
  Be32 c;
  c.set(crc32c(0, f, len));
  std::memcpy(f + offsetof(FrameHeader, crc), &c, 4);
}

// The records of @p body, checked as they come. @return the reader's last result.
int walk(std::span<const uint8_t> body, Seq first, std::vector<Record>* recs) {
  rel::RecordReader rd(body, first);
  Record r;
  int rc;
  while ((rc = rd.next(&r)) == 1) {
    FUZZ_CHECK(recs->size() < body.size());  // every record takes at least two bytes
    FUZZ_CHECK(r.payload.data() >= body.data() && r.payload.data() + r.payload.size() <= body.data() + body.size());
    FUZZ_CHECK((r.flags & ~rel::rec_flag::kAll) == 0 && !(r.flags & rel::rec_flag::kSeq));
    recs->push_back(r);
  }
  FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
  return rc;
}

// Encode @p recs again (explicit seq only where the numbering jumps) and decode them.
void records_round_trip(const std::vector<Record>& recs, Seq first) {
  Bytes b;
  Seq next = first;
  for (const Record& r : recs) {
    uint8_t hdr[rel::kMaxRecordHeader];
    const size_t n = rel::encode_record_header(hdr, r.flags, r.seq, r.seq != next, r.payload.size());
    FUZZ_CHECK(n == rel::record_header_size(r.payload.size(), r.seq != next));
    b.insert(b.end(), hdr, hdr + n);
    b.insert(b.end(), r.payload.begin(), r.payload.end());
    next = r.seq + 1;
  }
  std::vector<Record> again;
  FUZZ_CHECK(walk(b, first, &again) == 0);
  FUZZ_CHECK(again.size() == recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    FUZZ_CHECK(again[i].seq == recs[i].seq && again[i].flags == recs[i].flags);
    FUZZ_CHECK(again[i].payload.size() == recs[i].payload.size());
    FUZZ_CHECK(std::equal(again[i].payload.begin(), again[i].payload.end(), recs[i].payload.begin()));
  }
}

// Encode @p h again with the SACK ranges and body of @p frame: the same bytes.
void header_round_trip(const Header& h, std::span<const uint8_t> frame, std::span<const uint8_t> body) {
  Bytes b(frame.size());
  const rel::HeaderOut o{h.type, 0, h.src_node, h.dst_node, h.src_epoch, h.src_token, h.dst_token, h.seq, h.ack, h.credit};
  rel::encode_header(o, b.data());
  for (uint32_t i = 0; i < h.sack_count; ++i) {
    Seq s, e;
    rel::decode_sack(frame, i, &s, &e);
    rel::encode_sack(b.data(), i, s, e);
  }
  rel::set_sack_count(b.data(), h.sack_count);
  if (!body.empty()) std::memcpy(b.data() + (frame.size() - body.size()), body.data(), body.size());
  rel::or_flags(b.data(), static_cast<uint8_t>(h.flags & ~rel::frame_flag::kCrc));
  const bool crc = h.flags & rel::frame_flag::kCrc;
  rel::finish_frame(b.data(), b.size(), crc);
  // Without the kCrc flag the crc field is not covered by anything: leave it out.
  const size_t crc_at = offsetof(FrameHeader, crc);
  FUZZ_CHECK(std::memcmp(b.data(), frame.data(), crc_at) == 0);
  if (crc) FUZZ_CHECK(std::memcmp(b.data() + crc_at, frame.data() + crc_at, 4) == 0);
  FUZZ_CHECK(std::memcmp(b.data() + crc_at + 4, frame.data() + crc_at + 4, frame.size() - crc_at - 4) == 0);
  Header h2;
  std::span<const uint8_t> body2;
  FUZZ_CHECK(rel::decode_header(b, crc, &h2, &body2) == Reject::kNone);
  FUZZ_CHECK(h2.type == h.type && h2.flags == h.flags && h2.sack_count == h.sack_count);
  FUZZ_CHECK(h2.src_node == h.src_node && h2.dst_node == h.dst_node && h2.src_epoch == h.src_epoch);
  FUZZ_CHECK(h2.src_token == h.src_token && h2.dst_token == h.dst_token);
  FUZZ_CHECK(h2.seq == h.seq && h2.ack == h.ack && h2.credit == h.credit);
  FUZZ_CHECK(body2.size() == body.size());
}

void run(Reader& in) {
  const uint8_t mode = in.u8();
  const auto rest = in.bytes(kMaxFrame);
  // An exact-size copy: any read past the frame is an ASan report.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[rest.size() + 1]);
  if (!rest.empty()) std::memcpy(buf.get(), rest.data(), rest.size());
  if (mode & kSeal) seal(buf.get(), rest.size());
  const std::span<const uint8_t> frame(buf.get(), rest.size());

  Header h;
  std::span<const uint8_t> body;
  const Reject r = rel::decode_header(frame, mode & kRequireCrc, &h, &body);
  FUZZ_CHECK(static_cast<size_t>(r) < static_cast<size_t>(Reject::kCount));
  FUZZ_CHECK(rel::reject_name(r) != nullptr);
  if (r != Reject::kNone) return;
  FUZZ_CHECK(h.type >= rel::FrameType::kHello && h.type <= rel::FrameType::kGroupParity);
  FUZZ_CHECK((h.flags & ~rel::frame_flag::kAll) == 0);
  FUZZ_CHECK(h.sack_count <= rel::kMaxSackRanges);
  FUZZ_CHECK(body.data() == frame.data() + sizeof(FrameHeader) + h.sack_count * sizeof(rel::SackRange));
  FUZZ_CHECK(body.data() + body.size() == frame.data() + frame.size());
  const bool has_body = h.type == rel::FrameType::kData || h.type == rel::FrameType::kGroupData ||
                        h.type == rel::FrameType::kGroupCtl || h.type == rel::FrameType::kGroupParity;
  const bool hello = h.type == rel::FrameType::kHello || h.type == rel::FrameType::kHelloAck;
  if (hello) FUZZ_CHECK(body.empty() || body.size() == sizeof(rel::HelloBody));
  if (!has_body && !hello) FUZZ_CHECK(body.empty());
  header_round_trip(h, frame, body);
  std::vector<Record> recs;
  if (walk(body, h.seq, &recs) == 0) records_round_trip(recs, h.seq);
}

// Seeds: every frame of a real two-engine conversation, as it was sent (sealed) and with
// the CRC required; plus one of each type built by hand.
void seeds(const SeedFn& put) {
  int i = 0;
  for (const Bytes& f : capture_conversation()) {
    put("conv_" + std::to_string(i++), Writer().u8(kRequireCrc).bytes(f).b);
  }
  for (uint8_t t = 1; t <= 4; ++t) {
    Bytes f(sizeof(FrameHeader) + 2 * sizeof(rel::SackRange));
    rel::encode_header({static_cast<rel::FrameType>(t), 0, 1, 2, 3, 4, 5, 100, 90, rel::kCreditUnlimited}, f.data());
    if (t == 4) {
      rel::encode_sack(f.data(), 0, 92, 95);
      rel::encode_sack(f.data(), 1, 97, 99);
      rel::set_sack_count(f.data(), 2);
    } else {
      f.resize(sizeof(FrameHeader));
    }
    if (t == 3) {
      uint8_t hdr[rel::kMaxRecordHeader];
      for (size_t len : {0, 3, 254, 255, 300}) {
        const size_t n = rel::encode_record_header(hdr, len == 300 ? rel::rec_flag::kMore : 0, 500, len == 3, len);
        f.insert(f.end(), hdr, hdr + n);
        f.insert(f.end(), len, static_cast<uint8_t>(len));
      }
    }
    rel::finish_frame(f.data(), f.size(), true);
    put("type_" + std::to_string(t), Writer().u8(kRequireCrc | kSeal).bytes(f).b);
  }
}

}  // namespace
}  // namespace imago::fuzz

IMAGO_FUZZ_TARGET(imago::fuzz::no_init, imago::fuzz::seeds, imago::fuzz::run)
