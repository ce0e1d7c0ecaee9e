// SPDX-License-Identifier: BSD-3-Clause
// An ordered group endpoint's ordering: records in, descriptors held and let out in order,
// records out. See group_order.h.
#include "api/group_order.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace imago::api {

using rel::NodeId;
using rel::order::TotalCtl;

int GroupOrder::init(order::Mode mode, std::span<const NodeId> members, NodeId self, uint32_t window,
                     uint32_t slack, Io* io) {
  if (members.size() < 2 || members.size() > order::kMaxWidth || window == 0 || io == nullptr) return -EINVAL;
  members_.assign(members.begin(), members.end());
  std::sort(members_.begin(), members_.end());
  const auto w = static_cast<uint32_t>(members_.size());
  int rc = 0;
  uint32_t holdable = 0;
  if (mode == order::Mode::kCausal) {
    rc = co_.init(members_, self, window);
    holdable = window * (w - 1);
  } else {
    out_ = std::make_unique<TotalOut>(this);
    rc = to_.init(members_, self, window, out_.get());
    holdable = 2 * window * (w - 1);
  }
  if (rc != 0) return rc;
  head_ = order::Head{order::Kind::kData, mode, static_cast<uint8_t>(w), order::fingerprint(mode, window, members_)};
  self_ = self, window_ = window, io_ = io;
  self_slot_ = static_cast<uint32_t>(slot_of(self));
  joined_.assign(w, 0), departed_.assign(w, 0), ended_.assign(w, 0), told_ended_.assign(w, 0), started_.assign(w, 0), credit_.assign(w, 0), told_.assign(w, 0), stamped_.assign(w, 0);
  joined_[self_slot_] = 1, all_joined_ = false;
  scratch_.assign(w, 0);
  slots_.assign(holdable + slack, imago_msg{});
  ready_.init(slots_.size()), outbox_.init(kOutboxHigh + 64), used_.assign(slots_.size(), 0);
  big_sent_.init(window), big_window_ = 0, own_big_ = 0;
  free_.clear(), free_.reserve(slots_.size());
  for (uint32_t i = static_cast<uint32_t>(slots_.size()); i-- > 0;) free_.push_back(i);
  if (!causal()) to_.tell();  // our epoch first in our stream: the others wait for it
  return 0;
}

int GroupOrder::slot_of(NodeId n) const {
  const auto it = std::lower_bound(members_.begin(), members_.end(), n);
  return it == members_.end() || *it != n ? -1 : static_cast<int>(it - members_.begin());
}

// Called when a member joins or leaves (control events), not at every send and receive.
void GroupOrder::note_membership() {
  all_joined_ = true;
  for (size_t k = 0; k < members_.size(); ++k)
    if (!joined_[k] && !departed_[k]) all_joined_ = false;
}

// Causal: how many of ours every member still in the order delivered.
uint32_t GroupOrder::low_credit() const {
  uint32_t low = co_.delivered(self_);
  for (size_t k = 0; k < members_.size(); ++k)
    if (k != self_slot_ && !departed_[k]) low = std::min(low, credit_[k]);
  return low;
}

bool GroupOrder::window_open() const {
  // Causal: every member still in the order delivered all but fewer than `window` of ours.
  return co_.delivered(self_) - low_credit() < window_;
}

uint32_t GroupOrder::big_pending() {
  if (!causal()) return own_big_;
  const uint32_t low = low_credit();
  while (!big_sent_.empty() && big_sent_.front() <= low) big_sent_.pop();
  return static_cast<uint32_t>(big_sent_.size());
}

uint32_t GroupOrder::big_window(order::Mode mode, uint32_t members, uint32_t share) {
  const uint32_t per = (members > 1 ? members - 1 : 1) * (mode == order::Mode::kCausal ? 1 : 2);
  return std::max<uint32_t>(1, share / per);
}

int GroupOrder::prepare(uint8_t* head, bool big) {
  if (left_out_) return -ECONNRESET;
  flush();
  if (!all_joined() || !outbox_.empty()) return -EAGAIN;
  if (!causal() && !to_.may_send()) return -EAGAIN;
  if (big && big_window_ != 0 && big_pending() >= big_window_) return -EAGAIN;
  order::put_head(head, head_);
  if (causal()) {
    if (!window_open()) return -EAGAIN;
    co_.stamp(scratch_);
    for (size_t k = 0; k < scratch_.size(); ++k) order::put32(head + order::kHeadLen + 4 * k, scratch_[k]);
    // What this stamp tells them, once it went: a stamp whose send failed told no one, and
    // counted as told it would hold back the credit of a source that waits for us.
    std::copy(scratch_.begin(), scratch_.end(), stamped_.begin());
  } else {
    // Real time in the stamp: a message sent later is not ordered before ours (docs/PROTOCOL.md
    // 3.11.2); the vDSO's clock, no system call.
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pending_ts_ = to_.stamp(static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec));
    order::put64(head + order::kHeadLen, pending_ts_);
  }
  pending_ = true, pending_big_ = big && big_window_ != 0;  // counted only where limited
  return 0;
}

void GroupOrder::sent(bool went) {
  if (!pending_) return;
  pending_ = false;
  if (causal()) {
    if (!went) co_.unstamp();
    if (went) std::copy(stamped_.begin(), stamped_.end(), told_.begin());
    if (went && pending_big_) big_sent_.push() = co_.delivered(self_);
    return;
  }
  if (went && !to_.sent(pending_big_ ? kOwnBig : kOwn, pending_ts_)) ++c_.bad;  // cannot be: prepare() would have refused
  if (went && pending_big_) ++own_big_;
  // Alone in the order, our message can be delivered as soon as it is sent, and no record
  // comes in to make receive() deliver it: deliver it here, or our window never opens again.
  if (went) drain();
}

void GroupOrder::bad(imago_msg& m) {
  ++c_.bad;
  io_->drop(m);
}

uint32_t GroupOrder::store(const imago_msg& m) {
  const uint32_t h = free_.back();
  free_.pop_back();
  slots_[h] = m;
  used_[h] = 1;
  return h;
}

void GroupOrder::unstore(uint32_t h) {
  used_[h] = 0;
  free_.push_back(h);
}

void GroupOrder::clear() {
  for (uint32_t h = 0; h < slots_.size(); ++h)
    if (used_[h]) io_->drop(slots_[h]), unstore(h);
  ready_.init(ready_.v.size());
  held_ = 0;
}

void GroupOrder::on_received(imago_msg& m) {
  if (m.flags & IMAGO_MSG_F_EVENT) return on_event(m);
  const int s = m.src <= UINT32_MAX ? slot_of(static_cast<NodeId>(m.src)) : -1;
  const std::span<const uint8_t> b{static_cast<const uint8_t*>(imago_msg_data(&m)), m.len};
  order::Head h;
  if (s < 0 || static_cast<uint32_t>(s) == self_slot_ || !order::get_head(b, head_, &h) ||
      b.size() < order::record_len(h, h.kind))
    return bad(m);
  if (h.kind == order::Kind::kData) return on_data(m, static_cast<NodeId>(m.src), b);
  on_records(m, static_cast<NodeId>(m.src), b);
}

// Records travel joined, one after another in a message (GroupOrder::flush()).
void GroupOrder::on_records(imago_msg& m, NodeId src, std::span<const uint8_t> b) {
  order::Head h;
  while (!b.empty()) {
    if (!order::get_head(b, head_, &h) || h.kind == order::Kind::kData || b.size() < order::record_len(h, h.kind) ||
        !on_record(src, h, b.subspan(order::kHeadLen, order::record_len(h, h.kind) - order::kHeadLen)))
      return bad(m);
    b = b.subspan(order::record_len(h, h.kind));
  }
  io_->drop(m);
}

void GroupOrder::on_event(imago_msg& m) {
  imago_group_event ev;
  if (m.len == sizeof ev) {
    std::memcpy(&ev, imago_msg_data(&m), sizeof ev);
    const bool ours = ev.source == self_;
    const int src = ev.source <= UINT32_MAX ? slot_of(static_cast<NodeId>(ev.source)) : -1;
    if (ev.kind == order::kEventNodeGone) return node_gone(m, ev, src);
    if (!ours && ev.kind == IMAGO_GROUP_STARTED && src >= 0) started_[static_cast<size_t>(src)] = 1;
    if (ours && ev.kind == IMAGO_GROUP_JOINED && ev.member <= UINT32_MAX) {
      joined(static_cast<NodeId>(ev.member));
    } else if (ours && (ev.kind == IMAGO_GROUP_LEFT || ev.kind == IMAGO_GROUP_EXPIRED)) {
      if (ev.member <= UINT32_MAX) depart(static_cast<NodeId>(ev.member), true, false);
    } else if (!ours && ev.kind == IMAGO_GROUP_ENDED && ev.reason == IMAGO_GROUP_END_DROPPED) {
      left_out_ = true;  // a source expired us: we can no longer have every message
    } else if (!ours && ev.kind == IMAGO_GROUP_ENDED && ev.source <= UINT32_MAX) {
      depart(static_cast<NodeId>(ev.source), true, true);
    }
  }
  ready(store(m));  // the application's, as it came
}

// The engine side's word that a node died (kEventNodeGone). A member whose stream started
// here leaves the order when it ends (ENDED, which follows); one whose stream never started
// never would, and the order would wait for it for ever: it leaves now, and the application
// gets the ENDED (GONE) its stream would have given. Anything else is ours alone.
void GroupOrder::node_gone(imago_msg& m, const imago_group_event& ev, int k) {
  io_->drop(m);
  if (k < 0 || static_cast<uint32_t>(k) == self_slot_ || started_[static_cast<size_t>(k)] ||
      ended_[static_cast<size_t>(k)])
    return;
  depart(static_cast<NodeId>(ev.source), true, true);
  end_unstarted(static_cast<NodeId>(ev.source));
}

// A member that left the order while its stream had not started here: no ENDED of its stream
// would ever come, and an application waiting for each member's end would wait for ever. It
// gets the ENDED (GONE) now, once; not in causal order, which waits for such a member's
// messages until its stream ended here.
void GroupOrder::end_unstarted(NodeId n) {
  const int k = slot_of(n);
  if (k < 0 || static_cast<uint32_t>(k) == self_slot_) return;
  const auto i = static_cast<size_t>(k);
  if (started_[i] || told_ended_[i] || (causal() && !ended_[i])) return;
  told_ended_[i] = 1;
  const imago_group_event ended{IMAGO_GROUP_ENDED, 0, n, self_, 0, IMAGO_GROUP_END_GONE, 0, 0};
  imago_msg d{};
  d.src = n, d.len = sizeof ended, d.flags = IMAGO_MSG_F_EVENT, d.tier = IMAGO_TIER_INLINE;
  std::memcpy(d.u.inline_data, &ended, sizeof ended);  // an event is inline
  ready(store(d));
}

void GroupOrder::joined(NodeId n) {
  const int k = slot_of(n);
  if (k < 0 || static_cast<uint32_t>(k) == self_slot_) return;
  const auto i = static_cast<size_t>(k);
  if (!joined_[i] && !departed_[i]) {
    joined_[i] = 1;
    return note_membership();
  }
  // It joined before: a new opening of its, in the middle of our session, that cannot take it
  // up (what came before never reaches it; it would wait for ever, its messages dropped
  // everywhere). Tell it it was left out, and the others that it left.
  if (departed_[i]) return tell_gone(n);
  depart(n, true, false);
}

void GroupOrder::tell_gone(NodeId n) {
  uint8_t b[8];
  order::put64(b, n);
  queue(order::Kind::kGone, b);
}

bool GroupOrder::on_record(NodeId src, const order::Head& h, std::span<const uint8_t> b) {
  switch (h.kind) {
    case order::Kind::kCredit:
      if (!causal()) return false;
      credit_from(slot_of(src), b);
      return true;
    case order::Kind::kCtl: {
      if (causal()) return false;
      NodeId dst;
      const TotalCtl c = order::get_ctl(b.data(), &dst);
      if (dst == 0 || dst == self_) to_.on_ctl(src, c);
      return true;
    }
    case order::Kind::kGone: {
      const uint64_t n = order::get64(b.data());
      if (departed_[static_cast<size_t>(slot_of(src))]) return true;  // one that left speaks for no one
      if (n == self_) {
        left_out_ = true;
      } else if (n <= UINT32_MAX) {
        // Told on, once: the member left out may not receive the teller's stream (it never
        // joined it), but does ours, and must learn it was left out (-ECONNRESET).
        depart(static_cast<NodeId>(n), true, false);
      }
      return true;
    }
    default: return false;
  }
}

void GroupOrder::credit_from(int slot, std::span<const uint8_t> stamp) {
  const uint32_t ours = order::get32(&stamp[4 * self_slot_]);
  // Never more than we sent: a lie would open the window past what members can hold.
  if (ours <= co_.delivered(self_)) credit_[static_cast<size_t>(slot)] = std::max(credit_[static_cast<size_t>(slot)], ours);
}

void GroupOrder::on_data(imago_msg& m, NodeId src, std::span<const uint8_t> b) {
  const uint32_t hl = head_len();
  imago_msg d = m;  // the message without its header
  d.len -= hl;
  if (d.tier == IMAGO_TIER_INLINE) {
    std::memmove(d.u.inline_data, m.u.inline_data + hl, d.len);
  } else {
    d.u.ext.data = static_cast<uint8_t*>(m.u.ext.data) + hl;
  }
  if (causal()) {
    const std::span<const uint8_t> stamp = b.subspan(order::kHeadLen, 4u * members_.size());
    for (size_t k = 0; k < scratch_.size(); ++k) scratch_[k] = order::get32(&stamp[4 * k]);
    const uint32_t h = store(d);
    if (co_.offer(src, scratch_, h) != rel::order::CausalOrder::Offer::kTaken) {
      unstore(h);  // out of its source's order, or beyond its window: a liar
      return bad(m);
    }
    credit_from(slot_of(src), stamp);
    ++held_;
    return;
  }
  // Total order: nothing of a member comes after its stream ended here but a new opening's,
  // which would pass for the rest of the old one (counts are by arrival): out of order.
  if (ended_[static_cast<size_t>(slot_of(src))]) return bad(m);
  const uint32_t h = store(d);
  ++held_;
  if (!to_.on_data(src, order::get64(&b[order::kHeadLen]), h)) {
    unstore(h), --held_;
    return bad(m);
  }
}

void GroupOrder::drain() {
  auto deliver = [this](NodeId, uint64_t h) {
    if (own(h)) {
      own_big_ -= h == kOwnBig;
      return;
    }
    --held_;
    ready(static_cast<uint32_t>(h));
  };
  if (causal()) {
    co_.drain(deliver);
    maybe_credit(false);
    return;
  }
  to_.drain(deliver);
  to_.take_dropped([this](uint64_t h) {
    if (own(h)) return;
    --held_;  // a departed member's, past what the new epoch kept (counted by TotalOrder)
    io_->drop(slots_[h]);
    unstore(static_cast<uint32_t>(h));
  });
}

uint64_t GroupOrder::pending() const {
  if (!causal()) return to_.own_pending();
  return co_.delivered(self_) - low_credit();
}

void GroupOrder::maybe_credit(bool idle) {
  // Tell a source how far we are once we delivered half a window of its since we last said,
  // or anything at all when nothing more is coming (the seed's ack-only message). A source
  // of which we received all our last word let it send (told + window: it can know no more
  // of ours than we told) waits for us: tell it as soon as we delivered anything more of its,
  // not after half a window (its messages may be held back for others', delivered a few at
  // a time). That happens only while we hold back half a window of its or more, so a large
  // window gets no more credits than before.
  const uint32_t step = idle ? 1 : std::max<uint32_t>(1, window_ / 2);
  bool due = false;
  for (size_t k = 0; k < members_.size(); ++k) {
    if (k == self_slot_) continue;
    const uint32_t news = co_.delivered(members_[k]) - told_[k];
    const bool waits = co_.received(members_[k]) - told_[k] >= window_;
    if (news >= step || (news > 0 && waits)) due = true;
  }
  if (!due) return;
  for (size_t k = 0; k < members_.size(); ++k) scratch_[k] = co_.delivered(members_[k]);
  std::copy(scratch_.begin(), scratch_.end(), told_.begin());
  uint8_t b[4 * order::kMaxWidth];
  for (size_t k = 0; k < scratch_.size(); ++k) order::put32(b + 4 * k, scratch_[k]);
  queue(order::Kind::kCredit, {b, 4 * scratch_.size()});
}

void GroupOrder::depart(NodeId n, bool tell, bool ended_here) {
  const int k = slot_of(n);
  if (k < 0 || static_cast<uint32_t>(k) == self_slot_) return;
  // Causal order waits for a member's messages until its stream ended here, not on another's
  // word: what it sent may still be on its way to us.
  if (causal() && ended_here) co_.gone(n);
  if (ended_here) ended_[static_cast<size_t>(k)] = 1;
  if (departed_[static_cast<size_t>(k)]) return;
  departed_[static_cast<size_t>(k)] = 1;
  note_membership();
  ++c_.departed;
  if (tell) tell_gone(n);  // the others may not have seen it: total order would wait for it for ever
  end_unstarted(n);
  if (causal()) return;
  std::vector<NodeId> view;
  for (size_t i = 0; i < members_.size(); ++i)
    if (!departed_[i]) view.push_back(members_[i]);
  to_.view(view);
}

void GroupOrder::queue_ctl(const TotalCtl& c, NodeId dst) {
  uint8_t b[order::kCtlLen];
  order::put_ctl(b, c, dst);
  queue(order::Kind::kCtl, b);
}

void GroupOrder::queue(order::Kind kind, std::span<const uint8_t> body) {
  Record& r = outbox_.push();
  order::Head h = head_;
  h.kind = kind;
  order::put_head(r.b, h);
  std::copy(body.begin(), body.end(), r.b + order::kHeadLen);
  r.len = static_cast<uint32_t>(order::kHeadLen + body.size());
}

void GroupOrder::flush(bool fast) {
  if (!all_joined()) return;  // a member not yet in our stream would miss them
  while (!outbox_.empty()) {
    // As many records as fit, joined into one message.
    size_t len = 0, n = 0;
    for (; n < outbox_.size(); ++n) {
      const Record& r = outbox_.v[(outbox_.head + n) % outbox_.v.size()];
      if (len + r.len > kBatch) break;
      std::memcpy(batch_ + len, r.b, r.len);
      len += r.len;
    }
    if (io_->send({batch_, len}, {}, fast) != 0) return;
    for (size_t i = 0; i < n; ++i) outbox_.pop();
    ++c_.records;  // messages, as msgs_sent counts them
  }
}

}  // namespace imago::api
