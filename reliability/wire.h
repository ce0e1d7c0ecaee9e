/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The reliability protocol's wire format: the frame header, SACK ranges and the per-message
 * record header. docs/PROTOCOL.md (section 3) is the authority; this header follows it.
 *
 * Every multi-byte field is big-endian (Be16/Be32/Be64) and every struct is packed with its
 * size and offsets checked right below it. Byte order is converted only in codec.h/.cc.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "reliability/be.h"
#include "reliability/seq.h"

namespace imago::rel {

/** A node's identity on the fabric, chosen by the operator. */
using NodeId = uint32_t;

/** Wire protocol version carried in every frame. */
inline constexpr uint8_t kWireVersion = 1;

/** Frame types (FrameHeader::type). */
enum class FrameType : uint8_t {
  kHello = 1,     ///< handshake: "this is who I am, this is who I think you are"
  kHelloAck = 2,  ///< handshake answer; same layout as kHello
  kData = 3,      ///< message records, with piggy-backed ACK/credit/SACK
  kAck = 4,       ///< ACK-only (also NACK, credit update, ACK request, keep-alive)
  kGroupData = 5,  ///< a group stream's records, to the group (or one member: a repair)
  kGroupCtl = 6,   ///< group control entries (GroupCtl) between a member and a source
  kGroupParity = 7,  ///< the XOR of a block of a group stream's frames (docs/PROTOCOL.md 3.7.7)
};

/** FrameHeader::flags bits. */
namespace frame_flag {
inline constexpr uint8_t kAckReq = 0x01;  ///< sender asks for an ACK at once
inline constexpr uint8_t kNack = 0x02;    ///< receiver saw a gap or an overflow
inline constexpr uint8_t kCrc = 0x04;     ///< FrameHeader::crc holds a CRC32C of the frame
inline constexpr uint8_t kSackMore = 0x08;    ///< the receiver holds units beyond what the SACK lists
inline constexpr uint8_t kSackBitmap = 0x10;  ///< the SACK entries are SackWord bitmaps, not ranges
inline constexpr uint8_t kAll = 0x1F;
}  // namespace frame_flag

/** Credit value meaning "no limit" (optimistic flow control's normal state). */
inline constexpr uint32_t kCreditUnlimited = 0xFFFFFFFFu;

/** Fixed header at the start of every frame, right after the link (or UDP) header. */
struct __attribute__((packed)) FrameHeader {
  uint8_t version;     ///< kWireVersion
  uint8_t type;        ///< FrameType
  uint8_t flags;       ///< frame_flag bits
  uint8_t sack_count;  ///< SackRange entries right after this header
  Be32 src_node;       ///< sender's NodeId
  Be32 dst_node;       ///< receiver's NodeId
  Be32 src_epoch;      ///< sender's epoch (grows on every restart of the sender)
  Be64 src_token;      ///< sender's random session token
  Be64 dst_token;      ///< receiver's token as the sender knows it (0: unknown)
  Be32 seq;            ///< kData: seq of the first record; kAck: next new seq; kHello*: ISN
  Be32 ack;            ///< cumulative ACK (next seq expected); kHello*: peer's ISN as known
  Be32 credit;         ///< units beyond ack the peer may send; kCreditUnlimited: no limit
  Be32 crc;            ///< CRC32C over the whole frame with this field zero (flag kCrc)
};
static_assert(sizeof(FrameHeader) == 48);
static_assert(offsetof(FrameHeader, src_node) == 4);
static_assert(offsetof(FrameHeader, dst_node) == 8);
static_assert(offsetof(FrameHeader, src_epoch) == 12);
static_assert(offsetof(FrameHeader, src_token) == 16);
static_assert(offsetof(FrameHeader, dst_token) == 24);
static_assert(offsetof(FrameHeader, seq) == 32);
static_assert(offsetof(FrameHeader, ack) == 36);
static_assert(offsetof(FrameHeader, credit) == 40);
static_assert(offsetof(FrameHeader, crc) == 44);

/** The body of a HELLO or HELLO_ACK (docs/PROTOCOL.md 3.3.2). A HELLO with no body states
 *  neither (taken as the receiver's own). */
struct __attribute__((packed)) HelloBody {
  /// The largest frame its sender sends and takes, in bytes after the link or UDP header
  /// (Config::mtu). Peers must agree: a larger frame is lost on its way in, so a HELLO
  /// stating another is refused.
  Be32 mtu;
  /// The largest message its sender takes (Config::max_message_size, at most 2^32 - 1): its
  /// peer sends it none larger (a larger one would be dropped once whole, after its units
  /// were acknowledged).
  Be32 max_message;
};
static_assert(sizeof(HelloBody) == 8);
static_assert(offsetof(HelloBody, max_message) == 4);

/** One SACK range: units [start, end) (mod 2^32) were received beyond the cumulative ACK. */
struct __attribute__((packed)) SackRange {
  Be32 start;
  Be32 end;
};
static_assert(sizeof(SackRange) == 8);
static_assert(offsetof(SackRange, end) == 4);

/**
 * One SACK bitmap word (flag kSackBitmap): 64 units, bit j (value 1 << j) set when unit
 * base + 64 * i + j is held beyond the cumulative ACK, where i is the word's index and base
 * the ACK rounded down to a multiple of 64. Same size as a SackRange.
 */
struct __attribute__((packed)) SackWord {
  Be64 bits;
};
static_assert(sizeof(SackWord) == sizeof(SackRange));

/** Most SACK ranges a frame may carry (sack_count is validated against it). DATA frames carry
 *  up to Config::max_sack; ACK frames as many as their MTU holds, up to this. */
inline constexpr uint32_t kMaxSackRanges = 128;

/**
 * Record header flags (first byte of every record in a kData frame). A record carries one
 * unit: a whole message, or one fragment of a message larger than a frame.
 */
namespace rec_flag {
inline constexpr uint8_t kMore = 0x01;  ///< more fragments of this message follow
inline constexpr uint8_t kCont = 0x02;  ///< continuation: not the first fragment
inline constexpr uint8_t kSeq = 0x04;   ///< an explicit Be32 seq follows (not previous + 1)
inline constexpr uint8_t kFast = 0x08;  ///< sent with FASTPATH (informational)
inline constexpr uint8_t kAll = 0x0F;
/// kGroupData only: the record is a view change (GroupViewRecord), not a message.
inline constexpr uint8_t kView = 0x10;
inline constexpr uint8_t kAllGroup = kAll | kView;
}  // namespace rec_flag

/** A group (multicast) stream's group id; 0 is no group. */
using GroupId = uint32_t;

/** GroupCtl::op values (docs/PROTOCOL.md 3.7). */
namespace group_op {
inline constexpr uint8_t kJoin = 1;       ///< member: admit me (a: 1 from the oldest buffered, 0 from now)
inline constexpr uint8_t kJoinOk = 2;     ///< source: admitted at a (first seq), view b
inline constexpr uint8_t kLeave = 3;      ///< member: remove me
inline constexpr uint8_t kLeaveOk = 4;    ///< source: removed
inline constexpr uint8_t kAck = 5;        ///< member: I hold every unit before a
inline constexpr uint8_t kNack = 6;       ///< member: send me units [a, a + b) again
inline constexpr uint8_t kStatus = 7;     ///< source: my next seq is a, view b (tail check)
inline constexpr uint8_t kExpired = 8;    ///< source: you were expired at a
inline constexpr uint8_t kNotSource = 9;  ///< answer to kJoin: not a source of it (noted)
inline constexpr uint8_t kEnd = 10;       ///< source: my stream ends at a (you hold it all): leave
inline constexpr uint8_t kLost = 11;      ///< source (NACK stream): units [a, a + b) are gone: skip them
inline constexpr uint8_t kNackFrames = 12;  ///< member: send me frames a + j again, for each bit j of b
inline constexpr uint8_t kMax = 12;
}  // namespace group_op

/** GroupCtl::flags. */
namespace group_ctl_flag {
/// The stream is NACK-based: its source frees frames without ACKs (Config::group_nack_hold_ns,
/// group_window), its members send no ACKs after the first and skip what is gone (kLost).
inline constexpr uint8_t kNack = 0x1;
/// kNackFrames: the member's first ask of the block, its parity not here. A source that sent
/// that parity lately (or closes the block now) sends the highest frame named of the block
/// not again: the parity on its way rebuilds it (docs/PROTOCOL.md 3.7.7).
inline constexpr uint8_t kNoParity = 0x2;
/// kNotSource: the join was not remembered (the table full, the asker not behind the most): ask
/// again on the timer, the group may open here later.
inline constexpr uint8_t kNotKept = 0x4;
}  // namespace group_ctl_flag

/** One entry of a kGroupCtl frame's body (which holds one or more). */
struct __attribute__((packed)) GroupCtl {
  uint8_t op;     ///< group_op
  uint8_t flags;  ///< group_ctl_flag (kJoinOk, kStatus); 0 elsewhere
  uint8_t pad[2];
  Be32 group;
  Be32 a;
  Be32 b;
};
static_assert(sizeof(GroupCtl) == 16);

/** The payload of a view-change record (rec_flag::kView) in a group stream. */
struct __attribute__((packed)) GroupViewRecord {
  uint8_t kind;     ///< GroupEvent::Kind: kJoined, kLeft or kExpired
  Be32 member;      ///< whose membership changed
  Be32 view;        ///< the view number from this record on
  Be32 position;    ///< kJoined: its first seq; kLeft, kExpired: what it had acknowledged
};
static_assert(sizeof(GroupViewRecord) == 13);

/** Record length byte value that escapes to a Be16 length (ZeroMQ's 0xFF escape). */
inline constexpr uint8_t kLenEscape = 0xFF;
/** Largest record header: flags + Be32 seq + escape byte + Be16 length. */
inline constexpr size_t kMaxRecordHeader = 1 + 4 + 1 + 2;

/** @return bytes the record header takes for a unit of @p len bytes. */
constexpr size_t record_header_size(size_t len, bool explicit_seq) {
  return 1 + (explicit_seq ? 4 : 0) + (len < kLenEscape ? 1 : 3);
}

}  // namespace imago::rel
