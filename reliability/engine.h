/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The reliability engine of one node: exactly-once, in-order message streams to each peer
 * over a lossy frame service.
 *
 * Pure and single-threaded: frames go out through a FrameSink, messages go up through an
 * AppSink, time is the now_ns argument of each call. All buffers are allocated by create()
 * and add_peer(); send(), on_frame() and poll() never allocate.
 *
 * Typical loop (one lcore): rx burst -> on_frame() each; app tx ring -> send() each;
 * poll(now); sleep/spin until next_deadline() or more frames.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "reliability/codec.h"
#include "reliability/config.h"
#include "reliability/counters.h"
#include "reliability/frame_sink.h"
#include "reliability/group.h"
#include "reliability/reassembly.h"
#include "reliability/recent.h"
#include "reliability/rng.h"
#include "reliability/session.h"
#include "reliability/wire.h"

namespace imago::rel {

/** What happened to a group stream (AppSink::on_group_event()). */
struct GroupEvent {
  enum Kind : uint8_t {
    kJoined = 1,   ///< member joined the view at position (its first unit)
    kLeft = 2,     ///< member left; position: what it had acknowledged
    kExpired = 3,  ///< member expired (silent too long, or its session ended); position as kLeft
    kStarted = 4,  ///< this node receives src's stream of the group from position on
    kEnded = 5,    ///< this node no longer receives it; position: the first unit not delivered
    kLost = 6,     ///< a NACK stream's units [position, position + count) are gone: skipped here
  };
  /** Why a stream ended here (kEnded; kNone for the other kinds). */
  enum Why : uint8_t {
    kNone = 0,
    kLeave = 1,    ///< this node left the group (group_leave())
    kDropped = 2,  ///< the source expired this node: what it sent from position on is lost here
    kClosed = 3,   ///< the source closed its stream; everything it sent was delivered
    kGone = 4,     ///< the source's session ended (it died or restarted): the rest is lost here
  };
  Kind kind;
  NodeId src;      ///< the stream's source (this node for events of its own streams)
  GroupId group;
  NodeId member;   ///< kJoined, kLeft, kExpired: whose membership changed
  uint32_t view;   ///< the source's view number after the change (kJoined, kLeft, kExpired)
  Seq position;
  Why why = kNone;
  uint32_t count = 0;  ///< kLost: units lost from position on
};

/** What a node states of itself in its HELLOs (HelloBody). */
struct PeerSettings {
  uint32_t mtu;          ///< Config::mtu
  uint32_t max_message;  ///< Config::max_message_size (at most 2^32 - 1)
};

/** Where the engine hands messages and peer events (the API rings, or a test). */
class AppSink {
 public:
  virtual ~AppSink() = default;
  /**
   * Deliver one complete message from @p peer; the span is valid only during the call. An
   * unfragmented message received in order may point into the frame given to on_frame().
   * @return false when the application cannot take it now (ring full): the message stays in
   *         the receive buffer, later ones wait behind it, and credits may drop to zero.
   */
  virtual bool deliver(NodeId peer, std::span<const uint8_t> msg) = 0;
  /** The handshake with @p peer completed; data flows. */
  virtual void on_peer_up(NodeId /*peer*/) {}
  /** @p peer restarted (a new incarnation proved itself); @p discarded messages queued for
   *  the old one were dropped. */
  virtual void on_peer_reset(NodeId /*peer*/, uint64_t /*discarded*/) {}
  /** @p peer was silent too long; @p discarded unconfirmed messages were dropped. */
  virtual void on_peer_dead(NodeId /*peer*/, uint64_t /*discarded*/) {}
  /** @p peer's HELLO states settings this node cannot work with (@p theirs against @p ours:
   *  another frame size, or a largest message below one queued for it before the session):
   *  refused (reject settings_mismatch), no session until they agree. Once, until a HELLO
   *  agrees. */
  virtual void on_peer_settings(NodeId /*peer*/, PeerSettings /*theirs*/, PeerSettings /*ours*/) {}

  /**
   * Lending buffers to rebuild large messages in, so that they are delivered without a copy
   * (reassembly.h). Once a fragmented message from @p peer has more than rebuild_above()
   * bytes, the engine asks for a buffer of at least max_message_size bytes and rebuilds the
   * message in it; none (data nullptr) keeps it in the engine's own buffer.
   */
  virtual uint64_t rebuild_above() const { return UINT64_MAX; }
  virtual RebuildBuffer rebuild_buffer(NodeId /*peer*/) { return {}; }
  /**
   * Deliver a message rebuilt in the lent buffer @p b (msg lies in it). @return true when the
   * application took the message and the buffer with it (or dropped both: freeing it is the
   * application's either way), false as deliver() (the engine keeps both and retries).
   */
  virtual bool deliver_rebuilt(NodeId peer, std::span<const uint8_t> msg, RebuildBuffer /*b*/) {
    return deliver(peer, msg);
  }
  /** Take back a lent buffer whose message was not delivered (a reset, the engine's end). */
  virtual void rebuild_buffer_free(NodeId /*peer*/, RebuildBuffer /*b*/) {}

  /** A message sent by reference (Engine::send_ref()) is done with: its buffer, named
   *  @p cookie, is the application's again (acknowledged, or dropped with its session). */
  virtual void ext_done(uint64_t /*cookie*/) {}

  /** Deliver one message of group @p g from source @p src (group_join()). As deliver(). */
  virtual bool deliver_group(NodeId /*src*/, GroupId /*g*/, std::span<const uint8_t> /*msg*/) {
    return true;
  }
  /** A group stream changed: a member joined, left or expired (in the stream's order, at
   *  each member and at the source), a stream started or ended here, data was lost. */
  virtual void on_group_event(const GroupEvent& /*e*/) {}
  /** An event that must reach the application, offered in its stream's place: a NACK stream's
   *  units lost (GroupEvent::kLost), or a stream received here that ended other than by
   *  group_leave() (kEnded, after every message held before its end). @return false when the
   *  application cannot take it now (as deliver()): the stream waits and it is offered
   *  again, so a loss or an end is never skipped unreported. */
  virtual bool on_group_report(const GroupEvent& e) {
    on_group_event(e);
    return true;
  }
};

/** send() flags. */
namespace send_flag {
inline constexpr uint32_t kFastpath = 0x1;  ///< flush at once instead of coalescing
inline constexpr uint32_t kAckReq = 0x2;    ///< the next frame asks the receiver to ACK at once
}

/** One peer's session and windows as an operator asks about them (telemetry): a copy, now. */
struct PeerView {
  NodeId id = 0;
  PeerState state = PeerState::kDead;
  bool known = false;          ///< the peer's epoch and token are known (handshake heard)
  bool confirmed = false;      ///< the peer knows ours
  uint32_t epoch = 0;          ///< the peer's epoch
  uint64_t srtt_ns = 0, rttvar_ns = 0, rto_ns = 0;  ///< 0 before the first sample
  uint64_t min_rtt_ns = 0;  ///< 0 before the handshake's round trip or the first sample
  uint32_t tx_in_flight = 0;   ///< units sent and not yet acknowledged
  uint32_t tx_queued = 0;      ///< units queued and not yet sent
  uint64_t tx_unconfirmed_msgs = 0;  ///< messages not yet acknowledged
  uint32_t rx_held = 0;        ///< units received and not yet delivered
  uint32_t credit_allowed = 0; ///< units beyond the oldest unacknowledged one the peer allows (UINT32_MAX: unlimited)
  uint32_t credit_granted = 0; ///< what we last advertised (UINT32_MAX: unlimited)
  uint64_t last_heard_ns = 0;  ///< engine time of the last valid frame from the peer
};

struct Peer;       // engine-private per-peer state (peer.h)
struct RackTimes;  // rack.h
struct TxFrame;    // engine-private: one frame of the send window (send_window.h)
struct FrameMeta;  // engine-private: what a frame being built carries (engine_tx.cc)

class Engine {
 public:
  /**
   * Create an engine for node @p cfg.node_id.
   * @param out the engine on success.
   * @return 0, or -EINVAL (bad config, see validate(); null sink).
   */
  static int create(const Config& cfg, FrameSink* frames, AppSink* app,
                    std::unique_ptr<Engine>* out);
  ~Engine();
  /** Give back every received frame held in place. Teardown, with nothing running the engine
   *  any more: a frame held may be another engine's (net_ring hands over the mbuf itself),
   *  attached to that engine's memory, which must not go first. */
  void release_frames();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /**
   * Add a peer and start the handshake at the next poll() (control path: allocates).
   * @return 0, -EINVAL (own node id), -EEXIST (already added), -ENOSPC (max_peers reached).
   */
  int add_peer(NodeId peer, uint64_t now_ns);

  /**
   * Queue one message for @p peer (copied; fragmented above one frame). Queued messages
   * flush when a frame fills, when the oldest is coalesce_ns old, or at once with kFastpath.
   * @return 0 queued; -EAGAIN send window full (back-pressure: retry later, nothing lost);
   *         -EMSGSIZE larger than max_message_size; -ENOTCONN peer dead; -EINVAL unknown peer.
   */
  int send(NodeId peer, std::span<const uint8_t> msg, uint32_t flags, uint64_t now_ns);
  /**
   * As send(), by reference when the frame sink chains frames (FrameSink::chains()) and the
   * message is above ref_min() bytes: each unit goes out as a frame whose payload is read
   * from @p msg in place, on every transmission, until the peer acknowledged it all and the
   * sink let go of every frame; then AppSink::ext_done(@p cookie) gives it back. The caller
   * must not change or free those bytes until then.
   * @return 0 queued by reference; 1 copied, as send() (the buffer is the caller's again at
   *         once); negative as send().
   */
  int send_ref(NodeId peer, std::span<const uint8_t> msg, uint32_t flags, uint64_t now_ns, uint64_t cookie);
  /** @return the size above which send_ref() sends by reference (with a sink that chains):
   *  half a frame's payload; a smaller message shares its frame with others, copied. */
  uint32_t ref_min() const { return unit_cap_ / 2; }
  /** @return true when send_ref() sends a message of @p len bytes by reference. */
  bool by_ref(size_t len) const { return len > ref_min() && frames_->chains(); }

  /**
   * Groups (reliable multicast, docs/PROTOCOL.md 3.7); Config::group_sources and
   * group_streams set aside their buffers.
   * Become a source of group @p g (control path). Peers that asked to join it are admitted.
   * @p nack: a NACK-based stream (docs/PROTOCOL.md 3.7.6): members report gaps only, and
   * frames are freed group_nack_hold_ns after they went out, or oldest first when the window
   * is full, ACKed or not; a member that asks for a freed unit is told it is lost (kLost).
   * @return 0, -EINVAL (g 0, or no group_sources), -EEXIST (open already), -ENOSPC (all in use).
   */
  int group_open(GroupId g, uint64_t now_ns, bool nack = false);
  /**
   * Queue one message to every member of @p g's view. As send(): 0, -EAGAIN (the slowest
   * member's window is full), -EMSGSIZE (above group_max_message()), -EINVAL (not open).
   */
  int group_send(GroupId g, std::span<const uint8_t> msg, uint32_t flags, uint64_t now_ns);
  /**
   * Stop being a source of @p g (control path): nothing more is sent; each member gets what
   * was sent, then an END and leaves (kLeft), or is expired; the slot is free once none is
   * left (a group_open() of @p g before that is -EEXIST). @return 0 or -ENOENT.
   */
  int group_close(GroupId g, uint64_t now_ns);
  /**
   * Join group @p g: ask every peer (now and whenever a session comes up) to admit this node
   * to its stream of @p g, from its next message or, with @p from_oldest, from the oldest it
   * still holds. Each source that admits it starts a stream (GroupEvent::kStarted).
   * @return 0, -EINVAL (g 0, or no group_streams), -EEXIST (joined already), -ENOSPC.
   */
  int group_join(GroupId g, bool from_oldest, uint64_t now_ns);
  /** Leave group @p g: every stream of it ends here (kEnded). @return 0 or -ENOENT. */
  int group_leave(GroupId g, uint64_t now_ns);
  /** @return this node's streams from sources still saying LEAVE (until LEAVE_OK, at most
   *  8 tries, one every group_status_ns): a clean stop waits for them. */
  uint32_t groups_leaving() const;
  /** @return groups this node closed as a source whose members have not all left yet (each
   *  gets what was sent, then END): a clean stop waits for them too, a while. */
  uint32_t groups_closing() const;
  /** @return the members of this node's stream of @p g (up to @p max ids into @p out). */
  size_t group_members(GroupId g, NodeId* out, size_t max) const;
  /** This node's stream of a group as its application sees it. */
  struct GroupTxView {
    uint32_t members = 0;  ///< in the view now
    uint32_t view = 0;     ///< the view number
    uint32_t pending = 0;  ///< units queued or sent that not every member acknowledged yet
                           ///< (a NACK stream: queued or sent and still held for repairs)
    bool nack = false;     ///< a NACK-based stream
  };
  /** @return false when this node does not send to @p g (or is closing it). */
  bool group_tx_view(GroupId g, GroupTxView* out) const;
  /** @return the largest message group_send() takes. */
  uint64_t group_max_message() const;
  /** @return a number that changes whenever a peer states another largest message (HELLO):
   *  peer_max_message() and group_max_message() may have changed. */
  uint32_t peer_settings_gen() const { return peer_settings_gen_; }
  const GroupCounters& group_counters() const { return gc_; }

  /** Process one received frame (bytes after the link header). Never fails; bad input is
   *  dropped and counted per Reject reason. */
  void on_frame(std::span<const uint8_t> frame, uint64_t now_ns);

  /** Run due timers, retry refused deliveries and flush. @return frames sent. */
  uint32_t poll(uint64_t now_ns);

  /** @return the earliest time poll() has work (UINT64_MAX: none). */
  uint64_t next_deadline() const;

  /** The engine was not polled for @p ns (its thread descheduled, its caller busy elsewhere)
   *  beyond absence_tolerance_ns(): it heard nothing then, so that time is not counted as
   *  its peers' silence (death) nor its group members' (expiry). Called before the frames
   *  that waited are received. */
  void credit_absence(uint64_t now_ns, uint64_t ns);
  /** @return the gap between two polls that is the caller's to choose (a caller that sleeps
   *  until next_deadline() leaves at most keepalive_ns()); longer ones are absences. */
  uint64_t absence_tolerance_ns() const { return std::min(keepalive_ns(), cfg_.group_expire_ns / 4); }

  /** @return the state of @p peer (kDead for an unknown peer). */
  PeerState state(NodeId peer) const;
  /** @return the largest message @p peer takes: its HELLO's, else ours (0: no such peer). */
  uint64_t peer_max_message(NodeId peer) const;
  /** @return counters of @p peer, or nullptr for an unknown peer. */
  const PeerCounters* counters(NodeId peer) const;
  /** @return the sum over peers plus frames rejected before a peer was found. */
  PeerCounters total_counters() const;
  /** @return messages to @p peer not yet acknowledged (lost if this node dies now). */
  uint64_t unconfirmed_messages(NodeId peer) const;
  /** @return @p peer's session and windows (false: unknown peer). */
  bool view(NodeId peer, PeerView* out) const;
  /** @return the peers, in the order they were added (up to @p max ids into @p out). */
  size_t peer_ids(NodeId* out, size_t max) const;
  /** @return a one-line dump of @p peer's windows and timers, for logs and failing tests. */
  std::string debug_state(NodeId peer) const;
  /** @return bytes held by all preallocated buffers (constant after add_peer()). */
  size_t memory_bytes() const;
  const Config& config() const { return cfg_; }

 private:
  Engine(const Config& cfg, FrameSink* frames, AppSink* app);
  Peer* find(NodeId id);
  const Peer* find(NodeId id) const;

  // engine_session.cc: handshake, restart proof, reset, death.
  void on_hello(Peer& p, const Header& h, uint64_t now);
  void accept_hello(Peer& p, const Header& h, bool changed, uint64_t now);
  void challenge(Peer& p, const Header& h, uint64_t now);
  Seq new_isn();
  /** A new session with @p p; its group streams to us end @p why (GONE: it died or
   *  restarted; DROPPED: alive, it declared us dead, so it expired us from them). */
  void reset_session(Peer& p, bool notify, Seq isn, GroupEvent::Why why = GroupEvent::kGone);
  void declare_dead(Peer& p);
  /** The keep-alive: ack_refresh_ns, but a third of dead_after_ns at most, so that an idle
   *  peer is never declared dead for want of it. */
  uint64_t keepalive_ns() const { return std::min(cfg_.ack_refresh_ns, cfg_.dead_after_ns / 3); }
  /** How often a peer declared dead is asked whether it is back (a HELLO). */
  uint64_t dead_probe_ns() const { return std::max(cfg_.rto_initial_ns, cfg_.dead_after_ns / 4); }
  /** Write a HELLO or HELLO_ACK (with its body) into txbuf_. @return its length. */
  size_t encode_hello(const Peer& p, FrameType t, uint64_t dst_token, Seq seq, Seq ack, uint32_t echo = 0);
  /** @return false (counted, the application told) when HELLO @p h states a frame size
   *  other than ours, or a largest message below one queued before the session: refused. */
  bool settings_agree(Peer& p, const Header& h);
  PeerSettings own_settings() const;
  bool send_hello(Peer& p, bool ack, uint64_t now);
  bool session_ok(Peer& p, const Header& h);
  void confirm(Peer& p);
  /** A HELLO_ACK that confirms our ISN and names our latest HELLO: the handshake's round
   *  trip as min_rtt's floor. */
  void sample_handshake(Peer& p, const Header& h, uint64_t now);

  // engine_rx.cc: ACK side and receive side of a data/ack frame.
  bool records_ok(std::span<const uint8_t> body, Seq first, uint8_t allowed = rec_flag::kAll);
  /** Call @p fn(record) for each record of a body records_ok() passed (from its cache). */
  template <typename Fn>
  void each_record(std::span<const uint8_t> body, Seq first, uint8_t allowed, Fn&& fn) {
    if (recs_whole_) {
      for (uint32_t i = 0; i < recs_n_; ++i) fn(recs_[i]);
      return;
    }
    RecordReader rd(body, first, allowed);
    Record rec;
    while (rd.next(&rec) == 1) fn(rec);
  }
  void on_ack_info(Peer& p, const Header& h, std::span<const uint8_t> frame, uint64_t now);
  void release_acked(Peer& p, Seq ack, uint64_t now);
  bool sample_ok(const Peer& p, const TxFrame& f, Seq s) const;
  void detect_losses(Peer& p, const Header& h, std::span<const uint8_t> frame, Seq sack_max,
                     bool sack_complete, uint64_t now);
  uint32_t mark_lost_by_order(Peer& p, uint64_t now);
  void on_records(Peer& p, const Header& h, std::span<const uint8_t> body, uint64_t now);
  void on_unit(Peer& p, Seq s, uint8_t flags, std::span<const uint8_t> payload, uint64_t now);
  void try_deliver(Peer& p);
  bool deliver_one(Peer& p, std::span<const uint8_t> m);
  bool deliver_direct(Peer& p, uint8_t flags, std::span<const uint8_t> payload);
  void add_fragment(Peer& p, uint8_t flags, std::span<const uint8_t> payload);
  bool deliver_rebuilt(Peer& p);
  void drop_reassembly(Peer& p);
  void release_held(Peer& p);
  /** Queue for a repair the frames in flight over [from, to): those sent by @p sent_by, or
   *  with @p rack, those RACK calls lost. @return how many. */
  uint32_t mark_lost(Peer& p, Seq from, Seq to, uint64_t sent_by, const RackTimes* rack = nullptr);
  /** Queue for a repair every frame in flight sent by @p sent_by. @return how many. */
  uint32_t mark_sent_by(Peer& p, uint64_t sent_by);
  void lose_frame(Peer& p, uint32_t pos);
  void nack_request(Peer& p, uint64_t now);
  void learn_peer(Peer& p, const Header& h);

  // engine_sack.cc: the SACK block, built and taken.
  uint32_t build_sack(const Peer& p, uint8_t* buf, uint32_t max) const;
  bool take_sack(Peer& p, const Header& h, std::span<const uint8_t> frame, Seq* sack_max,
                 uint64_t* sample_tx);
  void mark_sacked(Peer& p, Seq from, Seq to, uint64_t* sample_tx);
  uint32_t mark_holes(Peer& p, const Header& h, std::span<const uint8_t> frame, Seq sack_max, uint64_t now);

  // engine_tx.cc: frame building and flushing.
  uint32_t flush(Peer& p, uint64_t now, bool all);
  size_t begin_frame(Peer& p, bool with_records, FrameMeta* m);
  bool transmit(Peer& p, size_t len, FrameType t, const FrameMeta* m, uint64_t now);
  bool transmitted(Peer& p, bool taken, uint64_t now);
  void carried(Peer& p, FrameType t, const FrameMeta& m, uint64_t now);
  bool want_data(const Peer& p, uint64_t now, bool all) const;
  /** @return whether the delay cap lets a new frame go at @p now (delay_cap.h). */
  bool delay_allows(const Peer& p, uint64_t now) const;
  /** @return whether the next DATA frame should time the queueing delay (delay_cap.h). */
  bool delay_probe(const Peer& p) const;
  /** @return whether the next DATA frame should ask for an ACK for the cap (a probe, or to
   *  keep ACKs coming while the cap holds frames back). */
  bool delay_ask(const Peer& p) const;
  int resend_lost(Peer& p, uint64_t now);
  bool send_new_frame(Peer& p, size_t hdr_len, const FrameMeta* m, uint64_t now);
  bool send_held(Peer& p, uint32_t pos, bool again);
  Peer* sendable(NodeId id, size_t len, int* rc);
  uint32_t units_of(size_t len) const;
  template <typename Push>
  void queue(Peer& p, std::span<const uint8_t> msg, uint32_t units, uint32_t flags, uint64_t now_ns, Push&& push);
  void settle_ext(Peer& p);
  void commit_frame(Peer& p, uint32_t pos, uint64_t now);
  void update_ack_required(Peer& p);

  // engine_group.cc: group streams.
  void init_groups();
  GroupTx* find_tx(GroupId g);
  const GroupTx* find_tx(GroupId g) const;
  GroupRx* find_rx(NodeId src, GroupId g);
  GroupWant* find_want(GroupId g);
  bool admit(GroupTx& t, Peer& p, bool from_oldest, uint64_t now);
  void push_view(GroupTx& t, GroupEvent::Kind kind, NodeId member, Seq position, uint64_t now);
  void remove_member(GroupTx& t, size_t i, GroupEvent::Kind why, uint64_t now);
  void group_release(GroupTx& t);
  void group_flush(GroupTx& t, uint64_t now, bool all);
  void group_repair(GroupTx& t, Peer& p, Seq from, uint32_t n, uint64_t now);
  void flight_hole(GroupTx& t, uint32_t frames);
  void send_ctl(Peer& p, uint8_t op, GroupId g, uint32_t a, uint32_t b, uint8_t flags = 0);
  void flush_ctl();
  void ctl_frame_out(Peer& p, uint8_t* buf, uint32_t n);
  void nack_release(GroupTx& t, uint64_t now, uint32_t units, uint64_t bytes);
  void tell_lost(GroupTx& t, Peer& p, Seq from, uint32_t n);
  void lose_units(GroupRx& r, Seq a, uint32_t n);
  bool deliver_lost(GroupRx& r);
  bool nack_end(Peer& p, GroupRx& r, Seq end, uint64_t now);
  void nack_close_if_done(Peer& p, GroupRx& r);
  void on_group_data(const Header& h, std::span<const uint8_t> frame, std::span<const uint8_t> body,
                     uint64_t now);
  void on_group_parity(const Header& h, std::span<const uint8_t> body, uint64_t now);
  /** @return the stream group frame @p h is for, its source checked, and the source in
   *  @p src; nullptr (the reason counted) for none. */
  GroupRx* stream_of(const Header& h, Peer** src);
  // engine_parity.cc: parity repair of group streams (3.7.7).
  void parity_frame_out(GroupTx& t, std::span<const uint8_t> frame, uint64_t now);
  ParityTag parity_block_open(GroupTx& t, Seq first);
  bool stopped_in_block(const GroupTx& t) const;
  uint64_t parity_hold(const Peer& p, const GroupRx& r) const;
  bool parity_passed(const GroupRx& r, const ParityAcc& b) const;
  bool parity_older_lacks(const GroupRx& r, const ParityAcc& b) const;
  void parity_released(GroupTx& t, uint32_t frames);
  void send_parity(GroupTx& t, uint64_t now);
  uint32_t parity_withheld(GroupTx& t, uint32_t first, uint32_t bits, uint64_t now);
  void parity_close(GroupTx& t, uint64_t now);
  void repair_frames(GroupTx& t, Peer& p, uint32_t first, uint32_t bits, uint8_t flags, uint64_t now);
  ParityAcc* parity_block(GroupRx& r, ParityTag tag);
  ParityAcc* parity_frame_in(const Peer& p, GroupRx& r, const Header& h, std::span<const uint8_t> frame,
                             uint64_t now);
  void parity_rebuild(Peer& p, GroupRx& r, ParityAcc& b, uint64_t now);
  void parity_ask(Peer& p, GroupRx& r, uint64_t now);
  void parity_schedule(const Peer& p, GroupRx& r, uint64_t now);
  void parity_bound(GroupRx& r, uint32_t first, uint32_t no);
  void on_group_ctl(Peer& p, std::span<const uint8_t> body, uint64_t now);
  bool on_source_ctl(Peer& p, const GroupCtl& e, uint64_t now);
  void answer_forgotten(Peer& p, const GroupCtl& e);
  bool remember_interest(NodeId who, GroupId g);
  void repair_round(GroupTx& t, uint64_t now);
  /** Group frames go once to the group (the sink can, and the node wants it). */
  bool multicast_ok() const { return cfg_.group_multicast && frames_->multicast(); }
  void end_member(GroupTx& t, GroupMember& m, uint64_t now);
  void note_gap(GroupRx& r, Seq from, Seq to, uint64_t now);
  void nack_new_gaps(Peer& p, GroupRx& r, uint64_t now);
  bool on_member_ctl(Peer& p, const GroupCtl& e, uint64_t now);
  void group_unit(Peer& p, GroupRx& r, Seq s, uint8_t flags, std::span<const uint8_t> payload,
                  uint64_t now);
  void group_deliver(GroupRx& r);
  void end_stream(GroupRx& r, GroupEvent::Why why, Seq end_at = 0, bool leave = false);
  void poll_ending(GroupRx& r, uint64_t now);
  void group_peer_gone(Peer& p, GroupEvent::Why why);
  void group_poll(uint64_t now);
  void poll_source(GroupTx& t, uint64_t now);
  /** Since when member @p m of @p t has held the stream back (its expiry counts from it). */
  uint64_t held_back_since(const GroupTx& t, const GroupMember& m) const;
  void ask_first_hole(Peer& p, GroupRx& r, uint64_t now);
  void poll_member(GroupRx& r, uint64_t now);
  void poll_wants(uint64_t now);
  void event(GroupEvent::Kind kind, NodeId src, GroupId g, NodeId member, uint32_t view, Seq pos,
             GroupEvent::Why why = GroupEvent::kNone);

  // engine_timer.cc.
  void run_timers(Peer& p, uint64_t now);
  void on_rto(Peer& p, uint64_t now);
  bool credit_starved(const Peer& p) const;
  void arm_tail_probe(Peer& p, uint64_t now);
  void on_tail_probe(Peer& p);
  uint64_t peer_deadline(const Peer& p) const;

  Config cfg_;
  FrameSink* frames_;
  AppSink* app_;
  Rng rng_;
  uint32_t isns_drawn_ = 0;  ///< new_isn() with a fixed Config::initial_seq
  uint64_t token_;
  uint32_t unit_cap_;
  uint32_t ack_sack_max_;  ///< SACK ranges an ACK frame carries (a DATA frame: max_sack)
  uint32_t ack_req_spacing_;  ///< units between ACK requests in ACK-required state
  uint64_t rebuild_above_;    ///< app_->rebuild_above(), asked once
  uint64_t now_ = 0;
  uint8_t paths_used_ = 1;  ///< bit n: a data frame went on path n (FrameSink::sent_path())
  std::vector<std::unique_ptr<Peer>> peers_;
  std::unordered_map<NodeId, uint32_t> index_;
  Peer* last_found_ = nullptr;  ///< find()'s one-entry cache
  std::unique_ptr<uint8_t[]> txbuf_;  ///< a header, or a frame without records, being built
  // The answers to a GROUP_CTL frame's entries, gathered into as few frames as fit (a frame
  // of N entries draws N entries back at most, never N frames): ctl_to_ is the peer it came
  // from while its entries are handled, ctl_n_ the entries waiting in ctlbuf_.
  std::unique_ptr<uint8_t[]> ctlbuf_;
  Peer* ctl_to_ = nullptr;
  uint32_t ctl_n_ = 0;
  // The records of the data frame being received, decoded once by records_ok() and used by
  // on_records() (a frame of more records than fit is decoded again there).
  static constexpr uint32_t kRecordCache = 512;
  // Units of at least this many bytes received out of order are held in their frame when the
  // sink can (FrameSink::hold_frame()), smaller ones copied into the window.
  static constexpr size_t kHoldFrom = 256;
  std::unique_ptr<Record[]> recs_;
  uint32_t recs_n_ = 0;
  bool recs_whole_ = false;
  FrameRoom room_;                    ///< the sink's room around held frames
  uint32_t frames_per_peer_;          ///< held frame slots of each send window
  PeerCounters orphan_;  ///< rejects before a peer was identified

  // Groups (engine_group.cc), set aside by create().
  std::unique_ptr<GroupTx[]> gtx_;
  std::unique_ptr<GroupRx[]> grx_;
  std::vector<GroupWant> wants_;                           ///< capacity group_streams
  std::vector<std::pair<NodeId, GroupId>> interests_;      ///< joins of groups not open yet
  std::vector<uint16_t> interest_count_;                   ///< per peer: its interests_ (scratch)
  /** Streams this node sent whose slot was freed: where each ended, to tell a member that
   *  asks after it (its END or EXPIRED lost) where, not at its own position. */
  Recent<GroupId, Seq, 16> ends_;
  uint64_t group_deadline_ = ~uint64_t{0};                 ///< group_poll()'s next work
  GroupCounters gc_;
  uint64_t peers_max_message_ = UINT64_MAX;  ///< the least Peer::peer_max_message (group_max_message())
  uint32_t peer_settings_gen_ = 0;           ///< grows when a peer's stated max_message changes
  std::unique_ptr<uint8_t[]> rebuilt_;  ///< a frame rebuilt from parity (mtu bytes)
};

}  // namespace imago::rel
