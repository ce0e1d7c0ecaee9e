/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Parity repair of group streams (docs/PROTOCOL.md 3.7.7).
 *
 * A source that sees many losses across its members numbers its frames in blocks of K and,
 * once a block went out, sends one PARITY frame to the group: the XOR of the block's frames.
 * A member that lost one frame of the block rebuilds it from the parity and the frames it
 * holds, without asking; one that lost L asks for L - 1 and rebuilds the last. With losses
 * independent per member, one parity frame stands in for a repair at each member that lost
 * one frame of the block, not one repair each (IBRMP and NORM repair each loss in turn).
 *
 * What is XORed of a frame is what differs between the frames of one stream: the header's
 * seq, ack (the view) and crc fields, and the records, zero-padded to the longest. The rest
 * of a rebuilt frame's header is the stream's, and its CRC checks the whole.
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "reliability/wire.h"

namespace imago::rel {

/** Most frames in a parity block: a member's map of the block's frames is 64 bits. */
inline constexpr uint32_t kParityMaxFrames = 64;
/** Fewest frames in a parity block (Config::group_parity_frames is 0 or in range). */
inline constexpr uint32_t kParityMinFrames = 2;
/** Blocks a member follows at once per stream: older ones fall back to plain repairs. */
inline constexpr uint32_t kParityBlocks = 8;
/** Bytes of the accumulator before the records: the header's seq, ack and crc fields. */
inline constexpr size_t kParityHead = 12;

/**
 * The block size, kParityMinFrames..@p max_k, that costs fewest frames per data frame when
 * each of @p members loses a fraction @p p of the frames, independently: a parity frame a
 * block (@p copies of it where the link cannot multicast), and at each member its losses in
 * the block but one (the parity rebuilds one). Larger blocks cost fewer parity frames and
 * leave more members with two losses in one: at 1 % and 8 members the cost is 4.3 % of the
 * data frames with blocks of 32 and 3.6 % with 61 (the cheapest); at 5 %, 23 % with 32, 29 % with
 * 64 and 18 % with 12 (the cheapest).
 */
inline uint32_t cheapest_block(double p, size_t members, uint64_t copies, uint32_t max_k) {
  uint32_t best = max_k;
  double best_cost = 0, none = 1;  // none: (1 - p)^k, a member's chance of no loss in k
  for (uint32_t k = 1; k <= max_k; ++k) {
    none *= 1 - p;
    if (k < kParityMinFrames) continue;
    const double cost = (static_cast<double>(copies) + static_cast<double>(members) * (k * p - (1 - none))) / k;
    if (k == kParityMinFrames || cost < best_cost) best = k, best_cost = cost;
  }
  return best;
}

/**
 * The losses, for sizing blocks, that a member's run of @p frames lost in a row stands for:
 * one a block of @p k frames it touches (a parity frame saves one repair a block, whatever
 * else the block lost), at most its frames. Counted frame by frame, a member overflowing
 * (hundreds lost in a row, no network loss) read as 20 % independent loss: blocks of 2,
 * a parity frame for every two data frames, rebuilding next to nothing (an outside tester).
 */
inline uint32_t run_losses(uint32_t frames, uint32_t k) {
  if (k == 0 || frames <= 2) return frames;
  return std::min(frames, (frames + k - 1) / k + 1);
}

/** XOR @p n bytes of @p src into @p dst. */
inline void xor_into(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t a, b;
    std::memcpy(&a, dst + i, 8);
    std::memcpy(&b, src + i, 8);
    a ^= b;
    std::memcpy(dst + i, &a, 8);
  }
  for (; i < n; ++i) dst[i] ^= src[i];
}

/** The parity block a data frame belongs to, as its header carries it (dst_token). */
struct ParityTag {
  uint32_t first = 0;  ///< the block's first frame number
  uint32_t k = 0;      ///< frames in the block; 0: not in a parity block
  static ParityTag of(uint64_t dst_token) {
    return {static_cast<uint32_t>(dst_token >> 32), static_cast<uint32_t>(dst_token & 0xFF)};
  }
  uint64_t token() const { return (uint64_t{first} << 32) | k; }
  /** @return true for a block a member can follow, holding frame number @p no. */
  bool valid_for(uint32_t no) const {
    return k >= kParityMinFrames && k <= kParityMaxFrames && no - first < k;
  }
};

/**
 * The XOR of a block's frames so far: the source builds it as they go out; a member builds
 * it as they arrive, and with the parity frame XORed in it is the one frame missing.
 */
struct ParityAcc {
  ParityTag tag;          ///< tag.k == 0: a free slot
  uint32_t frames = 0;    ///< its frames: tag.k, or fewer when the source closed it early
  uint16_t count = 0;     ///< frames XORed in
  uint16_t len_xor = 0;   ///< XOR of their record lengths
  uint32_t len = 0;       ///< bytes of `bytes` in use (kParityHead + the longest records)
  uint64_t have = 0;      ///< member: bit j: frame tag.first + j XORed in
  uint64_t asked = 0;     ///< member: bit j: frame tag.first + j asked for
  uint64_t due = 0;       ///< member: when its holes are asked for
  uint64_t last_ns = 0;   ///< member: when its latest frame arrived
  uint64_t bare_ns = 0;   ///< member: when it was first asked for without its parity (0: not)
  bool parity = false;    ///< member: the parity frame XORed in
  bool resolved = false;  ///< member: nothing more to ask
  uint8_t flags = 0;      ///< member: the parity frame's frame_flag::kCrc (the data frames' too)
  uint8_t* bytes = nullptr;  ///< the accumulator (set aside by the engine), zero beyond len

  void reset(ParityTag t) {
    std::memset(bytes, 0, len);
    *this = ParityAcc{t, t.k, 0, 0, 0, 0, 0, ~uint64_t{0}, 0, 0, false, false, 0, bytes};
  }
  /** XOR in data frame @p frame (a whole frame, header and records). */
  void add(std::span<const uint8_t> frame) {
    const size_t recs = frame.size() - sizeof(FrameHeader);
    xor_into(bytes, frame.data() + offsetof(FrameHeader, seq), 8);  // seq, ack
    xor_into(bytes + 8, frame.data() + offsetof(FrameHeader, crc), 4);
    xor_into(bytes + kParityHead, frame.data() + sizeof(FrameHeader), recs);
    len_xor = static_cast<uint16_t>(len_xor ^ recs);
    len = std::max(len, static_cast<uint32_t>(kParityHead + recs));
    count++;
  }
  /** XOR in a parity frame's body @p body and record-length XOR @p lens. */
  void add_parity(std::span<const uint8_t> body, uint16_t lens) {
    xor_into(bytes, body.data(), body.size());
    len_xor = static_cast<uint16_t>(len_xor ^ lens);
    len = std::max(len, static_cast<uint32_t>(body.size()));
    parity = true;
  }
  /** @return the frames known missing among the block's first @p known (bit j: frame first + j). */
  uint64_t missing(uint32_t known) const {
    const uint64_t mask = known >= 64 ? ~uint64_t{0} : (uint64_t{1} << known) - 1;
    return ~have & mask;
  }
};

}  // namespace imago::rel
