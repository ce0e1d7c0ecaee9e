/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Total order over a group's streams ("Routing in Barrelfish", group semantics set 3): every
 * member delivers the group's messages in one and the same order. A sequencer per group, the
 * member with the lowest node id in the view, numbers each message as it gets it (ORDER
 * records in its own stream); members deliver by number.
 *
 * Uniform, and safe when the sequencer dies: a member delivers number g only once g is
 * *stable*: every member of the view holds the ORDER record and the message itself up to
 * g (each tells everyone, HOLD; the sequencer also says so, STABLE). On a view change (a member
 * gone: the group streams report expiries) the lowest member left runs a flush: it asks
 * everyone how far they hold (FLUSH_REQ, FLUSH_REP), takes the lowest, H, announces a new
 * epoch that starts at H + 1 (NEW_EPOCH), and numbers what is not yet numbered from there.
 * Everything up to H is at every member, so no one stalls on a message only a dead member
 * had; nothing beyond H was delivered anywhere (it was not stable), so numbering it anew
 * breaks no one's order; a departed member's messages beyond H are dropped everywhere alike.
 *
 * The cost (docs/PROTOCOL.md 3.11): a message waits for its ORDER record and then for the
 * HOLDs, two more one-way trips than single-source FIFO.
 *
 * Members are one view's, shrinking only (a member that joins starts a new TotalOrder).
 * Bounded, with flow control at the source: a member sends its next message only while
 * fewer than `window` of its own are undelivered at itself (sent() refuses), the sequencer
 * numbers at most `window` beyond the stable point, and a member holds at most `window`
 * numbers beyond what it delivered; so no member ever holds more than 2 x `window` messages
 * of a source, and nothing a stream carries is refused on its way in (a refused message
 * would hold up the ORDER and STABLE records behind it in the same stream: a deadlock).
 * Pure: no clock, no threads; the records go out through TotalOrder::Out.
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reliability/order/causal.h"
#include "reliability/wire.h"

namespace imago::rel::order {

struct TotalCtl {
  enum Kind : uint8_t {
    kOrder = 1,     ///< to all: message (src, s) is number g, in epoch
    kStable = 2,    ///< to all: every member holds up to g; deliver up to it
    kHold = 3,      ///< to all: we hold ORDER and message up to g
    kFlushReq = 4,  ///< to all: a new epoch is being made; say how far you hold
    kFlushRep = 5,  ///< to the new sequencer: g held; `s` the first number of our epoch
    kNewEpoch = 6,  ///< to all: epoch starts at g + 1; numbers above g of older epochs are void
  };
  Kind kind;
  uint32_t epoch;  ///< kFlushRep: the epoch asked for; `src` carries the replier's own epoch
  uint64_t g;
  NodeId src;
  uint64_t s;
};

struct TotalCounters {
  uint64_t delivered = 0, ordered = 0, refused = 0, bad = 0, epochs = 0, dropped_departed = 0;
};

class TotalOrder {
 public:
  class Out {
   public:
    virtual ~Out() = default;
    virtual void to_all(const TotalCtl& c) = 0;             ///< in our stream, to every member
    virtual void to_one(NodeId dst, const TotalCtl& c) = 0;  ///< to one member
  };

  /** Start with view @p members (self among them), @p window as above. Control path.
   *  @return 0, -EINVAL (as CausalOrder::init(), or window 0). */
  int init(std::span<const NodeId> members, NodeId self, uint32_t window, Out* out);

  /** We send our next message to the group (@p handle: the caller's name for it); we order
   *  it like any other. @return false when `window` of ours are undelivered here: send it
   *  later (flow control; the message was not taken). */
  bool sent(uint64_t handle);
  /** @p src's next message arrived (group streams keep each source's order). @return false
   *  only when src broke flow control (more than 2 x window held): counted as bad; offer
   *  it again later. */
  bool on_data(NodeId src, uint64_t handle);
  /** A record from @p from (in its stream's order). */
  void on_ctl(NodeId from, const TotalCtl& c);
  /** The view is now @p members (a subset of the last; the streams reported the rest gone). */
  void view(std::span<const NodeId> members);
  /** Deliver through @p fn(src, handle) every message whose number is stable, in order. */
  template <typename F>
  uint32_t drain(F&& fn);

  /** Hand over, through @p fn(handle), the messages dropped since the last call: offered
   *  for no member, or of a departed member past what a new epoch kept of it (never
   *  delivered anywhere). The caller frees them. */
  template <typename F>
  void take_dropped(F&& fn) {
    for (uint64_t h : dropped_) fn(h);
    dropped_.clear();
  }
  /** @return our messages sent and not yet delivered here (not yet stable everywhere). */
  uint64_t own_pending() const;
  /** @return whether sent() would take our next message now (flow control). */
  bool may_send() const;

  bool sequencer() const { return members_.front() == self_; }
  uint32_t epoch() const { return epoch_; }
  const TotalCounters& counters() const { return c_; }

 private:
  struct Src {
    NodeId id;
    bool live = true;     ///< in the view
    bool closed = false;  ///< gone, and a new epoch settled what of it is numbered: drop the rest
    uint64_t arrived = 0, delivered = 0, ordered = 0;  ///< its messages so far (s numbers)
    std::vector<uint64_t> q;  ///< handles of arrived, undelivered, oldest first (ring of 2 x window)
    uint32_t q_head = 0, q_len = 0;
  };
  struct Slot {
    uint64_t g = 0;  ///< 0: empty
    uint32_t src;    ///< index into srcs_
    uint64_t s;
  };

  Src* find(NodeId n);
  uint32_t index(const Src& x) const;
  bool push(Src& x, uint64_t handle);
  bool on_message(Src& x, uint64_t handle);
  Slot& slot(uint64_t g) { return ring_[g % ring_.size()]; }
  void advance_hold();
  void number_pending();
  void on_order(NodeId from, const TotalCtl& c);
  void on_hold(NodeId from, const TotalCtl& c);
  void on_flush_req(NodeId from, const TotalCtl& c);
  void on_flush_rep(NodeId from, const TotalCtl& c);
  void finish_flush();
  void install(NodeId seq, uint32_t epoch, uint64_t h);
  void start_flush();

  NodeId self_ = 0;
  uint32_t window_ = 0;
  Out* out_ = nullptr;
  std::vector<NodeId> members_;  ///< the view, sorted: front() is the sequencer
  std::vector<Src> srcs_;        ///< every member of the first view, sorted
  std::vector<Slot> ring_;       ///< ORDER records from deliver_ on (2 x window)
  uint32_t epoch_ = 0;
  NodeId epoch_seq_ = 0;   ///< the sequencer of our epoch: ORDER and STABLE come from it
  uint32_t promised_ = 0;  ///< the newest flush we answered: older epochs' records are ignored
  uint64_t start_ = 1;     ///< the first number of our epoch
  uint64_t deliver_ = 1;   ///< the next number to deliver
  uint64_t stable_ = 0;    ///< numbers up to this are stable
  uint64_t hold_ = 0;      ///< we hold ORDER and message for every number up to this
  uint64_t told_hold_ = 0; ///< the last HOLD we sent
  uint64_t next_g_ = 1;    ///< the next number: issued (sequencer) or expected (members)
  uint32_t turn_ = 0;      ///< the sequencer: the source whose turn to be numbered is next
  // The sequencer's side.
  std::vector<uint64_t> holds_;  ///< per srcs_ index: its HOLD (this epoch)
  bool flushing_ = false;
  uint32_t flush_epoch_ = 0;
  std::vector<TotalCtl> reps_;   ///< per srcs_ index: its FLUSH_REP (kind 0: none yet)
  std::vector<uint64_t> dropped_;  ///< handles for take_dropped()
  TotalCounters c_;
};

template <typename F>
uint32_t TotalOrder::drain(F&& fn) {
  uint32_t n = 0;
  while (deliver_ <= stable_) {
    const Slot& o = slot(deliver_);
    Src& x = srcs_[o.src];
    if (o.g != deliver_ || x.q_len == 0 || x.delivered + 1 != o.s) break;  // not here yet
    const uint64_t h = x.q[x.q_head];
    x.q_head = (x.q_head + 1) % static_cast<uint32_t>(x.q.size()), --x.q_len;
    ++x.delivered;
    slot(deliver_) = Slot{};
    ++deliver_, ++n, ++c_.delivered;
    fn(x.id, h);
  }
  if (n != 0) advance_hold();  // room in the ring again
  return n;
}

}  // namespace imago::rel::order
