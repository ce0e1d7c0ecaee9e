/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Causal order over a group's streams ("Routing in Barrelfish", group semantics set 2): no
 * message is delivered before every message that happened before it (Lamport) was, at every
 * member. Vector timestamps after Birman, Schiper and Stephenson: each message carries, per
 * member, how many of that member's messages its sender had delivered (its own sent, for
 * itself) when it sent it; a member holds a message back until it has delivered as many.
 *
 * It sits on top of the group streams, which already give every member each source's
 * messages once and in the source's order (single-source FIFO, the default): so the next
 * message of a source always carries one more of its own than the last, and anything else
 * is a lie (counted, dropped). The hold-back is bounded and shared out per source: a
 * source whose share is full has its message refused (back-pressure, as an application that
 * refuses a delivery), never grown. A share per source, not one pool, is what keeps it from
 * deadlocking: the earliest undelivered message in causal order has its whole past
 * delivered, so its source holds nothing back and its share has room for it.
 *
 * Members are the slots of one view (at most kMaxMembers, by node id); a view change starts
 * a new CausalOrder once the streams of the old view are drained. Pure and allocation-free
 * after init(): no clock, no threads.
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reliability/wire.h"

namespace imago::rel::order {

inline constexpr uint32_t kMaxMembers = 64;

struct CausalCounters {
  uint64_t delivered = 0;
  uint64_t held_back = 0;  ///< messages that had to wait for their causal past
  uint64_t refused = 0;    ///< offers refused: the hold-back was full (offer again)
  uint64_t bad = 0;        ///< stamps from no member, of the wrong size, or out of the source's order
};

class CausalOrder {
 public:
  enum class Offer : uint8_t { kTaken, kFull, kBad };

  /**
   * Start a view of @p members (distinct node ids, at most kMaxMembers), this node @p self
   * among them, holding back at most @p per_source messages of each other member.
   * Control path (allocates). @return 0, or -EINVAL (no members, too many, duplicates, self
   * not among them, per_source 0).
   */
  int init(std::span<const NodeId> members, NodeId self, uint32_t per_source);

  /** @return how many entries a stamp has (the view's members). */
  uint32_t width() const { return static_cast<uint32_t>(members_.size()); }
  /** Stamp this node's next message into @p vt (width() entries): it counts as delivered here. */
  void stamp(std::span<uint32_t> vt);
  /**
   * A message from @p src stamped @p vt arrived, in src's order (@p handle is the caller's
   * name for it). kTaken: held until drain() delivers it; kFull: refused, offer it again
   * later (src's share is full); kBad: not a stamp src can have sent next (dropped, counted).
   */
  Offer offer(NodeId src, std::span<const uint32_t> vt, uint64_t handle);
  /** Deliver, through @p fn(src, handle), every held message whose causal past is
   *  delivered, in an order that respects it. @return how many. */
  template <typename F>
  uint32_t drain(F&& fn);

  /** Take back the last stamp(): the message it was for was not sent after all. */
  void unstamp() { --v_[self_]; }
  /**
   * Member @p n left (its stream ended here, or it was expired): its messages held here are
   * still delivered in order, and once they are, nothing waits for more of its (those never
   * come). @return false if @p n is no member (or is this node).
   */
  bool gone(NodeId n);
  /** @return how many of member @p n's messages were delivered here (ours: sent), or 0. */
  uint32_t delivered(NodeId n) const {
    const int s = slot_of(n);
    return s < 0 ? 0 : v_[static_cast<size_t>(s)];
  }

  /** @return how many of member @p n's messages were offered and taken here (delivered or
   *  held back), or 0. */
  uint32_t received(NodeId n) const {
    const int s = slot_of(n);
    return s < 0 ? 0 : offered_[static_cast<size_t>(s)];
  }

  /** @return messages held back now. */
  uint32_t held() const { return held_; }
  const CausalCounters& counters() const { return c_; }

 private:
  struct Held {
    uint64_t handle;
    uint32_t next;  ///< the next held message of the same source (kNone: the last)
  };
  static constexpr uint32_t kNone = ~uint32_t{0};

  int slot_of(NodeId n) const;
  bool deliverable(uint32_t src, uint32_t h) const;
  uint32_t* vt_of(uint32_t h) { return &stamps_[size_t{h} * members_.size()]; }
  const uint32_t* vt_of(uint32_t h) const { return &stamps_[size_t{h} * members_.size()]; }

  std::vector<NodeId> members_;    ///< sorted
  uint32_t self_ = 0;              ///< our slot
  std::vector<uint32_t> v_;        ///< per slot: its messages delivered here (our own: sent)
  std::vector<uint32_t> offered_;  ///< per slot: its messages offered (taken) so far
  std::vector<Held> pool_;         ///< the hold-back, with a free list through `next`
  std::vector<uint32_t> stamps_;   ///< each held message's stamp, width() entries
  std::vector<uint32_t> head_, tail_;  ///< per slot: its held messages, oldest first
  std::vector<uint32_t> share_;        ///< per slot: its messages held now
  std::vector<uint8_t> gone_;          ///< per slot: left the view (gone())
  uint32_t per_source_ = 0;
  uint32_t free_ = kNone;
  uint32_t held_ = 0;
  CausalCounters c_;
};

template <typename F>
uint32_t CausalOrder::drain(F&& fn) {
  // Deliver heads while any is ready: each delivery may make another source's head ready.
  uint32_t n = 0;
  for (bool progress = held_ != 0; progress;) {
    progress = false;
    for (uint32_t s = 0; s < members_.size(); ++s) {
      while (head_[s] != kNone && deliverable(s, head_[s])) {
        const uint32_t h = head_[s];
        head_[s] = pool_[h].next;
        if (head_[s] == kNone) tail_[s] = kNone;
        ++v_[s], --share_[s];
        pool_[h].next = free_, free_ = h;
        --held_, ++n, ++c_.delivered, progress = true;
        fn(members_[s], pool_[h].handle);
      }
    }
  }
  return n;
}

}  // namespace imago::rel::order
