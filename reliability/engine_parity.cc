// SPDX-License-Identifier: BSD-3-Clause
// Parity repair of group streams (docs/PROTOCOL.md 3.7.7, reliability/parity.h): the
// source's blocks and PARITY frames, a member's rebuilding and asking by frame number.
#include <algorithm>
#include <bit>
#include <cstring>

#include "reliability/engine.h"
#include "reliability/parity.h"
#include "reliability/peer.h"

namespace imago::rel {

namespace {

// Losses are judged over this many blocks' worth of frames first sent.
constexpr uint32_t kJudgeBlocks = 8;

// How many of block @p b's frames a member knows were sent: all, once its parity came.
uint32_t known_sent(const GroupRx& r, const ParityAcc& b) {
  if (b.parity) return b.frames;
  if (!r.hi_valid || seq_lt(r.hi_frame, b.tag.first)) return 0;
  return std::min(b.frames, r.hi_frame - b.tag.first + 1);
}

}  // namespace

// --- the source's side ---

// The block the frame about to go out belongs to: a new one opens once the last is complete,
// while losses call for parity.
ParityTag Engine::parity_block_open(GroupTx& t) {
  if (t.ptx.tag.k == 0 && t.parity_on) t.ptx.reset({t.frame_no, cfg_.group_parity_frames});
  return t.ptx.tag;
}

void Engine::parity_frame_out(GroupTx& t, std::span<const uint8_t> frame, uint64_t now) {
  if (t.ptx.tag.k == 0) return;
  t.ptx.add(frame);
  t.ptx_ns = now;
  if (t.ptx.count == t.ptx.tag.k) send_parity(t);
}

// A block the stream stopped in (idle, or its window full until a member's repair) is closed
// early: its parity covers the frames sent, so that a member need not wait for frames that
// may be a while coming (or wait on the very repair the parity would spare).
void Engine::parity_close(GroupTx& t, uint64_t now) {
  if (t.ptx.count == 0 || t.tx.has_unsent()) return;
  const uint64_t at = t.ptx_ns + cfg_.nack_interval_ns / 4;
  if (now >= at)
    send_parity(t);
  else
    group_deadline_ = std::min(group_deadline_, at);
}

// A parity frame costs one frame a block and saves a repair at each member that lost one
// frame of it: it pays once members lose, between them, more than one frame a block. On at
// 1.5 losses a block, off below 1 (in between: as it was), counting frames asked for and
// frames members said they rebuilt against frames released: both are what members told, so
// a burst of sends that no member has answered yet does not read as a loss-free stretch.
void Engine::parity_released(GroupTx& t, uint32_t frames) {
  if (cfg_.group_parity_frames == 0) return;
  t.judged += frames;
  if (t.judged < kJudgeBlocks * cfg_.group_parity_frames) return;
  // Blocks: of the judged frames, or the parity frames sent if more (blocks closed early). A
  // parity frame costs one copy per member where the link cannot multicast, and saves only
  // that member's loss: there it must be worth a copy each.
  const uint64_t copies = multicast_ok() ? 1 : std::max<size_t>(t.members.size(), 1);
  const uint64_t blocks = std::max<uint64_t>(t.judged / cfg_.group_parity_frames, t.parities) * copies;
  if (2 * uint64_t{t.losses} >= 3 * blocks) t.parity_on = true;
  if (uint64_t{t.losses} < blocks) t.parity_on = false;
  t.losses = t.judged = t.parities = 0;
}

void Engine::send_parity(GroupTx& t) {
  ParityAcc& a = t.ptx;
  uint8_t* buf = txbuf_.get();
  // dst_token: the block, as in its frames; seq its first frame; ack the frames it covers (the
  // block's, or fewer when closed early); credit: the XOR of their record lengths. At most
  // mtu bytes: kParityHead above the longest records, within the SACK room a group frame
  // leaves (validate(): max_sack >= 2).
  HeaderOut h{FrameType::kGroupParity, 0, cfg_.node_id, t.g, cfg_.epoch, token_, a.tag.token(),
              a.tag.first, a.count, a.len_xor};
  encode_header(h, buf);
  std::memcpy(buf + sizeof(FrameHeader), a.bytes, a.len);
  const size_t len = sizeof(FrameHeader) + a.len;
  finish_frame(buf, len, cfg_.crc);
  bool sent = false;
  if (multicast_ok()) {
    sent = frames_->send_group(t.g, {buf, len});
  } else {
    for (const GroupMember& m : t.members) sent = frames_->send_frame(m.id, {buf, len}) || sent;
  }
  gc_.parity_sent += sent;
  gc_.repair_frames += sent;
  t.parities++;
  a.reset({});
}

// NACK_FRAMES: frames first + j for each bit j of @p bits, asked by number. Each goes the way
// a NACK's frames go (group_repair()); one released or never sent is not there to send.
void Engine::repair_frames(GroupTx& t, Peer& p, uint32_t first, uint32_t bits, uint64_t now) {
  for (; bits != 0; bits &= bits - 1) {
    uint32_t pos;
    if (t.tx.sent_frame(first + static_cast<uint32_t>(std::countr_zero(bits)), &pos))
      group_repair(t, p, t.tx.frame_first(pos), 1, now);
  }
}

// --- the member's side ---

// The slot following block @p tag: its own, else a free one or the oldest (its holes left
// to the first-hole timer); none for a block older than all followed, or a tag that
// contradicts the one followed.
ParityAcc* Engine::parity_block(GroupRx& r, ParityTag tag) {
  ParityAcc* victim = nullptr;
  for (ParityAcc& b : r.blocks) {
    if (b.tag.k != 0 && b.tag.first == tag.first) return b.tag.k == tag.k ? &b : nullptr;
    if (victim == nullptr || (victim->tag.k != 0 && (b.tag.k == 0 || seq_lt(b.tag.first, victim->tag.first))))
      victim = &b;
  }
  if (victim->tag.k != 0 && seq_lt(tag.first, victim->tag.first)) return nullptr;
  victim->reset(tag);
  return victim;
}

// A data frame that passed its checks: XORed into its block, and the holes before it noted as
// the block's. @return its block when the block now lacks one frame and holds its parity.
ParityAcc* Engine::parity_frame_in(const Peer& p, GroupRx& r, const Header& h, std::span<const uint8_t> frame,
                                   uint64_t now) {
  const uint32_t no = h.credit;
  const ParityTag tag = ParityTag::of(h.dst_token);
  const bool in_tag = tag.valid_for(no);
  // The frames between the highest seen and this one are lost from this block: it asks for
  // them (or rebuilds one), not the NACK of new holes.
  r.in_block = in_tag && r.hi_valid && seq_gt(no, r.hi_frame) && seq_le(tag.first, r.hi_frame + 1);
  if (!r.hi_valid || seq_gt(no, r.hi_frame)) r.hi_frame = no, r.hi_valid = true;
  parity_bound(r, in_tag ? tag.first : no + 1, no);
  if (!in_tag) return nullptr;
  // Longer than our MTU (a source configured for a larger one): more than an accumulator holds.
  if (frame.size() > cfg_.mtu) return gc_.parity_bad++, nullptr;
  ParityAcc* b = parity_block(r, tag);
  if (b == nullptr || no - tag.first >= b->frames) return nullptr;  // beyond a block closed early: a lie
  const uint64_t bit = uint64_t{1} << (no - tag.first);
  if (!(b->have & bit)) b->add(frame), b->have |= bit;
  parity_schedule(p, r, now);
  return b->parity && b->count + 1u == b->frames ? b : nullptr;
}

// Blocks are runs of frames one after another: frame @p no, not of a block that starts at
// @p first, ends every block that starts before it. A block closed early (its parity lost or
// still on its way) so never counts the next block's frames as its own missing ones.
void Engine::parity_bound(GroupRx& r, uint32_t first, uint32_t no) {
  for (ParityAcc& b : r.blocks) {
    if (b.tag.k == 0 || b.tag.first == first || !seq_gt(no, b.tag.first)) continue;
    const uint32_t upto = no - b.tag.first;
    if (upto < b.frames && (b.have >> upto) == 0) b.frames = upto;
  }
}

// When each block followed asks for what it lacks: at once with its parity here; soon after
// it is complete (its parity follows its last frame on the wire, so it is lost or here);
// after the hold of a hole while it is not (a stream that paused mid-block).
void Engine::parity_schedule(const Peer& p, GroupRx& r, uint64_t now) {
  // A block the source stopped in is closed a quarter NACK interval after its last frame: its
  // parity comes within that and a one-way trip, with room for a loaded machine.
  const uint64_t hold = 2 * std::max(cfg_.nack_interval_ns, p.rto.srtt());
  for (ParityAcc& b : r.blocks) {
    if (b.tag.k == 0 || b.resolved) continue;
    const uint32_t known = known_sent(r, b);
    if ((b.missing(known) & ~b.asked) == 0) {
      b.resolved = known == b.frames;
      continue;
    }
    const uint64_t wait = b.parity ? 0 : known == b.frames ? cfg_.nack_interval_ns / 8 : hold;
    b.due = std::min(b.due, now + wait);
    group_deadline_ = std::min(group_deadline_, b.due);
  }
}

void Engine::on_group_parity(const Header& h, std::span<const uint8_t> body, uint64_t now) {
  Peer* p = nullptr;
  GroupRx* r = stream_of(h, &p);
  if (r == nullptr) return;
  const ParityTag tag = ParityTag::of(h.dst_token);
  if (!tag.valid_for(tag.first) || h.seq != tag.first || h.ack == 0 || h.ack > tag.k || h.credit > 0xFFFF ||
      body.size() < kParityHead || body.size() > cfg_.mtu - sizeof(FrameHeader)) {
    gc_.parity_bad++;
    return void(p->c.reject[static_cast<size_t>(Reject::kBadRecord)]++);
  }
  p->last_heard = now;
  ParityAcc* b = parity_block(*r, tag);
  if (b == nullptr || b->parity) return;  // a block long past, or its parity again
  const uint32_t covers = h.ack;
  if (covers < 64 && (b->have >> covers) != 0) return void(gc_.parity_bad++);  // frames beyond it: a lie
  b->frames = covers;
  b->add_parity(body, static_cast<uint16_t>(h.credit));
  b->flags = h.flags & frame_flag::kCrc;
  // The parity says the block's frames all went out.
  const uint32_t last = tag.first + covers - 1;
  if (!r->hi_valid || seq_gt(last, r->hi_frame)) r->hi_frame = last, r->hi_valid = true;
  parity_schedule(*p, *r, now);
  if (b->count + 1u == b->frames) parity_rebuild(*p, *r, *b, now);
  group_deliver(*r);
  group_deadline_ = std::min(group_deadline_, r->ack_deadline);
}

// The one frame of block @p b missing here, rebuilt from its parity and the others, and taken
// as if it had arrived. Its CRC (when the stream has them) checks the whole.
void Engine::parity_rebuild(Peer& p, GroupRx& r, ParityAcc& b, uint64_t now) {
  const uint64_t missing = b.missing(b.frames);
  const size_t len = sizeof(FrameHeader) + b.len_xor;
  if (std::popcount(missing) != 1 || kParityHead + b.len_xor > b.len || len > cfg_.mtu) return void(gc_.parity_bad++);
  const uint32_t no = b.tag.first + static_cast<uint32_t>(std::countr_zero(missing));
  uint8_t* buf = rebuilt_.get();
  Be32 seq, view;
  std::memcpy(&seq, b.bytes, 4);
  std::memcpy(&view, b.bytes + 4, 4);
  HeaderOut out{FrameType::kGroupData, 0, r.src, r.g, p.s.epoch, p.s.token, b.tag.token(), seq.get(), view.get(), no};
  encode_header(out, buf);
  if (b.flags & frame_flag::kCrc) or_flags(buf, frame_flag::kCrc);
  std::memcpy(buf + offsetof(FrameHeader, crc), b.bytes + 8, 4);
  std::memcpy(buf + sizeof(FrameHeader), b.bytes + kParityHead, b.len_xor);
  Header h;
  std::span<const uint8_t> body;
  const std::span<const uint8_t> frame{buf, len};
  if (decode_header(frame, cfg_.crc, &h, &body) != Reject::kNone || h.type != FrameType::kGroupData || h.credit != no)
    return void(gc_.parity_bad++);
  gc_.parity_rebuilt++;
  r.rebuilt++;
  on_group_data(h, frame, body, now);
}

// Blocks whose time came ask for the frames they lack by number (NACK_FRAMES): all but the
// last when the parity is here (that one is rebuilt once the others come), else all. Until
// then the first hole is not asked for again (hold_until).
void Engine::parity_ask(Peer& p, GroupRx& r, uint64_t now) {
  r.hold_until = 0;
  for (ParityAcc& b : r.blocks) {
    if (b.tag.k == 0 || b.resolved || b.due == kNever) continue;
    if (b.due > now) {
      r.hold_until = std::max(r.hold_until, b.due);
      group_deadline_ = std::min(group_deadline_, b.due);
      continue;
    }
    const uint32_t known = known_sent(r, b);
    const uint64_t missing = b.missing(known);
    uint64_t want = missing & ~b.asked;
    if (b.parity && missing != 0) want &= ~(uint64_t{1} << (63 - std::countl_zero(missing)));
    for (uint32_t half = 0; half < 2; ++half)
      if (const auto bits = static_cast<uint32_t>(want >> (32 * half)); bits != 0) {
        send_ctl(p, group_op::kNackFrames, r.g, b.tag.first + 32 * half, bits);
        gc_.nack_frames_sent++;
        gc_.nacks_sent++;
      }
    if (want != 0) {
      // As a NACK of new holes does: the first hole's timer and the repair round trip it
      // measures run from here (the block held the hole back until now).
      r.last_nack_ns = now;
      if (!r.probe_active) r.probe_seq = r.rx.nxt(), r.probe_ns = now, r.probe_active = r.probe_clean = true;
    }
    b.asked |= want;
    b.resolved = known == b.frames;
    b.due = kNever;
  }
}

}  // namespace imago::rel
