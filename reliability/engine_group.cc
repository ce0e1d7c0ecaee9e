// SPDX-License-Identifier: BSD-3-Clause
// Group streams (docs/PROTOCOL.md 3.7): a source's frames once to the group, each member's
// gaps repaired by unicast on its NACK, frames released when every member of the view has
// them, members that hold the stream back expired; views changed by records in the stream.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "reliability/engine.h"
#include "reliability/peer.h"

namespace imago::rel {

namespace {

constexpr size_t kMaxInterests = 256;  // joins of groups not open yet, remembered
constexpr size_t kMaxAsks = 2048;      // frames asked for per repair round (more: a round at once)
constexpr uint32_t kLeaveTries = 8;
constexpr uint8_t kTellTail = 8;  // a NACK stream's tail, told to each member (backing off)
constexpr int32_t kFar = 1 << 30;  // beyond any window: a lie
// GroupWant::asked, per peer: ask it; it is no source yet (it admits us when it opens the
// group); its stream started here (and maybe ended: no second one unless it comes back).
constexpr uint8_t kAsk = 0, kNoted = 1, kDone = 2;

bool established(const Peer& p) { return p.s.known && p.s.state == PeerState::kEstablished; }
// A control entry needs only the peer's token: a source answers a member whose own side of
// the handshake is done before its HELLO_ACK (lost, say) completes ours.
bool reachable(const Peer& p) { return p.s.known && p.s.state != PeerState::kDead; }

}  // namespace

// --- set-up and the application's calls ---

void Engine::init_groups() {
  if (cfg_.group_sources != 0) gtx_ = std::make_unique<GroupTx[]>(cfg_.group_sources);
  for (uint32_t i = 0; i < cfg_.group_sources; ++i) {
    gtx_[i].tx.init(cfg_.group_window, cfg_.group_window, cfg_.mtu, cfg_.max_sack, FrameRoom{}, nullptr);
    gtx_[i].members.reserve(cfg_.max_peers);
    gtx_[i].asks.reserve(kMaxAsks);
    gtx_[i].ptx_mem = std::make_unique<uint8_t[]>(cfg_.mtu);
    std::memset(gtx_[i].ptx_mem.get(), 0, cfg_.mtu);
    gtx_[i].ptx.bytes = gtx_[i].ptx_mem.get();
  }
  if (cfg_.group_streams != 0) grx_ = std::make_unique<GroupRx[]>(cfg_.group_streams);
  for (uint32_t i = 0; i < cfg_.group_streams; ++i) {
    grx_[i].rx.init(cfg_.group_window, unit_cap_);
    grx_[i].reasm.init(group_max_message());
    grx_[i].blocks_mem = std::make_unique<uint8_t[]>(size_t{kParityBlocks} * cfg_.mtu);
    std::memset(grx_[i].blocks_mem.get(), 0, size_t{kParityBlocks} * cfg_.mtu);
    for (uint32_t b = 0; b < kParityBlocks; ++b) grx_[i].blocks[b].bytes = grx_[i].blocks_mem.get() + size_t{b} * cfg_.mtu;
  }
  if (cfg_.group_streams != 0) rebuilt_ = std::make_unique<uint8_t[]>(cfg_.mtu);
  wants_.reserve(cfg_.group_streams);
  if (cfg_.group_sources != 0) interests_.reserve(kMaxInterests), interest_count_.reserve(cfg_.max_peers);
}

uint64_t Engine::group_max_message() const {
  // Half the window: a message always fits beside what the slowest member holds back. And
  // what every peer takes (its HELLO's): any may be a member, and one dropping a larger
  // message once whole would have acknowledged its units.
  return std::min<uint64_t>({cfg_.max_message_size, uint64_t{cfg_.group_window / 2} * unit_cap_, peers_max_message_});
}

GroupTx* Engine::find_tx(GroupId g) {
  for (uint32_t i = 0; g != 0 && i < cfg_.group_sources; ++i)
    if (gtx_[i].g == g) return &gtx_[i];
  return nullptr;
}
const GroupTx* Engine::find_tx(GroupId g) const { return const_cast<Engine*>(this)->find_tx(g); }

GroupRx* Engine::find_rx(NodeId src, GroupId g) {
  for (uint32_t i = 0; i < cfg_.group_streams; ++i)
    if (grx_[i].state != GroupRx::State::kFree && grx_[i].g == g && grx_[i].src == src) return &grx_[i];
  return nullptr;
}

GroupWant* Engine::find_want(GroupId g) {
  for (GroupWant& w : wants_)
    if (w.g == g) return &w;
  return nullptr;
}

int Engine::group_open(GroupId g, uint64_t now_ns, bool nack) {
  if (g == 0 || cfg_.group_sources == 0) return -EINVAL;
  if (find_tx(g) != nullptr) return -EEXIST;
  GroupTx* t = nullptr;
  for (uint32_t i = 0; t == nullptr && i < cfg_.group_sources; ++i)
    if (gtx_[i].g == 0) t = &gtx_[i];
  if (t == nullptr) return -ENOSPC;
  now_ = now_ns;
  t->g = g;
  t->tx.reset(new_isn());
  t->members.clear();
  t->view = 0;
  t->unsent_bytes = 0;
  t->fast_pending = 0;
  t->closing = false;
  t->nack = nack;
  t->asks.clear();
  t->repair_due = kNever;
  t->frame_no = 0;
  t->ptx.reset({});
  t->stop_seen = false;
  std::fill(std::begin(t->sent_par), std::end(t->sent_par), GroupTx::SentParity{});
  t->sent_par_n = 0;
  t->parity_on = false;
  t->parity_k = cfg_.group_parity_frames;
  t->ahead = false;
  t->losses = t->judged = t->parities = 0;
  t->loss_acc = t->block_acc = t->frame_acc = 0;
  t->judged_ns = 0;
  t->flight.reset();
  // Peers that asked before the group was open here.
  for (size_t i = 0; i < interests_.size();) {
    Peer* p = interests_[i].second == g ? find(interests_[i].first) : nullptr;
    if (p != nullptr && reachable(*p)) admit(*t, *p, false, now_ns);
    if (interests_[i].second == g)
      interests_.erase(interests_.begin() + static_cast<ptrdiff_t>(i));
    else
      ++i;
  }
  group_flush(*t, now_ns, true);
  group_deadline_ = now_ns;
  return 0;
}

int Engine::group_close(GroupId g, uint64_t now_ns) {
  GroupTx* t = find_tx(g);
  if (t == nullptr || t->closing) return -ENOENT;
  t->closing = true;
  t->closed_ns = now_ns;
  for (GroupMember& m : t->members) m.status_ns = 0;  // END to each as soon as it holds all
  group_flush(*t, now_ns, true);
  group_deadline_ = now_ns;
  return 0;
}

int Engine::group_send(GroupId g, std::span<const uint8_t> msg, uint32_t flags, uint64_t now_ns) {
  GroupTx* t = find_tx(g);
  if (t == nullptr || t->closing) return -EINVAL;
  if (msg.size() > group_max_message()) return -EMSGSIZE;
  const auto units = static_cast<uint32_t>(msg.size() <= unit_cap_ ? 1 : (msg.size() + unit_cap_ - 1) / unit_cap_);
  if (t->nack) nack_release(*t, now_ns, units, msg.size());  // room from the oldest sent
  if (!t->tx.fits(units, msg.size())) return -EAGAIN;
  now_ = now_ns;
  const bool fast = flags & send_flag::kFastpath;
  for (uint32_t i = 0; i < units; ++i) {
    const size_t off = size_t{i} * unit_cap_;
    auto part = msg.subspan(off, std::min<size_t>(unit_cap_, msg.size() - off));
    const auto rf = static_cast<uint8_t>((i + 1 < units ? rec_flag::kMore : 0) | (i > 0 ? rec_flag::kCont : 0) |
                                         (fast ? rec_flag::kFast : 0));
    t->tx.push(part, rf, now_ns);
    t->unsent_bytes += part.size() + record_header_size(part.size(), false);
  }
  if (fast) t->fast_pending += units;
  gc_.msgs_sent++;
  if (fast || t->unsent_bytes >= cfg_.mtu) group_flush(*t, now_ns, false);
  group_deadline_ = std::min(group_deadline_, now_ns + cfg_.coalesce_ns);
  return 0;
}

int Engine::group_join(GroupId g, bool from_oldest, uint64_t now_ns) {
  if (g == 0 || cfg_.group_streams == 0) return -EINVAL;
  if (find_want(g) != nullptr) return -EEXIST;
  if (wants_.size() == cfg_.group_streams) return -ENOSPC;
  GroupWant& w = wants_.emplace_back();
  w.g = g;
  w.from_oldest = from_oldest;
  w.asked.assign(cfg_.max_peers, 0);
  w.asked_ns = 0;  // ask at the next poll
  frames_->subscribe(g, true);
  group_deadline_ = now_ns;
  return 0;
}

int Engine::group_leave(GroupId g, uint64_t now_ns) {
  GroupWant* w = find_want(g);
  if (w == nullptr) return -ENOENT;
  // A peer we asked and that has no stream of g for us (never opened, or its stream ended)
  // may remember the JOIN and admit us when it opens g: it would count us a member, and its
  // application wait for one that is gone. A LEAVE makes it forget (a lost one: it admits
  // us, and our answer to its JOIN_OK, a LEAVE, ends that).
  for (size_t i = 0; i < peers_.size() && i < w->asked.size(); ++i)
    if (w->asked[i] != kDone) send_ctl(*peers_[i], group_op::kLeave, g, 0, 0);
  wants_.erase(wants_.begin() + (w - wants_.data()));
  frames_->subscribe(g, false);
  for (uint32_t i = 0; i < cfg_.group_streams; ++i) {
    GroupRx& r = grx_[i];
    if (r.state != GroupRx::State::kActive || r.g != g) continue;
    event(GroupEvent::kEnded, r.src, g, cfg_.node_id, 0, r.rx.dlv(), GroupEvent::kLeave);
    r.state = GroupRx::State::kLeaving;  // LEAVE until the source says LEAVE_OK
    r.leave_ns = 0;
    r.leave_tries = 0;
  }
  group_deadline_ = now_ns;
  return 0;
}

uint32_t Engine::groups_leaving() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < cfg_.group_streams; ++i) n += grx_[i].state == GroupRx::State::kLeaving;
  return n;
}

uint32_t Engine::groups_closing() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < cfg_.group_sources; ++i) n += gtx_[i].g != 0 && gtx_[i].closing;
  return n;
}

size_t Engine::group_members(GroupId g, NodeId* out, size_t max) const {
  const GroupTx* t = find_tx(g);
  if (t == nullptr) return 0;
  size_t n = 0;
  for (const GroupMember& m : t->members)
    if (n < max) out[n++] = m.id;
  return n;
}

bool Engine::group_tx_view(GroupId g, GroupTxView* out) const {
  const GroupTx* t = find_tx(g);
  if (t == nullptr || t->closing) return false;
  // With no member, what was sent is released at once: only the queue is pending.
  *out = {static_cast<uint32_t>(t->members.size()), t->view, t->tx.end() - t->tx.una(), t->nack};
  return true;
}

void Engine::event(GroupEvent::Kind kind, NodeId src, GroupId g, NodeId member, uint32_t view, Seq pos,
                   GroupEvent::Why why) {
  app_->on_group_event(GroupEvent{kind, src, g, member, view, pos, why});
}

// --- the source's side ---

// The view steps; its record goes in the stream unless the window is full (others hold it
// back): then the members do not meet this change in the stream, and the view number says a
// change was there when the next record comes.
void Engine::push_view(GroupTx& t, GroupEvent::Kind kind, NodeId member, Seq position, uint64_t now) {
  if (!t.tx.fits(1, sizeof(GroupViewRecord))) return void(++t.view);
  GroupViewRecord v{};
  v.kind = kind;
  v.member.set(member);
  v.view.set(++t.view);
  v.position.set(position);
  // A view change goes out at once (kFast: counted in its frame like a FASTPATH message).
  t.tx.push({reinterpret_cast<const uint8_t*>(&v), sizeof v}, rec_flag::kView | rec_flag::kFast, now);
  t.unsent_bytes += sizeof v + record_header_size(sizeof v, false);
  t.fast_pending += 1;  // flushed by the next group_poll(): its callers make it due
}

bool Engine::admit(GroupTx& t, Peer& p, bool from_oldest, uint64_t now) {
  if (t.members.size() == t.members.capacity()) return false;
  // From the oldest held: at the first whole message (the slowest member may have released
  // the start of a message it delivered part of).
  Seq start = from_oldest ? t.tx.una() : t.tx.end();
  while (start != t.tx.end() && (t.tx.at(start).rec_flags & rec_flag::kCont)) ++start;
  // Admitted even when the window is full (its record skipped): one asking from the oldest
  // gets what is held now, not what is held once the window moved (nothing old, often).
  push_view(t, GroupEvent::kJoined, p.id, start, now);
  event(GroupEvent::kJoined, cfg_.node_id, t.g, p.id, t.view, start);
  t.members.push_back(GroupMember{p.id, start, start, now, now, false});
  group_release(t);  // it may start beyond what was sent, with every other member (t.ahead)
  gc_.joins++;
  send_ctl(p, group_op::kJoinOk, t.g, start, t.view, t.nack ? group_ctl_flag::kNack : 0);
  return true;
}

void Engine::remove_member(GroupTx& t, size_t i, GroupEvent::Kind why, uint64_t now) {
  const GroupMember m = t.members[i];
  t.members.erase(t.members.begin() + static_cast<ptrdiff_t>(i));
  (why == GroupEvent::kLeft ? gc_.leaves : gc_.expiries)++;
  group_release(t);  // what it held back, first: its view change then finds room
  push_view(t, why, m.id, m.ack, now);
  event(why, cfg_.node_id, t.g, m.id, t.view, m.ack);
}

void Engine::group_release(GroupTx& t) {
  // A NACK stream frees by age and room alone (nack_release()): what it sent is held
  // --group-nack-hold-ms for repairs and FROM_OLDEST joins, members or none; its members
  // acknowledge once, so their ACKs fall behind what it freed and would hold nothing.
  if (t.nack) return;
  // Everything sent that every member holds; with no member, everything sent.
  Seq upto = t.tx.nxt();
  t.ahead = !t.members.empty();
  for (const GroupMember& m : t.members) {
    if (m.ack - t.tx.una() < upto - t.tx.una()) upto = m.ack;
    if (!seq_gt(m.ack, t.tx.nxt())) t.ahead = false;
  }
  if (upto == t.tx.una()) return;
  const uint32_t held = t.tx.free_frames();
  t.tx.release_to(upto);
  parity_released(t, t.tx.free_frames() - held);
  // What waited for room under the cap goes at the next poll.
  if (t.flight.released(t.tx.free_frames() - held, t.tx, now_) && t.tx.has_unsent()) group_deadline_ = 0;
}

// A member asked for @p frames frames in a row (flight_cap.h). Not in a NACK stream, which
// never waits for its members: its frames go by age and room.
void Engine::flight_hole(GroupTx& t, uint32_t frames) {
  if (!t.nack && t.flight.hole(frames, cfg_.group_burst_frames, t.tx, now_)) gc_.flight_cuts++;
}

void Engine::group_flush(GroupTx& t, uint64_t now, bool all) {
  SendWindow& tx = t.tx;
  uint32_t pos;
  while (tx.next_unsent(&pos)) {
    if (!t.flight.allows(tx)) break;  // a member overflowed lately
    if (!all && t.fast_pending == 0 && t.unsent_bytes < cfg_.mtu && now - tx.unsent_enq_ns() < cfg_.coalesce_ns)
      break;
    TxFrame& f = tx.frame(pos);
    // credit: the frame's number; dst_token: its parity block, if any (3.7.7).
    const ParityTag block = parity_block_open(t, f.first);
    HeaderOut h{FrameType::kGroupData, 0, cfg_.node_id, t.g, cfg_.epoch, token_, block.token(), f.first, t.view, t.frame_no};
    f.start = tx.records_offset() - static_cast<uint32_t>(sizeof(FrameHeader));
    f.len = static_cast<uint32_t>(sizeof(FrameHeader)) + f.rec_len;
    uint8_t* frame = tx.slot_of(pos) + f.start;
    encode_header(h, frame);
    finish_frame(frame, f.len, cfg_.crc);
    const std::span<const uint8_t> bytes{frame, f.len};
    if (multicast_ok()) {
      if (!frames_->send_group(t.g, bytes)) break;  // back-pressure: the next poll retries
    } else {
      // No multicast under this sink: one copy to each member (a copy lost is repaired).
      for (const GroupMember& m : t.members) gc_.unicast_copies += frames_->send_frame(m.id, bytes);
    }
    gc_.data_frames++;
    f.number = t.frame_no++;
    parity_frame_out(t, bytes, now);
    f.tx_count = 1;
    f.first_tx_ns = f.last_tx_ns = now;
    t.unsent_bytes -= f.rec_len;
    t.fast_pending -= f.fast;
    tx.mark_sent();
    // Members that lose this frame learn of it from a STATUS, an interval from now.
    group_deadline_ = std::min(group_deadline_, now + cfg_.group_status_ns);
  }
  // With no member, everything sent goes; with every member ahead, what went out before
  // their starts (no one acknowledges it). Else the slowest member's ACK releases.
  if (t.members.empty() || t.ahead) group_release(t);
}

void Engine::group_repair(GroupTx& t, Peer& p, Seq from, uint32_t n, uint64_t now) {
  SendWindow& tx = t.tx;
  // Nothing a member of the view lacks is ever released (una is the lowest of their ACKs):
  // a NACK from below una is an old one, overtaken by the member's own ACK. Not so in a NACK
  // stream: what it freed is gone, and the member is told so.
  if (seq_lt(from, tx.una())) {
    const uint32_t old = std::min(n, tx.una() - from);
    // Everything freed from there on, not just what was asked: a member that lost many holes
    // (cut off for a while) learns of them all in one round trip, not one hole per NACK.
    if (t.nack) tell_lost(t, p, from, std::min(tx.una() - from, cfg_.group_window));
    from += old, n -= old;
  }
  // The frames that hold [from, from + n) and were sent, each as it first went out: asked
  // for now, sent at the end of the round (several askers: once to the group).
  uint32_t frames = 0;
  for (Seq s = from; n != 0 && seq_lt(s, tx.nxt());) {
    const uint32_t pos = tx.fpos(s);
    if (t.asks.size() == t.asks.capacity()) repair_round(t, now);
    if (t.asks.size() < t.asks.capacity()) t.asks.push_back({tx.frame(pos).first, p.id});
    frames++;
    const Seq end = tx.frame_end(pos);
    const uint32_t step = end - s;
    if (step >= n) break;
    n -= step, s = end;
  }
  t.losses += run_losses(frames, t.parity_k);
  flight_hole(t, frames);
  t.repair_due = std::min(t.repair_due, now + cfg_.group_repair_delay_ns);
  if (cfg_.group_repair_delay_ns == 0) repair_round(t, now);
  group_deadline_ = std::min(group_deadline_, t.repair_due);
}

void Engine::repair_round(GroupTx& t, uint64_t now) {
  SendWindow& tx = t.tx;
  std::sort(t.asks.begin(), t.asks.end());
  size_t i = 0;
  bool refused = false;
  while (i < t.asks.size() && !refused) {
    size_t k = i + 1, askers = 1;
    for (; k < t.asks.size() && t.asks[k].first == t.asks[i].first; ++k) askers += t.asks[k].member != t.asks[k - 1].member;
    const Seq first = t.asks[i].first;
    // A frame is released once every member holds all of it (it may be released in part: the
    // frame holding una is still there). Released since: nothing to send.
    const Seq probe = seq_lt(first, tx.una()) ? tx.una() : first;
    const uint32_t pos = tx.fpos(probe);
    if (t.nack && seq_lt(first, tx.una())) {  // freed since it was asked for: gone
      for (size_t a = i; a < k; ++a)
        if (Peer* p = find(t.asks[a].member); p != nullptr && (a == i || t.asks[a].member != t.asks[a - 1].member))
          tell_lost(t, *p, first, std::min(tx.una() - first, cfg_.group_window));
    } else if (seq_lt(probe, tx.nxt()) && tx.frame(pos).first == first) {
      const TxFrame& f = tx.frame(pos);
      const std::span<const uint8_t> bytes{tx.slot_of(pos) + f.start, f.len};
      // Several askers, or members that hold back their NACKs for one another's repairs:
      // once to the group.
      if ((askers > 1 || cfg_.group_nack_backoff_ns != 0) && multicast_ok()) {
        refused = !frames_->send_group(t.g, bytes);
        gc_.repair_multicast += !refused, gc_.repair_frames += !refused;
      } else {
        for (size_t a = i; a < k && !refused; ++a) {
          if (a > i && t.asks[a].member == t.asks[a - 1].member) continue;
          refused = !frames_->send_frame(t.asks[a].member, bytes);
          gc_.repair_frames += !refused;
        }
      }
    }
    if (!refused) i = k;
  }
  t.asks.erase(t.asks.begin(), t.asks.begin() + static_cast<ptrdiff_t>(i));  // refused: the rest next time
  t.repair_due = t.asks.empty() ? kNever : now + cfg_.tx_retry_ns;
}

// A NACK stream's frames are freed by age (group_nack_hold_ns) and, when @p units units of
// @p bytes do not fit, oldest first: no member's ACK holds its source back.
void Engine::nack_release(GroupTx& t, uint64_t now, uint32_t units, uint64_t bytes) {
  SendWindow& tx = t.tx;
  while (tx.has_outstanding()) {
    const uint32_t pos = tx.fpos(tx.una());
    const uint64_t sent = tx.frame(pos).first_tx_ns;
    if (now - sent < cfg_.group_nack_hold_ns && (units == 0 || tx.fits(units, bytes))) {
      group_deadline_ = std::min(group_deadline_, sent + cfg_.group_nack_hold_ns);
      return;
    }
    tx.release_to(tx.frame_end(pos));
    parity_released(t, 1);
    gc_.nack_freed++;
  }
}

// A member asked for units [from, from + n) a NACK stream freed: they are lost to it.
void Engine::tell_lost(GroupTx& t, Peer& p, Seq from, uint32_t n) {
  send_ctl(p, group_op::kLost, t.g, from, n, group_ctl_flag::kNack);
  gc_.lost_told++;
}

uint64_t Engine::held_back_since(const GroupTx& t, const GroupMember& m) const {
  return seq_lt(m.ack, t.tx.nxt()) ? std::max(m.progress_ns, t.tx.frame(t.tx.fpos(m.ack)).first_tx_ns)
                                   : m.progress_ns;
}

void Engine::poll_source(GroupTx& t, uint64_t now) {
  if (now >= t.repair_due) repair_round(t, now);
  group_deadline_ = std::min(group_deadline_, t.repair_due);
  if (t.nack) nack_release(t, now, 0, 0);
  for (size_t i = 0; i < t.members.size();) {
    GroupMember& m = t.members[i];
    Peer* p = find(m.id);
    // A NACK stream's member acknowledges once: it is behind until it was told the tail
    // kTellTail times (a STATUS lost would leave it unaware of a lost tail for good), or,
    // once the stream closes, never (END, repeated, gives the tail).
    const bool untold = !t.closing && (m.told != t.tx.nxt() || m.told_times < kTellTail);
    const bool behind = !m.heard || (t.nack ? untold : seq_lt(m.ack, t.tx.nxt()));
    // The same tail told again after 1, 2, 4 ... intervals.
    const uint64_t every = t.nack && m.told == t.tx.nxt() ? cfg_.group_status_ns << std::min(m.told_times, uint8_t{7})
                                                          : cfg_.group_status_ns;
    // Held back since it last acknowledged, or since the first unit it lacks went out (a
    // member that had everything is not late for what was sent after). Never in a NACK
    // stream: its members hold nothing back (a dead one goes with its session).
    const uint64_t since = t.nack ? now : held_back_since(t, m);
    if (behind && !t.nack && now - since >= cfg_.group_expire_ns) {
      if (p != nullptr) send_ctl(*p, group_op::kExpired, t.g, m.ack, 0);
      remove_member(t, i, GroupEvent::kExpired, now);
      continue;
    }
    // A member that acknowledges as it goes needs no STATUS: only one whose ACK stood still
    // for an interval (it may have lost the tail) is told where the stream is.
    const uint64_t quiet_since = std::max(m.progress_ns, m.status_ns);
    if (behind && now - quiet_since >= every) {
      // IBRMP's EOF over the reliable channel: a member that lost the tail learns it here.
      // Without a session now, the next interval tries again.
      const uint8_t fl = t.nack ? group_ctl_flag::kNack : 0;
      if (p != nullptr && reachable(*p)) {
        if (!m.heard)
          send_ctl(*p, group_op::kJoinOk, t.g, m.start, t.view, fl);
        else
          send_ctl(*p, group_op::kStatus, t.g, t.tx.nxt(), t.view, fl);
        gc_.status_sent++;
        m.told_times = m.told == t.tx.nxt() ? m.told_times + 1 : 1;
        m.told = t.tx.nxt();
      }
      m.status_ns = now;
    }
    if (behind)
      group_deadline_ = std::min({group_deadline_, std::max(m.progress_ns, m.status_ns) + every,
                                  t.nack ? kNever : since + cfg_.group_expire_ns});
    if (!behind && t.closing) {
      // Told, and never left (nor, in a NACK stream, asked for anything): dead, or its LEAVEs lost.
      const uint64_t quiet = t.nack ? std::max(t.closed_ns, m.progress_ns) : t.closed_ns;
      if (now - quiet >= cfg_.group_expire_ns) {
        remove_member(t, i, GroupEvent::kExpired, now);
        continue;
      }
      end_member(t, m, now);
      group_deadline_ = std::min(group_deadline_, quiet + cfg_.group_expire_ns);
    }
    ++i;
  }
  if (t.closing && t.members.empty()) {
    ends_.put(t.g, t.tx.nxt());
    t.g = 0;  // every member left or was expired: the slot is free
    return;
  }
  group_flush(t, now, false);  // view changes above included
  parity_close(t, now);
  if (t.tx.has_unsent())  // coalescing, or the sink pushed back: then retry shortly, never spin
    group_deadline_ = std::min(group_deadline_, std::max(t.tx.unsent_enq_ns() + cfg_.coalesce_ns, now + cfg_.tx_retry_ns));
}

// An ACK or NACK for a stream this node no longer sends (its END or EXPIRED to the member
// lost). A NACK asks for units no longer held: EXPIRED, the member ends DROPPED. An ACK is told
// END where the stream ended if that is remembered (a member short of it ends DROPPED, never
// CLOSED at its own position as though it had everything), else at its own position.
void Engine::answer_forgotten(Peer& p, const GroupCtl& e) {
  const GroupId g = e.group.get();
  if (e.op != group_op::kAck) return send_ctl(p, group_op::kExpired, g, e.a.get(), 0);
  const Seq* end = ends_.find(g);
  send_ctl(p, group_op::kEnd, g, end != nullptr ? *end : e.a.get(), 0);
}

// A closing source's member that holds the whole stream is told it ended (every interval
// until it leaves; one that never does is expired as any silent member is).
void Engine::end_member(GroupTx& t, GroupMember& m, uint64_t now) {
  if (now - m.status_ns >= cfg_.group_status_ns || m.status_ns == 0) {
    if (Peer* p = find(m.id); p != nullptr && reachable(*p)) send_ctl(*p, group_op::kEnd, t.g, t.tx.nxt(), t.view);
    m.status_ns = now;
  }
  group_deadline_ = std::min(group_deadline_, m.status_ns + cfg_.group_status_ns);
}

bool Engine::on_source_ctl(Peer& p, const GroupCtl& e, uint64_t now) {
  const GroupId g = e.group.get();
  GroupTx* t = find_tx(g);
  if (t != nullptr && t->closing && e.op == group_op::kJoin) t = nullptr;  // as if not open: noted
  GroupMember* it = nullptr;
  for (size_t i = 0; t != nullptr && it == nullptr && i < t->members.size(); ++i)
    if (t->members[i].id == p.id) it = &t->members[i];
  const bool member = it != nullptr;
  switch (e.op) {
    case group_op::kJoin:
      if (t == nullptr) {
        const bool kept = remember_interest(p.id, g);
        send_ctl(p, group_op::kNotSource, g, 0, 0, kept ? 0 : group_ctl_flag::kNotKept);
      } else if (member) {
        send_ctl(p, group_op::kJoinOk, g, it->start, t->view, t->nack ? group_ctl_flag::kNack : 0);  // lost
      } else {
        admit(*t, p, e.a.get() != 0, now);
      }
      return true;
    case group_op::kLeave:
      if (t == nullptr) {  // it no longer wants to be admitted when the group opens here
        const std::pair<NodeId, GroupId> want{p.id, g};
        interests_.erase(std::remove(interests_.begin(), interests_.end(), want), interests_.end());
      }
      // A LEAVE names a unit of the membership it ends (its start, or what the source last
      // told it): one of an earlier membership, replayed, must not remove the member now.
      if (member && (seq_lt(e.a.get(), it->start) || seq_gt(e.a.get(), t->tx.nxt()))) return false;
      if (member) remove_member(*t, static_cast<size_t>(it - t->members.data()), GroupEvent::kLeft, now);
      send_ctl(p, group_op::kLeaveOk, g, 0, 0);
      return true;
    case group_op::kAck:
    case group_op::kNack:
    case group_op::kNackFrames: {
      if (t == nullptr) {
        if (cfg_.group_sources == 0) return false;
        answer_forgotten(p, e);
        return true;
      }
      if (!member) {
        send_ctl(p, group_op::kExpired, g, e.a.get(), 0);  // expired (or never admitted)
        return true;
      }
      GroupMember& m = *it;
      const Seq a = e.a.get();
      // A NACK stream's member still asking after the close is alive: kept (poll_source()).
      if (t->nack && t->closing && e.op != group_op::kAck) m.progress_ns = now;
      if (e.op == group_op::kNack) {
        if (e.b.get() > cfg_.group_window || a - m.start > uint32_t{kFar}) return false;
        group_repair(*t, p, a, e.b.get(), now);
        return true;
      }
      if (e.op == group_op::kNackFrames) return repair_frames(*t, p, a, e.b.get(), e.flags, now), true;
      // b: the frames it rebuilt from parity so far (a count that only grows; reordered: older).
      if (const uint32_t more = e.b.get() - m.rebuilt; more <= t->tx.slots()) t->losses += more, m.rebuilt = e.b.get();
      // A member admitted while messages waited to go out starts after them, beyond what was
      // sent: its ACK may stand there until they go.
      if (seq_lt(a, m.ack)) return m.ack - a <= uint32_t{kFar};  // older: reordered
      if (a != m.ack && seq_gt(a, t->tx.nxt())) return false;    // beyond what was sent: a lie
      if (a != m.ack || !m.heard) m.progress_ns = now;
      // Only the slowest member's ACK can release anything: group_release() leaves una at the
      // lowest ACK, unless every member is ahead of what was sent (then flushes release).
      const bool slowest = m.ack == t->tx.una();
      m.ack = a;
      m.heard = true;
      if (slowest) group_release(*t);
      if (t->ptx.count != 0) group_deadline_ = now;  // a block it may have stopped in (parity_close())
      return true;
    }
    default:
      return false;
  }
}

// --- the member's side ---

// A JOIN of a group not open here, remembered to admit its member when the group opens. The
// table is bounded and, once full, shared: the asker takes the newest entry of the peer that
// holds the most, if that one holds at least two more than it does, so no peer's joins,
// however many (forged ones in its name too), keep another's out. One pass counts them.
// @return whether it is remembered (else NOT_SOURCE tells it to ask again).
bool Engine::remember_interest(NodeId who, GroupId g) {
  const std::pair<NodeId, GroupId> want{who, g};
  if (cfg_.group_sources == 0) return false;
  if (std::find(interests_.begin(), interests_.end(), want) != interests_.end()) return true;
  if (interests_.size() < kMaxInterests) return interests_.push_back(want), true;
  ++gc_.interests_full;
  interest_count_.assign(peers_.size(), 0);  // reserved: no allocation
  uint32_t hog = 0;
  for (const auto& x : interests_)
    if (const uint32_t i = index_.at(x.first); ++interest_count_[i] > interest_count_[hog]) hog = i;
  if (interest_count_[hog] < interest_count_[index_.at(who)] + 2) return false;
  for (size_t i = interests_.size(); i-- > 0;)
    if (index_.at(interests_[i].first) == hog) return interests_[i] = want, true;
  return false;
}

void Engine::send_ctl(Peer& p, uint8_t op, GroupId g, uint32_t a, uint32_t b, uint8_t flags) {
  if (!reachable(p)) return;
  GroupCtl e{};
  e.op = op;
  e.flags = flags;
  e.group.set(g);
  e.a.set(a);
  e.b.set(b);
  if (&p != ctl_to_) {  // not an answer to the frame being handled: alone, now
    std::memcpy(txbuf_.get() + sizeof(FrameHeader), &e, sizeof e);
    return ctl_frame_out(p, txbuf_.get(), 1);
  }
  if (sizeof(FrameHeader) + (size_t{ctl_n_} + 1) * sizeof e > cfg_.mtu) flush_ctl();
  std::memcpy(ctlbuf_.get() + sizeof(FrameHeader) + size_t{ctl_n_} * sizeof e, &e, sizeof e);
  ++ctl_n_;
}

void Engine::flush_ctl() {
  if (ctl_n_ != 0 && ctl_to_ != nullptr) ctl_frame_out(*ctl_to_, ctlbuf_.get(), ctl_n_);
  ctl_n_ = 0;
}

// A GROUP_CTL frame of the @p n entries after the header room in @p buf, to @p p.
void Engine::ctl_frame_out(Peer& p, uint8_t* buf, uint32_t n) {
  // ack: the session's cumulative ACK, as in an ACK frame (the proof of section 3.3.3; it
  // acknowledges nothing here).
  HeaderOut h{FrameType::kGroupCtl, 0, cfg_.node_id, p.id, cfg_.epoch, token_, p.s.token, ++p.ctl_sent, p.rx.nxt(), 0};
  encode_header(h, buf);
  const size_t len = sizeof(FrameHeader) + size_t{n} * sizeof(GroupCtl);
  finish_frame(buf, len, cfg_.crc);
  // Not a keep-alive: it carries no credit, and a peer whose last credit was 0 or got lost
  // hears a new one only from ACKs. Group traffic every 100 ms starved the refresh, and a
  // credit-limited stream waited forever (the engine fuzzer).
  if (frames_->send_frame(p.id, {buf, len})) p.c.pkts_sent++;
}

bool Engine::on_member_ctl(Peer& p, const GroupCtl& e, uint64_t now) {
  const GroupId g = e.group.get();
  GroupRx* r = find_rx(p.id, g);
  GroupWant* w = find_want(g);
  const size_t pi = index_.at(p.id);
  switch (e.op) {
    case group_op::kJoinOk: {
      if (w == nullptr && r == nullptr) {
        send_ctl(p, group_op::kLeave, g, e.a.get(), 0);  // admitted to something we left
        return true;
      }
      if (r != nullptr) {
        r->ack_deadline = now;  // answered already: our ACK tells the source
        r->acked = false;       // (a NACK stream's one ACK was lost)
        return true;
      }
      if (w == nullptr || w->asked[pi] == kDone) {
        send_ctl(p, group_op::kLeave, g, e.a.get(), 0);  // its stream here ended: not again
        return true;
      }
      GroupRx* free = nullptr;
      for (uint32_t i = 0; free == nullptr && i < cfg_.group_streams; ++i)
        if (grx_[i].state == GroupRx::State::kFree) free = &grx_[i];
      if (free == nullptr) {
        gc_.streams_full++;
        return true;
      }
      const Seq start = e.a.get();
      free->state = GroupRx::State::kActive;
      free->g = g;
      free->src = p.id;
      free->rx.reset(start);
      free->reasm.reset();
      free->tail = free->start = start;
      free->ack_deadline = now;  // tell the source at once
      free->last_nack_ns = free->first_asked_ns = 0;
      free->last_nack_seq = start;
      free->nack_gap_ns = cfg_.nack_interval_ns;
      free->nack_now = free->blocked = free->probe_active = false;
      free->repair_rtt_ns = free->parity_lag_ns = 0;
      free->new_gaps = false;
      free->nack = e.flags & group_ctl_flag::kNack;
      free->acked = free->skip_cont = false;
      for (ParityAcc& b : free->blocks) b.reset({});
      free->hi_valid = free->in_block = false;
      free->rebuilt = 0;
      free->hold_until = 0;
      free->end_seen = false;
      w->asked[pi] = kDone;
      event(GroupEvent::kStarted, p.id, g, cfg_.node_id, e.b.get(), start);
      return true;
    }
    case group_op::kNotSource:
      // Admits us once open, if it kept our join (else we ask again on the timer).
      if (w != nullptr && w->asked[pi] == kAsk && !(e.flags & group_ctl_flag::kNotKept)) w->asked[pi] = kNoted;
      return true;
    case group_op::kStatus:
      if (r == nullptr || r->state != GroupRx::State::kActive) {
        if (w == nullptr && r == nullptr) send_ctl(p, group_op::kLeave, g, e.a.get(), 0);
        if (w != nullptr && r == nullptr) send_ctl(p, group_op::kJoin, g, w->from_oldest, 0);
        return true;
      }
      if (e.a.get() - r->rx.nxt() > uint32_t{kFar}) return false;
      r->nack = r->nack || (e.flags & group_ctl_flag::kNack);
      if (seq_gt(e.a.get(), r->rx.high()) && seq_gt(e.a.get(), r->tail)) {
        note_gap(*r, r->rx.high(), e.a.get(), now);
        // The tail of a parity block still open here, lost: the source sends the block's
        // parity once our ACK (now) says we stopped in it, and we rebuild the tail from it
        // (one lost frame). Asked only if that did not happen within a parity hold: the
        // block holds the first hole's timer (parity_ask()) and the new gap waits as long.
        const uint64_t hold_to = now + parity_hold(p, *r);
        for (ParityAcc& b : r->blocks) {
          if (b.tag.k == 0 || b.parity || b.resolved) continue;
          b.due = b.due == kNever ? hold_to : std::max(b.due, hold_to);
          r->new_due = std::max(r->new_due, hold_to);
        }
      }
      if (seq_gt(e.a.get(), r->tail)) r->tail = e.a.get();
      r->ack_deadline = now;
      // A lost NACK or repair is asked again on the first hole's timer, not here: a STATUS
      // comes every group_status_ns while we lag, often within a round trip.
      return true;
    case group_op::kExpired:
      if (r == nullptr || r->state != GroupRx::State::kActive) return true;
      if (w != nullptr) w->asked[pi] = kDone;  // no JOIN again: the application joins anew
      end_stream(*r, GroupEvent::kDropped);
      return true;
    case group_op::kEnd:
      // The source closed its stream and we hold it all (or it forgot us: what is missing
      // is reported by the position, never skipped silently). Leave, and join again should
      // it open the group anew.
      if (r == nullptr) {
        if (w == nullptr) send_ctl(p, group_op::kLeave, g, e.a.get(), 0);
        return true;
      }
      if (r->state != GroupRx::State::kActive) return true;
      group_deliver(*r);
      if (r->nack) return nack_end(p, *r, e.a.get(), now);
      end_stream(*r, GroupEvent::kClosed, e.a.get(), true);
      if (w != nullptr) w->asked[pi] = kAsk;
      return true;
    case group_op::kLeaveOk:
      if (r != nullptr && r->state == GroupRx::State::kLeaving) r->state = GroupRx::State::kFree;
      return true;
    case group_op::kLost: {
      if (r == nullptr || r->state != GroupRx::State::kActive) return true;
      const Seq a = e.a.get();
      const uint32_t n = e.b.get();
      const int32_t d = seq_diff(r->rx.nxt(), a);
      // Only a NACK stream frees what a member lacks: a LOST on an ACK stream is a lie.
      if (!r->nack || n > cfg_.group_window || d > kFar || d < -kFar) return false;
      lose_units(*r, a, n);
      return true;
    }
    default:
      return false;
  }
}

// A NACK stream's source does not know what we hold: whatever we lack before its END, however
// far behind, is asked for (repaired, or told lost), and the stream ends CLOSED once delivered
// up to it. An END before a unit we know was sent answers our NACK or ACK from a source that no
// longer has the stream: it expired us (3.7.6 Close).
bool Engine::nack_end(Peer& p, GroupRx& r, Seq end, uint64_t now) {
  if (seq_lt(end, r.tail)) {
    if (GroupWant* w = find_want(r.g)) w->asked[index_.at(p.id)] = kDone;  // as on EXPIRED
    end_stream(r, GroupEvent::kDropped);
    return true;
  }
  if (seq_diff(r.rx.nxt(), end) > kFar) return false;
  if (seq_gt(end, r.tail)) note_gap(r, r.tail, end, now), r.tail = end;
  r.end_seen = true;
  r.end_at = end;
  nack_close_if_done(p, r);
  return true;
}

void Engine::nack_close_if_done(Peer& p, GroupRx& r) {
  if (!r.end_seen || r.rx.dlv() != r.end_at) return;
  end_stream(r, GroupEvent::kClosed, r.end_at, true);
  if (GroupWant* w = find_want(r.g)) w->asked[index_.at(p.id)] = kAsk;  // joined again if reopened
}

// The stream ended here (@p why; kClosed: at @p end_at). Its end is told only after what it
// holds in order, and never dropped: a member is expired because its application lags, so
// its ring is full just then (poll_ending()).
void Engine::end_stream(GroupRx& r, GroupEvent::Why why, Seq end_at, bool leave) {
  r.state = GroupRx::State::kEnding;
  r.end_why = why;
  r.end_at = end_at;
  r.end_leave = leave;
  poll_ending(r, now_);
}

void Engine::poll_ending(GroupRx& r, uint64_t now) {
  group_deliver(r);
  GroupEvent e{GroupEvent::kEnded, r.src, r.g, cfg_.node_id, 0, r.rx.dlv(), static_cast<GroupEvent::Why>(r.end_why)};
  if (e.why == GroupEvent::kClosed && r.rx.dlv() != r.end_at) e.why = GroupEvent::kDropped;
  if (r.blocked || !app_->on_group_report(e)) {
    group_deadline_ = std::min(group_deadline_, now + cfg_.deliver_retry_ns);
    return;
  }
  r.state = r.end_leave ? GroupRx::State::kLeaving : GroupRx::State::kFree;
  r.leave_ns = 0;  // LEAVE at the next poll
  r.leave_tries = 0;
  if (r.end_leave) group_deadline_ = now;
}

void Engine::on_group_ctl(Peer& p, std::span<const uint8_t> body, uint64_t now) {
  if (body.empty() || body.size() % sizeof(GroupCtl) != 0)
    return void(p.c.reject[static_cast<size_t>(Reject::kBadGroupCtl)]++);
  ctl_to_ = &p;  // the answers to its entries go back together (send_ctl())
  for (size_t off = 0; off < body.size(); off += sizeof(GroupCtl)) {
    GroupCtl e;
    std::memcpy(&e, body.data() + off, sizeof e);
    const bool to_source = e.op == group_op::kJoin || e.op == group_op::kLeave ||
                           e.op == group_op::kAck || e.op == group_op::kNack || e.op == group_op::kNackFrames;
    const bool ok = e.group.get() != 0 && e.op >= 1 && e.op <= group_op::kMax &&
                    (to_source ? on_source_ctl(p, e, now) : on_member_ctl(p, e, now));
    if (!ok) p.c.reject[static_cast<size_t>(Reject::kBadGroupCtl)]++;
  }
  flush_ctl();
  ctl_to_ = nullptr;
  group_deadline_ = now;  // answers and repairs may be due
}

GroupRx* Engine::stream_of(const Header& h, Peer** src) {
  Peer* p = find(h.src_node);
  if (p == nullptr) return orphan_.reject[static_cast<size_t>(Reject::kUnknownPeer)]++, nullptr;
  auto reject = [&](Reject why) { return p->c.reject[static_cast<size_t>(why)]++, nullptr; };
  // No token of ours in a frame to a group: the source's own identity is what is checked.
  if (!p->s.known || p->s.state == PeerState::kDead) return reject(Reject::kNoSession);
  if (h.src_epoch != p->s.epoch || h.src_token != p->s.token) return reject(Reject::kWrongToken);
  GroupRx* r = find_rx(p->id, h.dst_node);
  if (r == nullptr || r->state != GroupRx::State::kActive) return reject(Reject::kNotJoined);
  *src = p;
  return r;
}

void Engine::on_group_data(const Header& h, std::span<const uint8_t> frame, std::span<const uint8_t> body,
                           uint64_t now) {
  Peer* p = nullptr;
  GroupRx* r = stream_of(h, &p);
  if (r == nullptr) return;
  auto reject = [&](Reject why) { p->c.reject[static_cast<size_t>(why)]++; };
  // Every record checked before any is used (units above one slot, VIEW records of another
  // size): the same check as a DATA frame's.
  if (!records_ok(body, h.seq, rec_flag::kAllGroup)) return reject(Reject::kBadRecord);
  p->last_heard = now;
  ParityAcc* ready = parity_frame_in(*p, *r, h, frame, now);
  each_record(body, h.seq, rec_flag::kAllGroup,
              [&](const Record& rec) { group_unit(*p, *r, rec.seq, rec.flags, rec.payload, now); });
  r->in_block = false;
  if (ready != nullptr) parity_rebuild(*p, *r, *ready, now);  // the block's last frame missing
  group_deliver(*r);
  if (r->nack_now) group_deadline_ = std::min(group_deadline_, r->new_due);
  group_deadline_ = std::min(group_deadline_, r->end_seen ? now : r->ack_deadline);  // its end may be delivered
}

void Engine::group_unit(Peer& p, GroupRx& r, Seq s, uint8_t flags, std::span<const uint8_t> payload,
                        uint64_t now) {
  RecvWindow& rx = r.rx;
  const int32_t d = seq_diff(rx.nxt(), s);
  if (d < 0 || rx.present(s)) {
    if (d < -kFar) return void(p.c.reject[static_cast<size_t>(Reject::kOutOfWindow)]++);
    gc_.dup_received++;
    r.ack_deadline = std::min(r.ack_deadline, now + cfg_.group_ack_delay_ns);  // our ACK may be lost
    return;
  }
  if (d > kFar) return void(p.c.reject[static_cast<size_t>(Reject::kOutOfWindow)]++);
  if (!rx.fits(s)) return void(gc_.overflow++);
  if (seq_gt(s, rx.high())) note_gap(r, seq_gt(r.tail, rx.high()) ? r.tail : rx.high(), s, now);
  rx.store(s, flags, payload);
  if (seq_gt(s + 1, r.tail)) r.tail = s + 1;
  r.ack_deadline = std::min(r.ack_deadline, now + cfg_.group_ack_delay_ns);
}

void Engine::group_deliver(GroupRx& r) {
  RecvWindow& rx = r.rx;
  r.blocked = false;
  for (;;) {
    if (r.reasm.complete()) {
      if (!app_->deliver_group(r.src, r.g, r.reasm.message())) return void(r.blocked = true);
      gc_.msgs_received++;
      r.reasm.consumed();
    }
    if (rx.dlv() == rx.nxt()) return;
    const RxSlot& sl = rx.slot(rx.dlv());
    const std::span<const uint8_t> unit = rx.payload(rx.dlv());
    if (sl.rec_flags & kLostUnit) {
      if (!deliver_lost(r)) return void(r.blocked = true);
      continue;
    }
    if (r.skip_cont && (sl.rec_flags & rec_flag::kCont)) {
      // The rest of a message a lost unit was part of: dropped with it.
    } else if (r.skip_cont = false; sl.rec_flags & rec_flag::kView) {
      GroupViewRecord v;
      std::memcpy(&v, unit.data(), sizeof v);
      if (v.kind >= GroupEvent::kJoined && v.kind <= GroupEvent::kExpired)
        event(static_cast<GroupEvent::Kind>(v.kind), r.src, r.g, v.member.get(), v.view.get(), v.position.get());
    } else if (!(sl.rec_flags & (rec_flag::kMore | rec_flag::kCont)) && !r.reasm.in_message()) {
      if (!app_->deliver_group(r.src, r.g, unit)) return void(r.blocked = true);
      gc_.msgs_received++;
    } else {
      // A bad fragment sequence is dropped by it, and counted against the source.
      if (const Reject bad = r.reasm.add(sl.rec_flags, unit); bad != Reject::kNone)
        if (Peer* p = find(r.src)) p->c.reject[static_cast<size_t>(bad)]++;
    }
    rx.pop();
    // What the member acknowledges is what it delivered: a member whose application lags
    // holds the source back (flow control), and is expired if it lags too long.
    r.ack_deadline = std::min(r.ack_deadline, now_ + cfg_.group_ack_delay_ns);
  }
}

// The source of a NACK stream freed units [a, a + n): those still missing here are marked
// lost, and delivery reports them in their place (deliver_lost()).
void Engine::lose_units(GroupRx& r, Seq a, uint32_t n) {
  RecvWindow& rx = r.rx;
  Seq s = seq_lt(a, rx.nxt()) ? rx.nxt() : a;
  for (const Seq end = a + n; seq_lt(s, end) && rx.fits(s); ++s)
    if (!rx.present(s)) rx.store(s, kLostUnit, {});
  if (seq_gt(s, r.tail)) r.tail = s;
  group_deliver(r);
  // The holes after these (and what the window had no room for) are asked at once: the
  // source answers, and they are older than any timer would say. Not while the window has
  // no room (the application lags): asked again at once, the source would answer LOST at
  // once, and so on at every poll; the first hole's timer asks them, backing off.
  if (rx.fits(s)) note_gap(r, rx.nxt(), r.tail, now_);
}

// A run of lost units at the delivery point: one kLost event, and the message they were part
// of dropped (what was rebuilt of it, and its fragments that follow).
bool Engine::deliver_lost(GroupRx& r) {
  RecvWindow& rx = r.rx;
  Seq end = rx.dlv();
  while (end != rx.nxt() && (rx.slot(end).rec_flags & kLostUnit)) ++end;
  GroupEvent e{GroupEvent::kLost, r.src, r.g, cfg_.node_id, 0, rx.dlv()};
  e.count = end - rx.dlv();
  if (!app_->on_group_report(e)) return false;
  while (rx.dlv() != end) rx.pop();
  r.reasm.reset();
  r.skip_cont = true;
  gc_.lost_events++;
  gc_.units_lost += e.count;  // as reported: a stream that ends before reporting some says so by ENDED
  return true;
}

void Engine::note_gap(GroupRx& r, Seq from, Seq to, uint64_t now) {
  if (!seq_lt(from, to) || r.in_block) return;  // a parity block's holes: its own to ask (parity_ask())
  // Asked at once, or after a random back-off: a repair another member asked for, sent to
  // the group, may fill it meanwhile, and then it is never asked (NORM's NACK suppression).
  if (!r.new_gaps) r.new_due = now + (cfg_.group_nack_backoff_ns ? rng_.below(cfg_.group_nack_backoff_ns + 1) : 0);
  if (!r.new_gaps || seq_lt(from, r.new_from)) r.new_from = from;
  r.new_gaps = r.nack_now = true;
}

// How much of hole [s, end) to ask for: what the receive window has room for (a NACK
// stream's source may be any distance ahead; the rest is asked once there is room).
namespace {
uint32_t nack_span(const GroupRx& r, Seq s, Seq end) {
  return std::min<uint32_t>(end - s, r.rx.dlv() + r.rx.slots() - s);
}
}  // namespace

void Engine::nack_new_gaps(Peer& p, GroupRx& r, uint64_t now) {
  constexpr int kMaxNacks = 32;  // per poll; the rest are asked as they become the first hole
  const RecvWindow& rx = r.rx;
  Seq s = seq_lt(r.new_from, rx.nxt()) ? rx.nxt() : r.new_from;
  const Seq end = seq_gt(r.tail, rx.high()) ? r.tail : rx.high();
  for (int k = 0; k < kMaxNacks && seq_lt(s, end); ++k) {
    Seq a, b;
    const bool held = rx.next_run(s, &a, &b);
    const Seq hole_end = held ? a : end;
    if (seq_lt(s, hole_end)) {
      send_ctl(p, group_op::kNack, r.g, s, nack_span(r, s, hole_end));
      gc_.nacks_sent++;
      if (!r.probe_active) r.probe_seq = s, r.probe_ns = now, r.probe_active = r.probe_clean = true;
    }
    if (!held) break;
    s = b;
  }
  r.new_gaps = false;
}

// The first hole asked again. A block's ask of its frames restarts the timer, and its hold
// (its parity may rebuild the hole) holds it; but later blocks' asks and holds keep coming as
// the stream goes on, and a hole whose repair was lost would then wait for the stream's end:
// a hold past its own timer it is asked anyway.
void Engine::ask_first_hole(Peer& p, GroupRx& r, uint64_t now) {
  const uint64_t overdue = r.first_asked_ns + r.nack_gap_ns + parity_hold(p, r);
  if ((now >= r.hold_until && now - r.last_nack_ns >= r.nack_gap_ns) || now >= overdue) {
    Seq a, b;
    const Seq upto = r.rx.next_run(r.rx.nxt(), &a, &b) ? a : r.tail;
    send_ctl(p, group_op::kNack, r.g, r.rx.nxt(), nack_span(r, r.rx.nxt(), upto));
    gc_.nacks_sent++;
    if (r.probe_active && r.probe_seq == r.rx.nxt()) r.probe_clean = false;  // asked again: ambiguous
    if (!r.probe_active) r.probe_seq = r.rx.nxt(), r.probe_ns = now, r.probe_active = r.probe_clean = true;
    // At least 8 tries before the source's expiry.
    r.nack_gap_ns = std::min({2 * r.nack_gap_ns, cfg_.rto_max_ns, std::max(cfg_.group_expire_ns / 8, cfg_.nack_interval_ns)});
    r.last_nack_ns = r.first_asked_ns = now;
  }
  const uint64_t next = std::max(r.hold_until, r.last_nack_ns + r.nack_gap_ns);
  group_deadline_ = std::min({group_deadline_, next, r.first_asked_ns + r.nack_gap_ns + parity_hold(p, r)});
}

void Engine::poll_member(GroupRx& r, uint64_t now) {
  if (r.state == GroupRx::State::kEnding) return poll_ending(r, now);  // no word to the source
  Peer* p = find(r.src);
  if (p == nullptr || !established(*p)) return;
  if (r.state == GroupRx::State::kLeaving) {
    if (now - r.leave_ns >= cfg_.group_status_ns) {
      send_ctl(*p, group_op::kLeave, r.g, r.start, 0);
      r.leave_ns = now;
      if (++r.leave_tries >= kLeaveTries) r.state = GroupRx::State::kFree;  // it expires us
    }
    group_deadline_ = std::min(group_deadline_, r.leave_ns + cfg_.group_status_ns);
    return;
  }
  if (r.blocked) {
    group_deliver(r);
    if (r.blocked) group_deadline_ = std::min(group_deadline_, now + cfg_.deliver_retry_ns);
  }
  nack_close_if_done(*p, r);
  if (r.state != GroupRx::State::kActive) return;
  const bool gap = r.rx.has_gap() || r.rx.nxt() != r.tail;
  // Each hole is asked for once when it appears. The first one alone is asked again, a
  // round trip later at the earliest (its repair is on the way until then), backing off
  // (doubling, up to rto_max_ns): a source that does not answer is not flooded, and is
  // expired by its session's death if it is gone.
  if (r.rx.nxt() != r.last_nack_seq) {  // a new first hole, asked when it appeared
    if (r.probe_active && seq_gt(r.rx.nxt(), r.probe_seq)) {  // the probed hole was filled
      const uint64_t sample = now - r.probe_ns;
      // A hole asked again measures from its first ask: at least the round trip, so taken
      // only when it raises the estimate (Karn's rule, but a gap under the round trip asks
      // every hole twice and would never be measured).
      if (r.probe_clean || sample > r.repair_rtt_ns)
        r.repair_rtt_ns = r.repair_rtt_ns ? (7 * r.repair_rtt_ns + sample) / 8 : sample;
      r.probe_active = false;
    }
    // Twice the repair round trip, within [nack_interval, 4 STATUS intervals]: under load a
    // round trip grows, and a repair lost then must not wait that long again.
    const uint64_t floor = std::max(cfg_.nack_interval_ns, p->rto.srtt());
    r.nack_gap_ns = std::max(floor, std::min(2 * r.repair_rtt_ns, 4 * cfg_.group_status_ns));
    r.last_nack_seq = r.rx.nxt();
    r.last_nack_ns = r.first_asked_ns = now;
  }
  if (r.new_gaps && now >= r.new_due) nack_new_gaps(*p, r, now);
  if (r.new_gaps) group_deadline_ = std::min(group_deadline_, r.new_due);
  parity_ask(*p, r, now);
  if (gap) ask_first_hole(*p, r, now);
  r.nack_now = r.new_gaps;
  if (r.ack_deadline <= now) {
    if (!r.nack || !r.acked) {  // a NACK stream's member acknowledges its JOIN_OK only
      send_ctl(*p, group_op::kAck, r.g, r.rx.dlv(), r.rebuilt);
      gc_.acks_sent++;
      r.acked = true;
    }
    r.ack_deadline = kNever;
  }
  group_deadline_ = std::min(group_deadline_, r.ack_deadline);
}

void Engine::poll_wants(uint64_t now) {
  for (GroupWant& w : wants_) {
    if (w.asked_ns != 0 && now - w.asked_ns < cfg_.rto_initial_ns) {
      group_deadline_ = std::min(group_deadline_, w.asked_ns + cfg_.rto_initial_ns);
      continue;
    }
    bool pending = false;
    for (size_t i = 0; i < peers_.size(); ++i) {
      Peer& p = *peers_[i];
      if (w.asked[i] != kAsk || !established(p)) continue;
      send_ctl(p, group_op::kJoin, w.g, w.from_oldest, 0);
      pending = true;
    }
    w.asked_ns = now;
    if (pending) group_deadline_ = std::min(group_deadline_, now + cfg_.rto_initial_ns);
  }
}

void Engine::group_poll(uint64_t now) {
  if (now < group_deadline_) return;
  group_deadline_ = kNever;
  for (uint32_t i = 0; i < cfg_.group_sources; ++i)
    if (gtx_[i].g != 0) poll_source(gtx_[i], now);
  for (uint32_t i = 0; i < cfg_.group_streams; ++i)
    if (grx_[i].state != GroupRx::State::kFree) poll_member(grx_[i], now);
  poll_wants(now);
  // Peers whose sessions are not up yet are asked once they are (their HELLOs wake us).
  if (!wants_.empty()) group_deadline_ = std::min(group_deadline_, now + cfg_.rto_initial_ns);
}

void Engine::group_peer_gone(Peer& p, GroupEvent::Why why) {
  // Its streams end here, it leaves every view of ours, and it is asked again once back;
  // but a peer that dropped us (it declared us dead) is asked again only for what it had
  // not admitted us to: a stream of it we had (kDone), ended here or by its EXPIRED before,
  // is joined anew only by the application, as after an EXPIRED.
  const auto it = index_.find(p.id);
  for (GroupWant& w : wants_)
    if (it != index_.end() && (why != GroupEvent::kDropped || w.asked[it->second] != kDone)) w.asked[it->second] = kAsk;
  for (uint32_t i = 0; i < cfg_.group_streams; ++i) {
    GroupRx& r = grx_[i];
    if (r.state == GroupRx::State::kActive && r.src == p.id) end_stream(r, why);
    if (r.state == GroupRx::State::kLeaving && r.src == p.id) r.state = GroupRx::State::kFree;
    if (r.state == GroupRx::State::kEnding && r.src == p.id) r.end_leave = false;  // no one to tell
  }
  for (uint32_t i = 0; i < cfg_.group_sources; ++i) {
    GroupTx& t = gtx_[i];
    for (size_t k = 0; t.g != 0 && k < t.members.size(); ++k)
      if (t.members[k].id == p.id) {
        remove_member(t, k, GroupEvent::kExpired, now_);
        break;
      }
  }
  group_deadline_ = now_;
}

}  // namespace imago::rel
