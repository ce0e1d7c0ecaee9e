/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Total order over a group's streams ("Routing in Barrelfish", group semantics set 3): every
 * member delivers the group's messages in one and the same order. Symmetric, no sequencer:
 * each message carries its source's Lamport clock (its stamp), and every member delivers in
 * (stamp, source id) order.
 *
 * A member delivers the lowest (stamp, source) it holds once (a) every other member still in
 * the order holds it and (b) every other member's clock has reached its stamp (no message of
 * theirs can come below it). Both come in one record: each member, when a message arrives,
 * tells everyone it holds it and its clock (ACK). So a message is delivered two one-way trips
 * after it was sent (the message, the ACKs), where single-source FIFO takes one. Uniform:
 * whatever any member delivered, even one that crashed right after, every member holds.
 *
 * A member gone (a view change) cannot say its clock any more, and others may hold different
 * amounts of its messages: the lowest member left runs a flush. It asks everyone how many of
 * each source's messages they hold (FLUSH_REQ, FLUSH_REP; each member answering promises to
 * deliver nothing, and ACK nothing, until a new epoch: what others deliver rests on ACKs it
 * sent before its answer, so within it), and announces for each member gone a cut, the
 * lowest count held (NEW_EPOCH); every member drops that source's messages beyond its cut.
 * Whatever was delivered anywhere was held by every member, so it is within the cut; a cut
 * a newer epoch already made is kept. Members deliver in the new epoch only once every member
 * left has installed it (INSTALLED), so no later flush can choose another cut for what one of
 * them delivered. Epoch numbers are unique to their flush (a round times 64 plus the index of
 * the member that ran it), so two members that each think themselves the lowest left cannot
 * make two epochs of one number.
 *
 * Bounded, with flow control at the source: a member sends its next message only while fewer
 * than `window` of its own are undelivered at some member left (their ACKs carry what they
 * delivered), so no member holds more than `window` of a source, and nothing a stream carries
 * is refused (a refused message would hold up the records behind it in the same stream).
 * Members are one view's, shrinking only (a member that joins starts a new TotalOrder).
 * Pure: no clock of time, no threads; the records go out through TotalOrder::Out.
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reliability/wire.h"

namespace imago::rel::order {

struct TotalCtl {
  enum Kind : uint8_t {
    kAck = 1,        ///< to all: we hold `s` of src's messages, delivered `d`; our clock is g
    kFlushReq = 2,   ///< to all: epoch `epoch` is being made; say what you hold
    kFlushRep = 3,   ///< to the flush's member, one per source: g our epoch, s held of src, d our cut of it
    kNewEpoch = 4,   ///< to all, one per source in id order: d the cut of src (kLive: none)
    kInstalled = 5,  ///< to all: we installed `epoch`; g our clock
    kPromised = 6,   ///< to a flush's member: we answered a newer one, `epoch` (ask again above it)
  };
  Kind kind;
  uint32_t epoch;
  uint64_t g;
  NodeId src;
  uint64_t s;
  uint64_t d = 0;
};

struct TotalCounters {
  uint64_t delivered = 0, refused = 0, bad = 0, epochs = 0, dropped_departed = 0;
};

class TotalOrder {
 public:
  static constexpr uint64_t kLive = ~uint64_t{0};  ///< no cut: a member still in the order
  static constexpr uint32_t kMaxMembers = 64;      ///< epoch numbers carry the flush's member

  class Out {
   public:
    virtual ~Out() = default;
    virtual void to_all(const TotalCtl& c) = 0;             ///< in our stream, to every member
    virtual void to_one(NodeId dst, const TotalCtl& c) = 0;  ///< to one member
  };

  /** Start with view @p members (self among them, 1 to 64 distinct ids), @p window as above.
   *  Control path. @return 0, -EINVAL. */
  int init(std::span<const NodeId> members, NodeId self, uint32_t window, Out* out);

  /** The stamp for our next message sent at time @p now (ns, any clock; 0: none): a hybrid
   *  clock, @p now or one above our clock, whichever is higher. Stamps taken from real time
   *  keep a message sent later from being ordered before one sent earlier, which it would
   *  otherwise delay by a trip; any clock keeps the order correct. */
  uint64_t stamp(uint64_t now = 0) const { return now > clock_ ? now : clock_ + 1; }
  /** We send our next message to the group, stamped @p ts from stamp() (@p handle: the
   *  caller's name for it). @return false when flow control holds it back, or for a stamp
   *  not above our clock (the message was not taken). */
  bool sent(uint64_t handle, uint64_t ts);
  /** @p src's next message arrived, stamped @p ts (group streams keep each source's order).
   *  @return false only when src broke flow control: counted as bad. A stamp not above the
   *  source's last is bad too: the message goes to take_dropped(). */
  bool on_data(NodeId src, uint64_t ts, uint64_t handle);
  /** A record from @p from (in its stream's order). */
  void on_ctl(NodeId from, const TotalCtl& c);
  /** The view is now @p members (a subset of the last; the streams reported the rest gone). */
  void view(std::span<const NodeId> members);
  /** Deliver through @p fn(src, handle) every message whose place is settled, in order, and
   *  tell() what arrived and was delivered. Call after a batch of on_data() and on_ctl(). */
  template <typename F>
  uint32_t drain(F&& fn);

  /** Hand over, through @p fn(handle), the messages dropped since the last call: offered
   *  for no member, or of a departed member past its cut (never delivered anywhere). The
   *  caller frees them. */
  template <typename F>
  void take_dropped(F&& fn) {
    for (uint64_t h : dropped_) fn(h);
    dropped_.clear();
  }
  /** Send the records due (drain() does; call once after init() too, when the stream can
   *  carry them): first our epoch (INSTALLED: a member delivers nothing before every other
   *  member said its own, so one that opened again mid-session, missing the start of the
   *  others' streams, never delivers); then the ACKs, what we hold at once, what we
   *  delivered every half window or when @p idle (nothing more coming: the sources' last). */
  void tell(bool idle = false);
  /** @return our messages sent and not yet known delivered at every member left. */
  uint64_t own_pending() const;
  /** @return whether sent() would take our next message now (flow control). */
  bool may_send() const { return own_pending() < window_; }

  /** @return whether we run the flush when the view changes (the lowest member left). */
  bool coordinator() const;
  uint32_t epoch() const { return epoch_; }
  const TotalCounters& counters() const { return c_; }

 private:
  struct Held {
    uint64_t handle, ts;
  };
  struct Src {
    NodeId id;
    bool alive = true;     ///< in our view
    uint64_t cut = kLive;  ///< our epoch's cut of it: its messages beyond are void
    uint64_t arrived = 0, delivered = 0;
    uint64_t last_ts = 0;    ///< the stamp of its last message here (stamps rise)
    uint64_t clock = 0;      ///< the highest clock it told us
    bool said = false;       ///< it said which epoch it is in (INSTALLED, first in its stream)
    uint32_t installed = 0;  ///< the newest epoch it said it installed
    std::vector<Held> q;     ///< arrived, undelivered, oldest first (ring of 2 x window)
    uint32_t q_head = 0, q_len = 0;
  };
  struct Rep {
    bool got = false;
    uint32_t epoch = 0;
    uint64_t held = 0, cut = kLive;
  };

  const Src* find(NodeId n) const;
  Src* find(NodeId n) { return const_cast<Src*>(static_cast<const TotalOrder*>(this)->find(n)); }
  uint32_t index(const Src& x) const { return static_cast<uint32_t>(&x - srcs_.data()); }
  Src& me() { return srcs_[self_ix_]; }
  const Src& me() const { return srcs_[self_ix_]; }
  uint64_t& held(uint32_t m, uint32_t x) { return held_[m * srcs_.size() + x]; }
  uint64_t& done(uint32_t m, uint32_t x) { return done_[m * srcs_.size() + x]; }
  bool take(Src& x, uint64_t handle, uint64_t ts);
  bool frozen() const;
  bool settled() const;
  const Src* next_in_order() const;
  bool placed(const Src& x);
  void on_ack(NodeId from, const TotalCtl& c);
  void on_flush_req(NodeId from, const TotalCtl& c);
  void on_flush_rep(NodeId from, const TotalCtl& c);
  void on_new_epoch(NodeId from, const TotalCtl& c);
  bool epoch_of(uint32_t e, NodeId from) const;
  void start_flush();
  void finish_flush();
  void install(uint32_t epoch);

  NodeId self_ = 0;
  uint32_t self_ix_ = 0;
  uint32_t window_ = 0;
  Out* out_ = nullptr;
  std::vector<Src> srcs_;        ///< every member of the first view, sorted
  std::vector<uint64_t> held_;   ///< [member][source]: how many of source's the member holds
  std::vector<uint64_t> done_;   ///< [member][source]: how many of source's it delivered
  std::vector<uint64_t> told_held_, told_done_;  ///< per source: what our last ACK said
  uint64_t clock_ = 0;           ///< our Lamport clock
  bool said_ = false;            ///< our first INSTALLED went
  uint32_t epoch_ = 0;
  uint32_t promised_ = 0;        ///< the newest flush we answered: deliver nothing until it is installed
  // The flush we run.
  bool flushing_ = false;
  uint32_t flush_epoch_ = 0;
  std::vector<Rep> reps_;        ///< [member][source]: its FLUSH_REP
  // A NEW_EPOCH arriving record by record.
  uint32_t incoming_epoch_ = 0;
  uint32_t incoming_n_ = 0;
  std::vector<uint64_t> cuts_;   ///< per source: the cut of the epoch being made or received
  std::vector<uint64_t> dropped_;  ///< handles for take_dropped()
  TotalCounters c_;
};

template <typename F>
uint32_t TotalOrder::drain(F&& fn) {
  uint32_t n = 0;
  // Delivering changes no epoch or view: whether we are frozen is asked once.
  for (const bool stop = frozen(); !stop;) {
    const Src* next = next_in_order();
    if (next == nullptr) break;
    Src& x = srcs_[index(*next)];
    if (!placed(x)) break;
    const uint64_t h = x.q[x.q_head].handle;
    x.q_head = (x.q_head + 1) % static_cast<uint32_t>(x.q.size()), --x.q_len;
    ++x.delivered, ++n, ++c_.delivered;
    fn(x.id, h);
  }
  tell();
  return n;
}

}  // namespace imago::rel::order
