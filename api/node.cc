// SPDX-License-Identifier: BSD-3-Clause
// The engine lcore's side of the endpoints: tx rings into the engine, deliveries onto rx
// rings in three tiers, and the control channel that announces endpoints to peers.
#include "api/node.h"

#include <rte_cycles.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "api/buffers.h"
#include "api/handoff.h"
#include "api/imago.h"
#include "api/order_wire.h"
#include "api/tiers.h"
#include "reliability/be.h"

namespace imago::api {

namespace {

constexpr uint8_t kOpOpen = 1;
constexpr uint8_t kOpClose = 2;
constexpr uint32_t kTagBytes = 4;
// Received mbufs an endpoint may hold at once; beyond it messages are copied, so a slow
// reader cannot starve the port's receive pool.
constexpr uint32_t kMbufLoanCap = 512;
static_assert(IMAGO_PEERS_MAX == kMaxEndpoints, "a node has a peer table of kMaxEndpoints");
static_assert(kMbufLoanCap < kReturnSlots, "every mbuf an endpoint holds fits its return ring");
static_assert(2 * 2 * LoanTable::kSlots < kReturnSlots, "every loan given back twice between two emptyings fits");

uint32_t engine_flags(uint16_t f) {
  return ((f & IMAGO_MSG_F_FASTPATH) ? rel::send_flag::kFastpath : 0) |
         ((f & IMAGO_MSG_F_ACK_REQ) ? rel::send_flag::kAckReq : 0);
}

void put_tag(uint8_t* at, uint32_t hash) { reinterpret_cast<Be32*>(at)->set(hash); }
uint32_t get_tag(const uint8_t* at) { return reinterpret_cast<const Be32*>(at)->get(); }

}  // namespace

int Node::init(const NodeSpec& spec, ShmRoot* shm) {
  spec_ = spec;
  shm_ = shm;
  active_ = std::make_unique<Active[]>(kMaxEndpoints);
  // The engine lcore's buffer caches (freed by the runtime once the engines stopped); without
  // them (no memory) every buffer goes to the pool ring.
  caches_ = &shm->engine_caches[spec.index];
  big_.init(shm->big_pool->size, send_reserve(shm->big_pool));
  if (pool_caches_create(*caches_, shm->msg_pool, shm->frame_pool) < 0) *caches_ = PoolCaches{};
  dp::NodeEngineConfig c{.id = spec.id, .encap = spec.encap, .burst = spec.burst, .engine = spec.engine,
                         .port_b = spec.port_b, .pool_b = spec.mbuf_pool_b, .encap_b = spec.encap_b,
                         .redundancy = spec.redundancy, .circuits = spec.circuits};
  if (int rc = dp::node_engine_open(ne_, *spec.port, spec.mbuf_pool, c, this); rc < 0) return rc;
  dp::node_engine_publish_to(ne_, &shm->boards[spec.index], spec.id);
  if (ne_.set) ne_.set->set_listener(this);
  return 0;
}

int Node::add_peer(const PeerAddr& peer) {
  if (n_peers_ == kMaxEndpoints) return -ENOSPC;
  if (int rc = dp::node_engine_add_peer(ne_, peer.id, peer.mac, peer.ip, peer.mac_b, peer.ip_b); rc < 0) return rc;
  // At most send_window messages (one unit each at least) can be unconfirmed at once.
  History& h = history_[n_peers_];
  h.mask = spec_.engine.send_window - 1;
  h.slot = std::make_unique<uint8_t[]>(spec_.engine.send_window);
  peers_[n_peers_++] = peer.id;
  return 0;
}

bool Node::has_peer(uint64_t id) const { return peer_index(id) >= 0; }

int Node::peer_index(uint64_t id) const {
  for (unsigned i = 0; i < n_peers_; ++i)
    if (peers_[i] == id) return static_cast<int>(i);
  return -1;
}

unsigned Node::poll(uint64_t now_tsc) {
  now_ns_ = dp::node_engine_now_ns(ne_, now_tsc);
  dp::node_engine_set_now(ne_, now_tsc);
  uint32_t gen = shm_->generation.load(std::memory_order_acquire);
  if (gen != seen_gen_) refresh(gen);
  if (ne_.engine->peer_settings_gen() != settings_gen_) cap_group_sends();
  if (announce_n_ > 0) send_announces(now_ns_);
  unsigned work = 0;
  for (unsigned i = 0; i < n_active_; ++i) {
    work += drain_tx(active_[i], now_ns_);
    work += free_returned(*active_[i].slot, caches_);
  }
  ne_.pub.app_queued = announce_n_;  // a clean stop waits for them too (Runtime::linger())
  const uint64_t board_due = ne_.pub.next_tsc;
  work += dp::node_engine_poll(ne_, now_tsc);  // receive, deliver (staged), timers, send; publish
  // Otherwise group senders' views are published with the node's board (every ms).
  const bool published = ne_.pub.next_tsc != board_due;
  for (unsigned i = 0; i < n_active_; ++i) {
    flush_staged(active_[i]);
    if (published && active_[i].slot->group != 0) publish_group(*active_[i].slot);
  }
  return work;
}


// --- endpoints appearing and leaving (the control path changed the table) ---

void Node::refresh(uint32_t gen) {
  seen_gen_ = gen;
  for (unsigned i = 0; i < n_active_;) {
    if (active_[i].slot->state.load(std::memory_order_acquire) == SlotState::kOpen) {
      ++i;
      continue;
    }
    retire(active_[i]);
    active_[i] = active_[--n_active_];
  }
  for (uint32_t i = 0; i < kMaxEndpoints; ++i) {
    EndpointSlot& s = shm_->slots[i];
    SlotState st = s.state.load(std::memory_order_acquire);
    if (s.node_index != spec_.index || (st != SlotState::kOpen && st != SlotState::kClosing)) continue;
    bool known = false;
    for (unsigned k = 0; k < n_active_ && !known; ++k) known = active_[k].slot_index == i;
    if (known) continue;
    if (st == SlotState::kOpen) {
      activate(i);
    } else if (s.state.compare_exchange_strong(st, SlotState::kDrained, std::memory_order_acq_rel)) {
      // Opened and closed before this lcore saw it open: nothing taken, nothing to let go.
      shm_->generation.fetch_add(1, std::memory_order_acq_rel);
    }
  }
}

void Node::activate(uint32_t slot_index) {
  Active& a = active_[n_active_++];
  a.slot = &shm_->slots[slot_index];
  a.slot_index = slot_index;
  a.peer_index = static_cast<uint32_t>(peer_index(a.slot->peer));  // open_endpoint checked it
  a.staged_room = a.staged_n = a.staged_msgs = 0;
  a.group_ok = false;
  if (a.slot->group != 0) return activate_group(a);
  for (unsigned i = 0; i < n_remote_; ++i)
    if (remote_[i].peer == a.slot->peer && remote_[i].hash == a.slot->hash) set_ready(*a.slot, true);
  queue_announce(a.slot->peer, a.slot->hash, kOpOpen);
}

// Join and/or open the group, and tell the control path how it went (EndpointSlot::group_rc).
void Node::activate_group(Active& a) {
  EndpointSlot& s = *a.slot;
  rel::Engine& e = *ne_.engine;
  const bool send = s.group_flags & IMAGO_GROUP_SEND, recv = s.group_flags & IMAGO_GROUP_RECV;
  a.group_ok = true;  // the events of the join or open itself (peers admitted at once) come here
  int rc = recv ? e.group_join(s.group, (s.group_flags & IMAGO_GROUP_FROM_OLDEST) != 0, now_ns_) : 0;
  if (rc == 0 && send) {
    rc = e.group_open(s.group, now_ns_, (s.group_flags & IMAGO_GROUP_NACK) != 0);
    if (rc == -EEXIST) rc = -EBUSY;  // its previous stream here is still ending
    if (rc < 0 && recv) e.group_leave(s.group, now_ns_);
  }
  if (rc == -EINVAL) rc = -ENOSPC;  // the node was started with no room for groups
  a.group_ok = rc == 0;
  if (rc < 0) {  // nothing to tell of a group not joined
    a.staged_n = a.staged_msgs = 0;
    flush_staged(a);
  }
  if (rc == 0 && recv && s.ordered())  // members whose node died before this opening
    for (unsigned i = 0; i < n_peers_; ++i)
      if (was_up_[i] && e.state(peers_[i]) == rel::PeerState::kDead) tell_node_gone(a, peers_[i]);
  if (rc == 0 && send) {
    s.max_message.store(group_send_cap(), std::memory_order_relaxed);
    s.peer_ready.store(1, std::memory_order_release);
  }
  s.group_rc.store(rc, std::memory_order_release);
}

// The largest message an endpoint takes when the engine takes @p engine_max bytes: a node
// states its largest message with a unicast message's endpoint tag, so a peer takes 4 bytes
// less than it says (a group message, which carries no tag, too: it lands in the same buffers).
uint32_t Node::app_max(uint64_t engine_max) const {
  return static_cast<uint32_t>(std::min<uint64_t>(shm_->max_message, engine_max > kTagBytes ? engine_max - kTagBytes : 0));
}

uint32_t Node::group_send_cap() const { return app_max(ne_.engine->group_max_message()); }

// A peer stated another largest message: group sends take no more than every peer takes now
// (any may join); what waits on a ring above it is discarded in drain_tx().
void Node::cap_group_sends() {
  settings_gen_ = ne_.engine->peer_settings_gen();
  const uint32_t cap = group_send_cap();
  for (unsigned i = 0; i < n_active_; ++i) {
    EndpointSlot& s = *active_[i].slot;
    if (s.group != 0 && (s.group_flags & IMAGO_GROUP_SEND) && active_[i].group_ok)
      s.max_message.store(cap, std::memory_order_relaxed);
  }
}

// An ordered group waits for every member to join it; one whose node died first never will.
void Node::tell_node_gone(Active& a, uint64_t peer) {
  const imago_group_event ev{order::kEventNodeGone, 0, peer, 0, 0, IMAGO_GROUP_END_GONE, 0, 0};
  stage_event(a, peer, &ev, sizeof ev);
}

void Node::retire(Active& a) {
  EndpointSlot& s = *a.slot;
  flush_staged(a);  // the loans of what is left on the rings are reclaimed with the slot
  if (s.group != 0) {
    if (a.group_ok && (s.group_flags & IMAGO_GROUP_SEND)) ne_.engine->group_close(s.group, now_ns_);
    if (a.group_ok && (s.group_flags & IMAGO_GROUP_RECV)) ne_.engine->group_leave(s.group, now_ns_);
    flush_staged(a);  // the ENDED events just staged: the application may still read them
  } else {
    queue_announce(s.peer, s.hash, kOpClose);
  }
  s.peer_ready.store(0, std::memory_order_relaxed);
  s.state.store(SlotState::kDrained, std::memory_order_release);
  shm_->generation.fetch_add(1, std::memory_order_acq_rel);
}

Node::Active* Node::find(uint64_t peer, uint32_t hash) {
  for (unsigned i = 0; i < n_active_; ++i)
    if (active_[i].slot->hash == hash && active_[i].slot->peer == peer) return &active_[i];
  return nullptr;
}

Node::Active* Node::find_group(rel::GroupId g, uint32_t flag) {
  for (unsigned i = 0; i < n_active_; ++i)
    if (active_[i].slot->group == g && (active_[i].slot->group_flags & flag) && active_[i].group_ok) return &active_[i];
  return nullptr;
}

void Node::set_ready(uint64_t peer, uint32_t hash, bool ready) {
  if (Active* a = find(peer, hash)) set_ready(*a->slot, ready);
}

void Node::set_ready(EndpointSlot& s, bool ready) {
  // Ready, a send takes no more than the peer's node takes (its HELLO said: its --max-message
  // may be below ours), before the application reads peer_ready.
  if (ready) s.max_message.store(app_max(ne_.engine->peer_max_message(static_cast<rel::NodeId>(s.peer))),
                                 std::memory_order_relaxed);
  s.peer_ready.store(ready ? 1 : 0, std::memory_order_release);
}

// --- application -> engine ---

unsigned Node::drain_tx(Active& a, uint64_t now_ns) {
  EndpointSlot& s = *a.slot;
  if (!s.peer_ready.load(std::memory_order_relaxed)) return 0;  // wait for the peer's endpoint
  // Read in place (a zero-copy dequeue): what the engine does not take now stays on the ring.
  rte_ring_zc_data z{};
  const unsigned avail = rte_ring_dequeue_zc_burst_elem_start(s.tx, sizeof(imago_msg), kStageSlots, &z, nullptr);
  if (avail == 0) return 0;
  unsigned done = 0, at = 0;
  uint64_t bytes = 0;
  uint8_t scratch[kTagBytes + IMAGO_SEND_INLINE_MAX];
  for (unsigned taken = 0; at < avail && taken < kStage; ++taken) {
    imago_msg& d = zc_slot(z, at);
    const unsigned k = ring_spill_of(d);
    // A message's slots are put on the ring together: past this burst's end they are there
    // next time. A descriptor that claims more slots than the whole ring holds is forged.
    if (at + 1 + k > avail && at > 0) break;
    const uint16_t flags = d.flags;  // tx_view() may write the endpoint tag over these
    const uint8_t tier = d.tier;
    std::span<const uint8_t> msg;
    if (at + 1 + k > avail || !tx_view(a, z, at, &msg, scratch)) {
      s.c.tx_invalid.add();
      release_sent(side(s), d);
      at = std::min(at + 1 + k, avail);
      continue;
    }
    const int rc = send_one(a, d, tier, msg, flags, now_ns);
    // Never taken: above the group's largest message (a zero-copy buffer's length), or above
    // what the peer's node takes (put on the ring before its HELLO said so).
    const bool never = rc == -EMSGSIZE || (rc < 0 && s.group != 0 && rc != -EAGAIN);
    if (!never && rc < 0) {  // the window (the slowest member's) is full: later
      d.flags = flags, d.tier = tier, d.reserved = 0;  // as the application wrote them (the tag went over them)
      break;
    }
    if (never) {
      s.c.tx_invalid.add();
    } else {
      if (s.group == 0) record_sent(a.peer_index, static_cast<uint8_t>(a.slot_index));
      bytes += d.len;
      (tier != IMAGO_TIER_POOL                  ? s.c.tx_inline
       : (flags & IMAGO_MSG_F_ZERO_COPY) != 0 ? s.c.tx_zero_copy
                                                : s.c.tx_pool)
          .add();
      ++done;
    }
    // Only a pool buffer to free (its descriptor is untouched: its tag went in the headroom),
    // unless the engine sends it by reference (rc 1: its loan is the engine's now). The slots
    // are not written again: the application's next write finds them as it left them.
    if (tier == IMAGO_TIER_POOL && rc != 1) release_sent(side(s), d);
    at += 1 + k;
  }
  rte_ring_dequeue_zc_elem_finish(s.tx, at);
  // A sender's pending units grow with what it just took: published before msgs_sent counts
  // it, so that nobody reads everything taken with a pending count from before (a close, or
  // a publisher that ends once nothing is pending, then loses nothing).
  if (done != 0 && s.group != 0) publish_group(s);
  std::atomic_thread_fence(std::memory_order_release);
  s.c.msgs_sent.add(done);
  s.c.bytes_sent.add(bytes);
  return done;
}

// Hand message @p msg of descriptor @p d, of tier @p tier (as the application wrote it: an
// inline message's tag now lies over d's tier), to the engine. A pool buffer above ref_min()
// goes by reference when its pool has room for it: its loan leaves the endpoint (a reclaim of
// the endpoint's loans must not free a buffer the engine still sends), and ext_done() frees it.
// @return 1 sent by reference, 0 sent (copied), or the engine's negative errno.
int Node::send_one(Active& a, const imago_msg& d, uint8_t tier, std::span<const uint8_t> msg, uint16_t flags,
                   uint64_t now_ns) {
  EndpointSlot& s = *a.slot;
  if (s.group != 0) {  // put on the ring before a peer stated it takes less (cap_group_sends())
    if (msg.size() > s.max_message.load(std::memory_order_relaxed)) return -EMSGSIZE;
    return ne_.engine->group_send(s.group, msg, engine_flags(flags), now_ns);
  }
  if (tier != IMAGO_TIER_POOL) return ne_.engine->send(s.peer, msg, engine_flags(flags), now_ns);
  void* owner = d.u.ext.owner;  // a pool buffer's: send_bytes() checked the loan
  const unsigned pi = pool_of(owner);
  if (!ne_.engine->by_ref(msg.size()) || ext_held_[pi] >= rte_mempool_from_obj(owner)->size / 2)
    return ne_.engine->send(s.peer, msg, engine_flags(flags), now_ns);
  const int rc = ne_.engine->send_ref(s.peer, msg, engine_flags(flags), now_ns, reinterpret_cast<uint64_t>(owner));
  if (rc != 0) return rc;  // refused (by_ref() said it goes by reference: never 1, copied)
  s.tx_loans.take(d.u.ext.loan);
  ++ext_held_[pi];
  return 1;
}

unsigned Node::pool_of(const void* obj) const {
  const rte_mempool* mp = rte_mempool_from_obj(const_cast<void*>(obj));
  return mp == shm_->big_pool ? 2 : mp == shm_->frame_pool ? 1 : 0;
}

void Node::ext_done(uint64_t cookie) {
  void* obj = reinterpret_cast<void*>(cookie);
  --ext_held_[pool_of(obj)];
  put_loaned(obj, caches_);
}

// Check the descriptor at slot @p at of @p z, written by the application (it may be buggy),
// and point @p msg at its bytes with the endpoint tag in front: for the inline tiers over
// the descriptor's flags, tier and reserved fields (the caller puts them back), or in
// @p scratch when the ring wraps inside the message; in the pool buffer's headroom otherwise.
bool Node::tx_view(Active& a, const rte_ring_zc_data& z, unsigned at, std::span<const uint8_t>* msg, uint8_t* scratch) {
  imago_msg& d = zc_slot(z, at);
  const unsigned k = ring_spill_of(d);
  const bool wraps = k != 0 && !ring_contiguous(z, at, k);
  if (wraps) ring_gather(z, at, scratch + kTagBytes);  // the message's bytes, joined
  std::span<const uint8_t> bytes = send_bytes(*a.slot, d);
  if (bytes.data() == nullptr) return false;
  if (wraps) bytes = {scratch + kTagBytes, bytes.size()};
  if (a.slot->group != 0) {  // the group is the stream: no tag
    *msg = bytes;
    return true;
  }
  static_assert(offsetof(imago_msg, u) - offsetof(imago_msg, flags) == kTagBytes, "the tag fits over flags, tier, reserved");
  auto* tagged = const_cast<uint8_t*>(bytes.data()) - kTagBytes;  // the descriptor, scratch, or the buffer's headroom
  put_tag(tagged, a.slot->hash);
  *msg = {tagged, kTagBytes + bytes.size()};
  return true;
}

// --- engine -> application ---

bool Node::deliver(rel::NodeId peer, std::span<const uint8_t> msg) { return take(peer, msg, nullptr); }

uint64_t Node::rebuild_above() const { return kTagBytes + kFrameClass; }

rel::RebuildBuffer Node::rebuild_buffer(rel::NodeId) {
  void* obj = big_.room() ? buffer_get(shm_->big_pool, caches_) : nullptr;
  if (obj == nullptr) return {};  // rebuilt in the engine's buffer, copied when delivered
  big_.took(obj);
  // The tag in the headroom's end, the body at kHeadroom: where the pool tier has it.
  return {static_cast<uint8_t*>(obj) + kHeadroom - kTagBytes, shm_->big_pool->elt_size - kHeadroom + kTagBytes, obj};
}

bool Node::deliver_rebuilt(rel::NodeId peer, std::span<const uint8_t> msg, rel::RebuildBuffer b) {
  return take(peer, msg, b.cookie);
}

void Node::rebuild_buffer_free(rel::NodeId, rel::RebuildBuffer b) {
  big_.freed(b.cookie);
  buffer_put(b.cookie, caches_);
}

// A message from the engine, in the pool buffer @p rebuilt (rebuild_buffer()) or, with
// nullptr, in the engine's memory. @return false to have the engine keep it (and the buffer)
// for later; true when it was handed over or dropped, the buffer with it.
bool Node::take(rel::NodeId peer, std::span<const uint8_t> msg, void* rebuilt) {
  auto dropped = [&] {
    if (rebuilt != nullptr) big_.freed(rebuilt), buffer_put(rebuilt, caches_);
    return true;
  };
  if (msg.size() < kTagBytes) {
    ++c_.control_bad;
    return dropped();
  }
  const uint32_t hash = get_tag(msg.data());
  auto body = msg.subspan(kTagBytes);
  if (hash == 0) {
    on_control(peer, body);
    return dropped();
  }
  Active* a = find(peer, hash);
  if (a == nullptr) {
    shm_->no_endpoint[spec_.index].add();  // closed here: nobody to give it to
    return dropped();
  }
  const int rc = stage(*a, peer, body, rebuilt);
  return rc < 0 ? dropped() : rc > 0;
}

bool Node::stage_room(Active& a, unsigned slots) {
  if (a.staged_n + slots <= a.staged_room && a.staged_msgs < kStage) return true;  // published kStage at a time
  flush_staged(a);
  a.staged_room = static_cast<uint16_t>(
      rte_ring_enqueue_zc_burst_elem_start(a.slot->rx, sizeof(imago_msg), kStageSlots, &a.staged, nullptr));
  if (a.staged_room == 0) return false;
  if (slots <= a.staged_room) return true;
  flush_staged(a);  // the ring has fewer free slots than this message takes
  return false;
}

int Node::stage(Active& a, uint64_t src, std::span<const uint8_t> body, void* rebuilt) {
  EndpointSlot& s = *a.slot;
  const auto len = static_cast<uint32_t>(body.size());
  // A medium message goes inline in the ring's slots (its application copies it out:
  // IMAGO_TIER_COPY), unless the endpoint's ordering holds what it receives (pool buffers).
  const unsigned slots = rebuilt == nullptr && s.rx_inline ? tx_slots(len) : 1;
  if (!stage_room(a, slots)) {
    s.c.rx_ring_full.add();  // back-pressure: the engine keeps it and withholds credit
    return 0;
  }
  imago_msg& d = zc_slot(a.staged, a.staged_n);
  int rc = 0;
  if (slots > 1) {
    describe_ring_zc(a.staged, a.staged_n, src, body.data(), len, 0);
    s.c.rx_inline.add();
  } else {
    // The ledger only for a message of the big pool: a full one reads loan tables, which
    // smaller messages, the common case, must not pay for.
    const bool big = rebuilt == nullptr && shm_->pool_for(len) == shm_->big_pool;
    rc = rebuilt != nullptr ? describe_pooled(side(s), src, rebuilt, len, d)
                            : describe_received(side(s), src, body, dp::node_engine_current_frame(ne_), kMbufLoanCap, d,
                                                big && !big_.room() ? shm_->big_pool : nullptr);
    if (rc == 0 && d.tier == IMAGO_TIER_POOL && pool_of(d.u.ext.owner) == 2) big_.lent(d.u.ext.owner, &s.rx_loans, d.u.ext.loan);
  }
  if (rc == -EMSGSIZE) {
    ++c_.control_bad;  // larger than any buffer: cannot be handed over, never will be
    return -1;
  }
  if (rc < 0) {
    (rc == -ENOBUFS ? s.c.rx_no_buffer : s.c.rx_ring_full).add();
    return 0;
  }
  a.staged_n = static_cast<uint16_t>(a.staged_n + slots);
  ++a.staged_msgs;
  if (rebuilt != nullptr) s.c.rx_rebuilt.add();
  s.c.msgs_received.add();
  s.c.bytes_received.add(body.size());
  return 1;
}

// --- groups: the streams this node receives, and the events of every stream ---

void Node::publish_group(EndpointSlot& s) {
  rel::Engine::GroupTxView v;
  if (!(s.group_flags & IMAGO_GROUP_SEND) || !ne_.engine->group_tx_view(s.group, &v)) return;
  s.c.group_members.v.store(v.members, std::memory_order_relaxed);
  s.c.group_view.v.store(v.view, std::memory_order_relaxed);
  s.c.group_pending.v.store(v.pending, std::memory_order_relaxed);
}

bool Node::deliver_group(rel::NodeId src, rel::GroupId g, std::span<const uint8_t> msg) {
  Active* a = find_group(g, IMAGO_GROUP_RECV);
  if (a == nullptr) {
    shm_->no_endpoint[spec_.index].add();  // left meanwhile: the stream is ending
    return true;
  }
  return stage(*a, src, msg, nullptr) != 0;
}

void Node::on_group_event(const rel::GroupEvent& e) {
  // This node's own stream's events go to its sender, the others' to its receiver.
  Active* a = find_group(e.group, e.src == spec_.id ? IMAGO_GROUP_SEND : IMAGO_GROUP_RECV);
  if (a == nullptr) return;  // the endpoint is closing: nobody to tell
  const imago_group_event ev{e.kind, e.view, e.src, e.member, e.position, e.why, e.count, 0};
  stage_event(*a, e.src, &ev, sizeof ev);
}

bool Node::on_group_report(const rel::GroupEvent& e) {
  Active* a = find_group(e.group, IMAGO_GROUP_RECV);
  if (a == nullptr) return true;  // the endpoint is closing: nobody to tell
  if (!stage_room(*a)) {
    a->slot->c.rx_ring_full.add();  // back-pressure, as for a message: offered again
    return false;
  }
  on_group_event(e);
  return true;
}

void Node::stage_event(Active& a, uint64_t src, const void* ev, uint32_t len) {
  EndpointSlot& s = *a.slot;
  if (!stage_room(a)) return s.c.events_lost.add();
  imago_msg& d = zc_slot(a.staged, a.staged_n++);
  ++a.staged_msgs;
  d = imago_msg{};
  d.src = src;
  d.len = len;
  d.flags = IMAGO_MSG_F_EVENT;
  d.tier = IMAGO_TIER_INLINE;
  std::memcpy(d.u.inline_data, ev, len);
  s.c.events.add();
}

void Node::on_net_event(const rel::red::NetEvent& e) {
  for (unsigned i = 0; i < n_active_; ++i) {
    Active& a = active_[i];
    EndpointSlot& s = *a.slot;
    if (s.group != 0 || s.peer != e.peer || !(s.group_flags & IMAGO_EP_NET_EVENTS)) continue;
    const imago_net_event ev{e.kind == rel::red::NetEvent::kState      ? IMAGO_NET_EV_STATE
                             : e.kind == rel::red::NetEvent::kFailover ? IMAGO_NET_EV_FAILOVER
                                                                       : IMAGO_NET_EV_FAILBACK,
                             e.net, static_cast<uint32_t>(e.state), 0, e.peer};
    stage_event(a, e.peer, &ev, sizeof ev);
  }
}

void Node::flush_staged(Active& a) {
  if (a.staged_room == 0) return;
  rte_ring_enqueue_zc_elem_finish(a.slot->rx, a.staged_n);  // the slots reserved and not written go back
  a.staged_room = 0;
  // After the put, released: imago_poll() never counts a message not on the ring yet.
  Counter& put = a.slot->c.rx_put;
  put.v.store(put.v.load(std::memory_order_relaxed) + a.staged_msgs, std::memory_order_release);
  a.staged_n = a.staged_msgs = 0;
}

// --- the control channel: endpoints announced to peers ---

void Node::on_control(uint64_t peer, std::span<const uint8_t> body) {
  if (body.size() != 5 || (body[0] != kOpOpen && body[0] != kOpClose)) {
    ++c_.control_bad;
    return;
  }
  ++c_.control_in;
  const uint32_t hash = get_tag(body.data() + 1);
  unsigned i = 0;
  while (i < n_remote_ && !(remote_[i].peer == peer && remote_[i].hash == hash)) ++i;
  if (body[0] == kOpOpen && i == n_remote_) {
    if (n_remote_ == std::size(remote_)) return void(++c_.control_bad);
    remote_[n_remote_++] = {peer, hash};
  } else if (body[0] == kOpClose && i < n_remote_) {
    remote_[i] = remote_[--n_remote_];
  }
  set_ready(peer, hash, body[0] == kOpOpen);
}

void Node::queue_announce(uint64_t peer, uint32_t hash, uint8_t op) {
  const unsigned cap = kAnnounceCap;
  if (announce_n_ == cap) return void(++c_.control_bad);  // cannot happen: 2 per slot
  announce_[(announce_head_ + announce_n_++) % cap] = {peer, hash, op};
}

void Node::send_announces(uint64_t now_ns) {
  const unsigned cap = kAnnounceCap;
  while (announce_n_ > 0) {
    const Announce& x = announce_[announce_head_];
    uint8_t m[kTagBytes + 5];
    put_tag(m, 0);
    m[kTagBytes] = x.op;
    put_tag(m + kTagBytes + 1, x.hash);
    int rc = ne_.engine->send(x.peer, m, rel::send_flag::kFastpath, now_ns);
    if (rc == -EAGAIN) return;  // window full: next time
    if (rc == 0) {
      ++c_.announce_sent;
      if (int pi = peer_index(x.peer); pi >= 0) record_sent(static_cast<uint32_t>(pi), kControlSlot);
    }
    announce_head_ = (announce_head_ + 1) % cap;
    --announce_n_;
  }
}

void Node::forget_remotes(uint64_t peer) {
  for (unsigned i = 0; i < n_remote_;) {
    if (remote_[i].peer == peer) {
      set_ready(peer, remote_[i].hash, false);
      remote_[i] = remote_[--n_remote_];
    } else {
      ++i;
    }
  }
}

void Node::on_peer_up(rel::NodeId peer) {
  if (const int pi = peer_index(peer); pi >= 0) was_up_[pi] = true;
  for (unsigned i = 0; i < n_active_; ++i)
    if (active_[i].slot->peer == peer) queue_announce(peer, active_[i].slot->hash, kOpOpen);
}

// The engine dropped the last @p discarded messages sent to @p peer: count them, per
// endpoint, with the range of each endpoint's own messages they were (its last ones).
void Node::charge_unconfirmed(uint64_t peer, uint64_t discarded, bool dead) {
  const int pi = peer_index(peer);
  if (pi < 0) return;
  History& h = history_[pi];
  uint32_t per_slot[kMaxEndpoints] = {};
  const uint64_t n = std::min<uint64_t>({discarded, h.n, uint64_t{h.mask} + 1});
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t s = h.slot[(h.n - 1 - i) & h.mask];
    if (s < kMaxEndpoints) ++per_slot[s];
  }
  h.n = 0;  // a new session: what was sent before cannot be dropped again
  for (unsigned i = 0; i < n_active_; ++i) {
    EndpointSlot& s = *active_[i].slot;
    if (s.peer != peer) continue;
    const uint32_t k = per_slot[active_[i].slot_index];
    (dead ? s.c.peer_deaths : s.c.peer_resets).add();
    if (k == 0) continue;  // the last range stays the last one that dropped something
    s.c.msgs_unconfirmed.add(k);
    s.c.last_unconfirmed_count.v.store(k, std::memory_order_relaxed);
    s.c.last_unconfirmed_first.v.store(s.c.msgs_sent.get() - k + 1, std::memory_order_relaxed);
  }
}

void Node::on_peer_reset(rel::NodeId peer, uint64_t discarded) {
  charge_unconfirmed(peer, discarded, false);
  forget_remotes(peer);
}

void Node::on_peer_dead(rel::NodeId peer, uint64_t discarded) {
  charge_unconfirmed(peer, discarded, true);
  forget_remotes(peer);
  if (const int pi = peer_index(peer); pi < 0 || !was_up_[pi]) return;  // not started yet, maybe
  for (unsigned i = 0; i < n_active_; ++i) {
    const EndpointSlot& s = *active_[i].slot;
    if (active_[i].group_ok && s.ordered() && (s.group_flags & IMAGO_GROUP_RECV)) tell_node_gone(active_[i], peer);
  }
}

}  // namespace imago::api
