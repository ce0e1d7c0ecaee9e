// SPDX-License-Identifier: BSD-3-Clause
#include "reliability/codec.h"

#include <cerrno>

namespace imago::rel {

namespace {

// CRC over the frame as sent: the crc field was zero when the sender computed it.
bool crc_ok(std::span<const uint8_t> frame, uint32_t want) {
  static constexpr uint8_t kZero[4] = {0, 0, 0, 0};
  constexpr size_t at = offsetof(FrameHeader, crc);
  uint32_t c = crc32c(0, frame.data(), at);
  c = crc32c(c, kZero, sizeof(kZero));
  c = crc32c(c, frame.data() + at + 4, frame.size() - at - 4);
  return c == want;
}

}  // namespace

Reject decode_header(std::span<const uint8_t> frame, bool require_crc, Header* out,
                     std::span<const uint8_t>* body) {
  if (frame.size() < sizeof(FrameHeader)) return Reject::kTooShort;
  FrameHeader w;
  std::memcpy(&w, frame.data(), sizeof(w));
  if (w.version != kWireVersion) return Reject::kBadVersion;
  if (w.type < static_cast<uint8_t>(FrameType::kHello) ||
      w.type > static_cast<uint8_t>(FrameType::kGroupParity))
    return Reject::kBadType;
  if (w.flags & ~frame_flag::kAll) return Reject::kBadFlags;
  if (w.flags & frame_flag::kCrc) {
    if (!crc_ok(frame, w.crc.get())) return Reject::kBadCrc;
  } else if (require_crc) {
    return Reject::kMissingCrc;
  }
  if (w.sack_count > kMaxSackRanges) return Reject::kBadSack;
  size_t fixed = sizeof(FrameHeader) + size_t{w.sack_count} * sizeof(SackRange);
  if (frame.size() < fixed) return Reject::kTooShort;
  out->type = static_cast<FrameType>(w.type);
  out->flags = w.flags;
  out->sack_count = w.sack_count;
  out->src_node = w.src_node.get();
  out->dst_node = w.dst_node.get();
  out->src_epoch = w.src_epoch.get();
  out->src_token = w.src_token.get();
  out->dst_token = w.dst_token.get();
  out->seq = w.seq.get();
  out->ack = w.ack.get();
  out->credit = w.credit.get();
  *body = frame.subspan(fixed);
  const bool has_body = out->type == FrameType::kData || out->type == FrameType::kGroupData ||
                        out->type == FrameType::kGroupCtl || out->type == FrameType::kGroupParity;
  const bool hello = out->type == FrameType::kHello || out->type == FrameType::kHelloAck;
  out->hello_mtu = out->hello_max_message = 0;
  if (hello && body->size() == sizeof(HelloBody)) {
    HelloBody b;
    std::memcpy(&b, body->data(), sizeof b);
    out->hello_mtu = b.mtu.get();
    out->hello_max_message = b.max_message.get();
    return out->hello_mtu != 0 && out->hello_max_message != 0 ? Reject::kNone : Reject::kBadRecord;
  }
  if (hello && body->empty()) return Reject::kNone;
  if (!has_body && !body->empty()) return Reject::kBadRecord;
  return Reject::kNone;
}

int RecordReader::next(Record* rec) {
  const size_t n = p_.size();
  if (off_ == n) return 0;
  uint8_t flags = p_[off_++];
  if (flags & ~allowed_) return -EBADMSG;
  if ((flags & rec_flag::kSeq) && n - off_ >= 4) {
    Be32 s;
    std::memcpy(&s, p_.data() + off_, 4);
    seq_ = s.get();
    off_ += 4;
  } else if (flags & rec_flag::kSeq) {
    return -EBADMSG;
  }
  if (off_ >= n) return -EBADMSG;
  size_t len = p_[off_++];
  if (len == kLenEscape) {
    if (n - off_ < 2) return -EBADMSG;
    Be16 l;
    std::memcpy(&l, p_.data() + off_, 2);
    len = l.get();
    off_ += 2;
    if (len < kLenEscape) return -EBADMSG;  // one encoding per length
  }
  if (n - off_ < len) return -EBADMSG;
  rec->seq = seq_;
  rec->flags = static_cast<uint8_t>(flags & ~rec_flag::kSeq);
  rec->payload = p_.subspan(off_, len);
  off_ += len;
  ++seq_;
  return 1;
}

}  // namespace imago::rel
