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
ParityTag Engine::parity_block_open(GroupTx& t, Seq first) {
  if (t.ptx.tag.k == 0 && t.parity_on) t.ptx.reset({t.frame_no, t.parity_k}), t.ptx_seq = first;
  return t.ptx.tag;
}

void Engine::parity_frame_out(GroupTx& t, std::span<const uint8_t> frame, uint64_t now) {
  if (t.ptx.tag.k == 0) return;
  t.ptx.add(frame);
  t.ptx_ns = now;
  t.stop_seen = false;
  if (t.ptx.count == t.ptx.tag.k) send_parity(t, now);
}

// A block the stream stopped in (idle, or its window full) is closed early, its parity
// covering the frames sent. In an ACK stream, once the members' ACKs for its frames are due,
// and by what they say: no parity when every member holds the block (none is needed); its
// parity when a member stopped inside it (it lost a frame there, and may hold the window
// until it rebuilds it); else (members held back by an earlier block's hole) not yet: a
// block closed at every stall of a full window would be a few frames long, its parity dear.
// A NACK stream's members do not say: its block is closed a quarter NACK interval on.
void Engine::parity_close(GroupTx& t, uint64_t now) {
  if (t.ptx.count == 0 || t.tx.has_unsent()) return void(t.stop_seen = false);
  if (!t.nack && !seq_lt(t.tx.una(), t.tx.nxt())) return t.ptx.reset({});
  const uint64_t at = t.ptx_ns + (t.nack ? 0 : cfg_.group_ack_delay_ns) + cfg_.nack_interval_ns / 4;
  if (now < at) return void(group_deadline_ = std::min(group_deadline_, at));
  if (t.nack || stopped_in_block(t)) {
    // Stopped at two looks with the application's messages taken in between (a node takes
    // them before its engine's timers run): an ACK that just opened the window is no stop.
    if (t.stop_seen) return send_parity(t, now);
    t.stop_seen = true;
    return void(group_deadline_ = std::min(group_deadline_, now));
  }
  // Their ACKs will say (each brings the next look); this, should none come.
  group_deadline_ = std::min(group_deadline_, now + cfg_.group_ack_delay_ns);
}

// A member whose ACK stopped inside the open block (at a frame it lacks).
bool Engine::stopped_in_block(const GroupTx& t) const {
  for (const GroupMember& m : t.members)
    if (seq_le(t.ptx_seq, m.ack) && seq_lt(m.ack, t.tx.nxt())) return true;
  return false;
}

// A parity frame costs one frame a block and saves a repair at each member that lost one
// frame of it: it pays once members lose, between them, more than one frame a block. On at
// 1.5 losses a block, off below 1 (in between: as it was), counting frames asked for and
// frames members said they rebuilt against frames released: both are what members told, so
// a burst of sends that no member has answered yet does not read as a loss-free stretch.
// Judged over the last few judgements, and a judgement's frames capped at twice its due: a
// hole filled at last releases many frames at once, whose losses were told before, and that
// release alone would read as a loss-free stretch. For the same reason at most one judgement
// an ACK delay: the ACKs of a burst read together release in steps (the slowest member's,
// then the next slowest's), each of which would be judged alone and as loss-free.
void Engine::parity_released(GroupTx& t, uint32_t frames) {
  if (cfg_.group_parity_frames == 0) return;
  t.judged += frames;
  const uint32_t due = kJudgeBlocks * cfg_.group_parity_frames;
  if (t.judged < due || (t.judged_ns != 0 && now_ - t.judged_ns < cfg_.group_ack_delay_ns)) return;
  t.judged_ns = now_;
  // Blocks: of the judged frames, or the parity frames sent if more (blocks closed early). A
  // parity frame costs one copy per member where the link cannot multicast, and saves only
  // that member's loss: there it must be worth a copy each.
  const uint64_t copies = multicast_ok() ? 1 : std::max<size_t>(t.members.size(), 1);
  const uint64_t judged = std::min(t.judged, 2 * due);
  const uint64_t blocks = std::max<uint64_t>(judged / t.parity_k, t.parities);
  t.loss_acc = t.loss_acc * 3 / 4 + t.losses;
  t.block_acc = t.block_acc * 3 / 4 + blocks * copies;
  t.frame_acc = t.frame_acc * 3 / 4 + judged;
  if (2 * t.loss_acc >= 3 * t.block_acc) t.parity_on = true;
  if (t.loss_acc < t.block_acc) t.parity_on = false;
  // New blocks: the size that costs least at each member's loss rate, as judged.
  const size_t members = std::max<size_t>(t.members.size(), 1);
  const double p = std::min(0.5, static_cast<double>(t.loss_acc) / static_cast<double>(t.frame_acc * members));
  if (cfg_.group_parity_fit) t.parity_k = cheapest_block(p, members, copies, cfg_.group_parity_frames);
  t.losses = t.judged = t.parities = 0;
}

void Engine::send_parity(GroupTx& t, uint64_t now) {
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
  t.sent_par[t.sent_par_n++ % GroupTx::kSentParities] = {a.tag.first, a.count, now};
  a.reset({});
}

// NACK_FRAMES: frames first + j for each bit j of @p bits, asked by number. Each goes the way
// a NACK's frames go (group_repair()); one released or never sent is not there to send. A
// member's first ask of a block without its parity (@p flags kNoParity) may leave one to the
// parity (parity_withheld()).
void Engine::repair_frames(GroupTx& t, Peer& p, uint32_t first, uint32_t bits, uint8_t flags, uint64_t now) {
  if (flags & group_ctl_flag::kNoParity) bits &= ~parity_withheld(t, first, bits, now);
  // The longest run of frames lost in a row: a long one says the member overflowed (3.7.8).
  uint32_t run = 0;
  for (uint32_t b = bits; b != 0; b &= b << 1) ++run;
  flight_hole(t, run);
  for (; bits != 0; bits &= bits - 1) {
    uint32_t pos;
    if (t.tx.sent_frame(first + static_cast<uint32_t>(std::countr_zero(bits)), &pos))
      group_repair(t, p, t.tx.frame_first(pos), 1, now);
  }
}

// A member asked for frames of a block without its parity. On a loaded machine its hold ran
// out while the parity was on its way (sent lately: within the longest hold a member keeps,
// 8 STATUS intervals), or before the source judged the block it stopped in (still open here:
// its parity is due, as a member lacks a frame of it, and goes now). Either way the parity
// rebuilds one frame of the block there: the highest named is not sent again. Should that
// parity be lost, the member's first hole's timer asks again (not in a NACK stream, which
// frees frames by age: asked late, one could be gone). @return that frame's bit.
uint32_t Engine::parity_withheld(GroupTx& t, uint32_t first, uint32_t bits, uint64_t now) {
  if (bits == 0 || t.nack) return 0;
  const uint32_t top = first + 31 - static_cast<uint32_t>(std::countl_zero(bits));
  const auto in = [top](uint32_t from, uint32_t n) { return top - from < n; };
  bool covered = false;
  if (t.ptx.count != 0 && in(t.ptx.tag.first, t.ptx.count)) {
    if (!t.tx.has_unsent()) send_parity(t, now);
    covered = true;
  }
  for (const GroupTx::SentParity& s : t.sent_par)
    covered = covered || (s.frames != 0 && in(s.first, s.frames) && now - s.ns <= 8 * cfg_.group_status_ns);
  return covered ? uint32_t{1} << (top - first) : 0;
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
  b->last_ns = now;
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

// When each block followed asks for what it lacks: at once with its parity here; else a hold
// after its last frame (its parity follows it on the wire, or, in a block the source stopped
// in, once the members' ACKs said a member needs it), so that a loaded machine's late parity
// is not taken for a lost one and every hole asked for.
void Engine::parity_schedule(const Peer& p, GroupRx& r, uint64_t now) {
  const uint64_t hold = parity_hold(p, r);
  for (ParityAcc& b : r.blocks) {
    if (b.tag.k == 0 || b.resolved) continue;
    const uint32_t known = known_sent(r, b);
    if ((b.missing(known) & ~b.asked) == 0) {
      b.resolved = known == b.frames;
      continue;
    }
    // While its frames still come the block is open, its parity still to come: its hold runs
    // from the last frame. Once complete, its parity follows its last frame.
    if (!b.parity && known < b.frames) b.due = now + hold;
    else b.due = std::min(b.due, now + (b.parity ? 0 : hold));
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
  if (covers < tag.k && b->last_ns != 0) {  // closed early: how late such a parity comes
    const uint64_t lag = now - std::min(now, b->last_ns);
    r->parity_lag_ns = r->parity_lag_ns ? (7 * r->parity_lag_ns + lag) / 8 : lag;
  }
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

// The source closes a block it stopped in an ACK delay and a quarter NACK interval after its
// last frame; then one way here. Round trips, ours and our repairs', stand for the trips; the
// repairs' within 4 STATUS intervals, as the first hole's timer takes it (poll_member()).
// Twice how late the parities of blocks closed early came, within 8 STATUS intervals: on a
// loaded machine the source's turn on its core, not the wire, sets that.
uint64_t Engine::parity_hold(const Peer& p, const GroupRx& r) const {
  const uint64_t trips = std::max({2 * std::max(cfg_.nack_interval_ns, p.rto.srtt()),
                                   std::min(2 * r.repair_rtt_ns, 4 * cfg_.group_status_ns),
                                   std::min(2 * r.parity_lag_ns, 8 * cfg_.group_status_ns)});
  return cfg_.group_ack_delay_ns + trips;
}

// A frame of a block after @p b came: b's parity, sent before it, is lost.
bool Engine::parity_passed(const GroupRx& r, const ParityAcc& b) const {
  return r.hi_valid && seq_ge(r.hi_frame, b.tag.first + b.frames);
}

// A block followed before @p b that still lacks frames: our ACK stops there.
bool Engine::parity_older_lacks(const GroupRx& r, const ParityAcc& b) const {
  for (const ParityAcc& o : r.blocks)
    if (o.tag.k != 0 && seq_lt(o.tag.first, b.tag.first) && o.missing(known_sent(r, o)) != 0) return true;
  return false;
}

// Blocks whose time came ask for the frames they lack by number (NACK_FRAMES): all but the
// last when the parity is here (that one is rebuilt once the others come), else all. Until
// then the first hole is not asked for again (hold_until).
void Engine::parity_ask(Peer& p, GroupRx& r, uint64_t now) {
  r.hold_until = 0;
  const uint64_t hold = parity_hold(p, r);
  for (ParityAcc& b : r.blocks) {
    if (b.tag.k == 0) continue;
    // Asked for without its parity: the source may have left one frame to it, for the parity
    // it sends when the block ends. The first hole's timer waits for it while the block's
    // frames still come and a hold after; not once a later block's frame came (the parity
    // goes before it: lost).
    if (b.bare_ns != 0 && !b.parity && (b.missing(known_sent(r, b)) & b.asked) != 0 && !parity_passed(r, b))
      r.hold_until = std::max(r.hold_until, std::max(b.bare_ns, b.last_ns) + hold);
    if (b.resolved || b.due == kNever) continue;
    // No parity yet, and our ACK stops at an older block's hole: a source stopped in this
    // block closes it only once a member's ACK stops inside it. Held (the first hole's timer,
    // an older block's, is not) until then, and a hold on.
    if (!b.parity && parity_older_lacks(r, b)) {
      b.due = now + hold;
      group_deadline_ = std::min(group_deadline_, b.due);
      continue;
    }
    if (b.due > now) {
      r.hold_until = std::max(r.hold_until, b.due);
      group_deadline_ = std::min(group_deadline_, b.due);
      continue;
    }
    const uint32_t known = known_sent(r, b);
    const uint64_t missing = b.missing(known);
    uint64_t want = missing & ~b.asked;
    // One frame is left to the parity: none more when one asked for is still missing (the
    // source may not send it again, parity_withheld()), else the highest.
    if (b.parity && missing != 0 && (missing & b.asked) == 0) want &= ~(uint64_t{1} << (63 - std::countl_zero(missing)));
    // Without the parity, and before any frame of a later block (the parity goes before them:
    // lost), the first ask says so, on the entry with the highest frame: the source leaves at
    // most that one to the parity.
    const bool bare = !b.parity && b.asked == 0 && want != 0 && !parity_passed(r, b);
    const uint32_t top_half = want >> 32 ? 1 : 0;
    if (bare) b.bare_ns = now;
    for (uint32_t half = 0; half < 2; ++half)
      if (const auto bits = static_cast<uint32_t>(want >> (32 * half)); bits != 0) {
        const uint8_t fl = bare && half == top_half ? group_ctl_flag::kNoParity : 0;
        send_ctl(p, group_op::kNackFrames, r.g, b.tag.first + 32 * half, bits, fl);
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
