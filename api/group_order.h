/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An ordered group endpoint's ordering (IMAGO_GROUP_CAUSAL, IMAGO_GROUP_TOTAL): the layer
 * between the group streams, which give each source's messages in its order, and the
 * application, which gets every member's in causal or in one total order. It runs in the
 * application's thread, inside imago_send*() and imago_recv_burst(), on descriptors: what
 * the rx ring gives is held here (the buffers stay loaned to the application) until its order
 * lets it out. Pure: no EAL, no clock; the endpoint's rings are behind GroupOrder::Io.
 *
 * Causal order is reliability/order/causal.h with the seed's credit window on top: each stamp
 * tells the other members how many of theirs we delivered, CREDIT records say it when we have
 * nothing to send, and a member sends only while fewer than `window` of its messages are not
 * delivered at every member. So no member ever holds more than `window` of a source's
 * messages back, and nothing is ever refused for room. A CREDIT goes out in the receive call
 * that delivered half a window of a source since we last told it, or anything of a source
 * that sent all our last word let it send (it waits for us: maybe_credit()); so a member
 * sends at most `window` messages per round trip, and never waits for more than that. Total order is
 * reliability/order/total.h, whose records (ACK, INSTALLED, the flush) go out in our own
 * stream as CTL records, and whose stamps go in our DATA records.
 *
 * Messages above the frame tier are held in the big pool, of which a node's deliveries have a
 * share (BigLedger): when the messages held back for their order took all of it, the next
 * big one, and the records behind it in its stream, could never be delivered, and the group
 * stalled. So a member also keeps its big messages not yet delivered everywhere within a
 * window of their own (limit_big()), small enough that every member can hold every other
 * one's: causal order holds at most that many of a source, total order twice that.
 *
 * Records go out only once every other member joined our stream (a member that joined later
 * would miss them, and the order would wait for ever); until then, and while the tx ring is
 * full, they wait in an outbox, and a full outbox stops reading the rx ring (back-pressure,
 * so the outbox is bounded).
 */
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "api/imago.h"
#include "api/order_wire.h"
#include "reliability/order/causal.h"
#include "reliability/order/total.h"

namespace imago::api {

struct OrderCounters {
  uint64_t bad = 0;       ///< messages dropped: header not ours, out of order, no member's
  uint64_t records = 0;   ///< messages of records sent (credits, total order's control, gone), joined
  uint64_t departed = 0;  ///< members that left the order
};

class GroupOrder {
 public:
  /** What the ordering needs of its endpoint. */
  class Io {
   public:
    virtual ~Io() = default;
    /** Send @p head then @p body as one message in our stream, @p fast: at once
     *  (IMAGO_FASTPATH), not waiting to share its frame. @return 0, -EAGAIN (ring or buffers
     *  full: try later), or another negative errno (the endpoint is gone). */
    virtual int send(std::span<const uint8_t> head, std::span<const uint8_t> body, bool fast) = 0;
    /** Give back a received descriptor the application will never see. */
    virtual void drop(imago_msg& m) = 0;
  };

  /**
   * Control path. @p mode causal or total; @p members every member (this node's @p self
   * among them), @p window as imago_group_opts.order_window; @p slack descriptors beyond
   * what the order can hold back (one rx burst, the events). @return 0 or -EINVAL.
   */
  int init(order::Mode mode, std::span<const rel::NodeId> members, rel::NodeId self, uint32_t window,
           uint32_t slack, Io* io);

  /** Keep at most @p n of our big messages (prepare(..., true)) not yet delivered at every
   *  member; 0: no limit. Control path, after init(). */
  void limit_big(uint32_t n) { big_window_ = n; }
  /** @return how many big messages a node whose deliveries have @p share big buffers lets
   *  each member of @p mode's group of @p members have outstanding, so that they all fit. */
  static uint32_t big_window(order::Mode mode, uint32_t members, uint32_t share);

  /** @return bytes in front of each message this endpoint sends. */
  uint32_t head_len() const { return order::record_len(head_, order::Kind::kData); }

  /**
   * Send side, one message: 0 with its header in @p head (head_len() bytes) when it may go
   * now; -EAGAIN (members not all joined, the window full, for a @p big one (above the frame
   * tier) the big window full, records waiting) or -ECONNRESET
   * (this node was left out). After trying to send it, call sent(true) if it went, else
   * sent(false).
   */
  int prepare(uint8_t* head, bool big = false);
  void sent(bool went);

  /**
   * Receive side. @return up to @p n descriptors in order into @p out, reading more from the
   * rx ring through @p pull(msgs, max) -> count when fewer are ready. -ECONNRESET once this
   * node was left out.
   */
  template <typename Pull>
  int receive(imago_msg* out, unsigned n, Pull&& pull);

  /** Give back (Io::drop) every descriptor held or ready: the endpoint closes. */
  void clear();

  /** Send what waits in the outbox, in order, as far as the ring takes it; @p fast: at once
   *  (the records gate other members: an ACK that waits to share its frame delays every
   *  member's delivery by as much), not waiting for more to share their frame. */
  void flush(bool fast = false);
  /** The application waits for messages (imago_wait() found none): say how far we are, as
   *  after kIdleCredit receive calls that found nothing, and send what waits. */
  void idle() {
    if (causal()) {
      maybe_credit(true);
    } else {
      to_.tell(true);
    }
    flush(true);
  }

  /** @return descriptors its order lets out now, not yet received. */
  size_t ready() const { return ready_.size(); }
  /** @return messages held back now (counted in imago_ep_stats.order_held). */
  uint64_t held() const { return held_; }
  /** @return this node's messages not yet known delivered at every member still in the
   *  order (causal: as their stamps and credits say; total: as their ACKs say). */
  uint64_t pending() const;
  /** @return messages of departed members dropped at a new epoch (total order). */
  uint64_t dropped() const { return causal() ? 0 : to_.counters().dropped_departed; }
  const OrderCounters& counters() const { return c_; }
  bool left_out() const { return left_out_; }

  /** The layer's own records for total order (TotalOrder::Out). Public for TotalOrder only. */
  class TotalOut : public rel::order::TotalOrder::Out {
   public:
    explicit TotalOut(GroupOrder* g) : g_(g) {}
    void to_all(const rel::order::TotalCtl& c) override { g_->queue_ctl(c, 0); }
    void to_one(rel::NodeId dst, const rel::order::TotalCtl& c) override { g_->queue_ctl(c, dst); }

   private:
    GroupOrder* g_;
  };

 private:
  static constexpr uint32_t kNone = ~uint32_t{0};
  static constexpr uint64_t kOwn = ~uint64_t{0};  ///< total order: our own message (not delivered to us)
  static constexpr uint64_t kOwnBig = kOwn - 1;   ///< the same, a big one
  static bool own(uint64_t h) { return h >= kOwnBig; }
  static constexpr size_t kOutboxHigh = 1024;     ///< stop reading the rx ring above this
  static constexpr size_t kBatch = 1024;          ///< bytes of records sent as one message
  static constexpr uint32_t kIdleCredit = 64;     ///< receive calls that found nothing: credit

  bool causal() const { return head_.mode == order::Mode::kCausal; }
  int slot_of(rel::NodeId n) const;
  void on_received(imago_msg& m);
  void on_event(imago_msg& m);
  void node_gone(imago_msg& m, const imago_group_event& ev, int slot);
  void on_records(imago_msg& m, rel::NodeId src, std::span<const uint8_t> b);
  bool on_record(rel::NodeId src, const order::Head& h, std::span<const uint8_t> b);
  void on_data(imago_msg& m, rel::NodeId src, std::span<const uint8_t> b);
  void credit_from(int slot, std::span<const uint8_t> stamp);
  void depart(rel::NodeId n, bool tell, bool ended_here);
  void end_unstarted(rel::NodeId n);
  void joined(rel::NodeId n);
  void tell_gone(rel::NodeId n);
  void drain();
  void maybe_credit(bool idle);
  void bad(imago_msg& m);
  uint32_t store(const imago_msg& m);
  void unstore(uint32_t h);
  void ready(uint32_t h) { ready_.push() = h; }
  void queue(order::Kind kind, std::span<const uint8_t> body);
  void queue_ctl(const rel::order::TotalCtl& c, rel::NodeId dst);
  bool all_joined() const { return all_joined_; }
  void note_membership();
  bool window_open() const;
  uint32_t big_pending();
  uint32_t low_credit() const;

  order::Head head_{};
  rel::NodeId self_ = 0;
  uint32_t self_slot_ = 0;
  uint32_t window_ = 0;
  Io* io_ = nullptr;
  std::vector<rel::NodeId> members_;  ///< sorted
  std::vector<uint8_t> joined_;       ///< per slot: joined our stream
  std::vector<uint8_t> departed_;     ///< per slot: left the order
  std::vector<uint8_t> ended_;        ///< per slot: its stream ended here
  std::vector<uint8_t> started_;      ///< per slot: its stream started here (STARTED)
  std::vector<uint8_t> told_ended_;   ///< per slot: given an ENDED of our own (end_unstarted())
  std::vector<uint32_t> credit_;      ///< causal, per slot: how many of ours it delivered
  std::vector<uint32_t> told_;        ///< causal, per slot: its delivered count we last told
  std::vector<uint32_t> stamped_;     ///< causal: the stamp prepare() made, told once sent(true)
  rel::order::CausalOrder co_;
  std::unique_ptr<TotalOut> out_;
  rel::order::TotalOrder to_;
  /** A record waiting for the tx ring. */
  struct Record {
    uint32_t len;
    uint8_t b[order::kMaxRecord];
  };
  /** A FIFO in a vector, allocated at init; only the outbox ever grows (past kOutboxHigh
   *  while one rx burst's records are made, rarely). */
  template <typename T>
  struct Fifo {
    std::vector<T> v;
    size_t head = 0, len = 0;
    void init(size_t cap) { v.assign(cap, T{}), head = len = 0; }
    bool empty() const { return len == 0; }
    size_t size() const { return len; }
    T& front() { return v[head]; }
    void pop() { head = (head + 1) % v.size(), --len; }
    T& push();
  };

  std::vector<imago_msg> slots_;      ///< descriptors held: messages and events
  std::vector<uint32_t> free_;        ///< free slots_ (reserved: never reallocates)
  std::vector<uint8_t> used_;         ///< per slots_: holds a descriptor
  Fifo<uint32_t> ready_;              ///< slots_ in delivery order
  Fifo<Record> outbox_;               ///< records not yet taken by the ring
  std::vector<uint32_t> scratch_;     ///< a stamp
  Fifo<uint32_t> big_sent_;           ///< causal: numbers of our big messages not yet credited by all
  uint32_t big_window_ = 0;           ///< 0: no limit
  uint32_t own_big_ = 0;              ///< total: our big messages not yet delivered here
  uint8_t batch_[kBatch];             ///< records being joined into one message
  uint64_t held_ = 0;
  uint32_t idle_ = 0;                 ///< receive calls in a row that found nothing
  bool all_joined_ = false;           ///< every member joined our stream or left (stays true)
  bool left_out_ = false;
  bool pending_ = false;              ///< prepare() stamped a message not yet sent()
  bool pending_big_ = false;          ///< ... and it is a big one
  uint64_t pending_ts_ = 0;           ///< ... and its stamp (total order)
  OrderCounters c_;
};

template <typename T>
T& GroupOrder::Fifo<T>::push() {
  if (len == v.size()) {  // grow, keeping the order
    std::vector<T> w(v.size() * 2 + 16);
    for (size_t i = 0; i < len; ++i) w[i] = v[(head + i) % v.size()];
    v.swap(w), head = 0;
  }
  return v[(head + len++) % v.size()];
}

template <typename Pull>
int GroupOrder::receive(imago_msg* out, unsigned n, Pull&& pull) {
  if (left_out_) return -ECONNRESET;
  flush();
  unsigned got = 0;
  for (int round = 0; round < 2 && got < n; ++round) {
    while (got < n && !ready_.empty()) {
      const uint32_t h = ready_.front();
      ready_.pop();
      out[got++] = slots_[h];
      unstore(h);
    }
    if (got == n || outbox_.size() >= kOutboxHigh) break;
    // Room for every descriptor pulled, whatever becomes of it.
    imago_msg in[32];
    const unsigned want = static_cast<unsigned>(std::min<size_t>(32, free_.size()));
    const unsigned k = want == 0 ? 0 : pull(in, want);
    if (k == 0) {
      // Quiet for a while: say how far we are (no reverse traffic carries it).
      if (++idle_ == kIdleCredit) idle();
      break;
    }
    idle_ = 0;
    for (unsigned i = 0; i < k; ++i) on_received(in[i]);
    drain();
    // The ring had no more (light load): the records go at once, as nothing is coming that
    // they could share a frame with. Under load (a full pull) they wait to share frames.
    flush(k < want);
  }
  return static_cast<int>(got);
}

}  // namespace imago::api
