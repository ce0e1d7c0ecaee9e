/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Codec for the reliability wire format: the only place that converts byte order.
 *
 * Decoding is hostile-input safe: every length and count is checked against the span before
 * it is read, and a malformed frame is reported with the Reject reason to count.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "reliability/counters.h"
#include "reliability/crc32c.h"
#include "reliability/wire.h"

namespace imago::rel {

/** A decoded frame header in host byte order. */
struct Header {
  FrameType type;
  uint8_t flags;
  uint8_t sack_count;
  NodeId src_node;
  NodeId dst_node;
  uint32_t src_epoch;
  uint64_t src_token;
  uint64_t dst_token;
  Seq seq;
  Seq ack;
  uint32_t credit;
  /// HELLO / HELLO_ACK: its body's HelloBody fields (0: no body, nothing stated).
  uint32_t hello_mtu = 0;
  uint32_t hello_max_message = 0;
};

/** One decoded record of a kData frame. */
struct Record {
  Seq seq;
  uint8_t flags;
  std::span<const uint8_t> payload;
};

/**
 * Decode and validate the fixed part of a frame.
 *
 * @param frame       bytes after the link header.
 * @param require_crc reject frames that carry no CRC.
 * @param out         decoded header on success.
 * @param body        on success, the bytes after the header and SACK ranges.
 * @return Reject::kNone, or the reason the frame must be dropped.
 */
Reject decode_header(std::span<const uint8_t> frame, bool require_crc, Header* out,
                     std::span<const uint8_t>* body);

/** @return SACK range @p i of a frame already accepted by decode_header(). */
inline void decode_sack(std::span<const uint8_t> frame, uint32_t i, Seq* start, Seq* end) {
  SackRange r;
  std::memcpy(&r, frame.data() + sizeof(FrameHeader) + i * sizeof(SackRange), sizeof(r));
  *start = r.start.get();
  *end = r.end.get();
}

/** @return SACK bitmap word @p i of a frame already accepted by decode_header(). */
inline uint64_t decode_sack_word(std::span<const uint8_t> frame, uint32_t i) {
  SackWord w;
  std::memcpy(&w, frame.data() + sizeof(FrameHeader) + i * sizeof(SackWord), sizeof(w));
  return w.bits.get();
}

/**
 * Walks the records of a kData body. next() validates each record before returning it.
 */
class RecordReader {
 public:
  /** @p allowed: the record flags the frame type may carry (kAllGroup in kGroupData). */
  RecordReader(std::span<const uint8_t> body, Seq first_seq, uint8_t allowed = rec_flag::kAll)
      : p_(body), seq_(first_seq), allowed_(allowed) {}

  /**
   * @param rec the next record on success.
   * @return 1 on a record, 0 at the end, -EBADMSG on a malformed record (rest unusable).
   */
  int next(Record* rec);

 private:
  std::span<const uint8_t> p_;
  Seq seq_;
  uint8_t allowed_;
  size_t off_ = 0;
};

/** Host-order values of a frame header about to be written. */
struct HeaderOut {
  FrameType type;
  uint8_t flags;
  NodeId src_node;
  NodeId dst_node;
  uint32_t src_epoch;
  uint64_t src_token;
  uint64_t dst_token;
  Seq seq;
  Seq ack;
  uint32_t credit;
};

/** Write the fixed header (sack_count 0, crc 0) at @p buf, which has room for it. */
inline void encode_header(const HeaderOut& h, uint8_t* buf) {
  FrameHeader w;
  w.version = kWireVersion;
  w.type = static_cast<uint8_t>(h.type);
  w.flags = h.flags;
  w.sack_count = 0;
  w.src_node.set(h.src_node);
  w.dst_node.set(h.dst_node);
  w.src_epoch.set(h.src_epoch);
  w.src_token.set(h.src_token);
  w.dst_token.set(h.dst_token);
  w.seq.set(h.seq);
  w.ack.set(h.ack);
  w.credit.set(h.credit);
  w.crc.set(0);
  std::memcpy(buf, &w, sizeof(w));
}

/** Append SACK range number @p i (the caller bumps sack_count with set_sack_count()). */
inline void encode_sack(uint8_t* buf, uint32_t i, Seq start, Seq end) {
  SackRange r;
  r.start.set(start);
  r.end.set(end);
  std::memcpy(buf + sizeof(FrameHeader) + i * sizeof(SackRange), &r, sizeof(r));
}

/** Append SACK bitmap word number @p i (flag kSackBitmap). */
inline void encode_sack_word(uint8_t* buf, uint32_t i, uint64_t bits) {
  SackWord w;
  w.bits.set(bits);
  std::memcpy(buf + sizeof(FrameHeader) + i * sizeof(SackWord), &w, sizeof(w));
}

inline void set_sack_count(uint8_t* buf, uint8_t n) { buf[offsetof(FrameHeader, sack_count)] = n; }
inline void or_flags(uint8_t* buf, uint8_t f) { buf[offsetof(FrameHeader, flags)] |= f; }
inline void set_seq(uint8_t* buf, Seq s) {
  Be32 v;
  v.set(s);
  std::memcpy(buf + offsetof(FrameHeader, seq), &v, sizeof(v));
}

/**
 * Write a record header at @p buf.
 * @return bytes written (record_header_size()).
 */
inline size_t encode_record_header(uint8_t* buf, uint8_t flags, Seq seq, bool explicit_seq,
                                   size_t len) {
  size_t n = 0;
  buf[n++] = static_cast<uint8_t>(flags | (explicit_seq ? rec_flag::kSeq : 0));
  if (explicit_seq) {
    Be32 s;
    s.set(seq);
    std::memcpy(buf + n, &s, 4);
    n += 4;
  }
  if (len < kLenEscape) {
    buf[n++] = static_cast<uint8_t>(len);
  } else {
    buf[n++] = kLenEscape;
    Be16 l;
    l.set(static_cast<uint16_t>(len));
    std::memcpy(buf + n, &l, 2);
    n += 2;
  }
  return n;
}

/** Seal a frame of @p len bytes, followed by @p tail when it has one (a payload sent by
 *  reference): set the kCrc flag and the CRC32C when @p with_crc. */
inline void finish_frame(uint8_t* buf, size_t len, bool with_crc, std::span<const uint8_t> tail = {}) {
  if (!with_crc) return;
  or_flags(buf, frame_flag::kCrc);
  Be32 c;
  uint32_t crc = crc32c(0, buf, len);  // crc field is still zero here
  if (!tail.empty()) crc = crc32c(crc, tail.data(), tail.size());
  c.set(crc);
  std::memcpy(buf + offsetof(FrameHeader, crc), &c, sizeof(c));
}

}  // namespace imago::rel
