/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Engine-private state of group streams (reliable multicast, docs/PROTOCOL.md 3.7).
 *
 * A group stream is one source's messages to one group: a sequence space of its own, frames
 * sent once to the group (or, where the frame sink cannot multicast, to each member), and
 * repairs by unicast to the member that asks. The source keeps every frame until each member
 * of its view has acknowledged it, so the slowest live member paces it; a member that holds
 * data back for group_expire_ns is expired. A member keeps a receive window and a
 * reassembly buffer per stream. Views change in the stream itself: a join, leave or expiry
 * is a record every member meets in the same place relative to the data.
 * Everything here is allocated by Engine::create() (Config::group_sources, group_streams).
 */
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "reliability/flight_cap.h"
#include "reliability/parity.h"
#include "reliability/reassembly.h"
#include "reliability/recv_window.h"
#include "reliability/send_window.h"
#include "reliability/wire.h"

namespace imago::rel {

/** One member in a source's view of its group stream. */
struct GroupMember {
  NodeId id;
  Seq start;             ///< its first unit
  Seq ack;               ///< it holds every unit before this
  uint64_t progress_ns;  ///< when it last acknowledged new units, or joined
  uint64_t status_ns;    ///< when it was last sent a JOIN_OK or STATUS
  bool heard;            ///< it acknowledged since it joined (its JOIN_OK arrived)
  Seq told = 0;          ///< a NACK stream: the tail its last STATUS gave
  uint8_t told_times = 0;  ///< how many STATUS gave that tail
  uint32_t rebuilt = 0;    ///< frames it said it rebuilt from parity (its ACKs' b)
};

/** RxSlot::rec_flags of a unit its NACK stream's source said is gone (never on the wire). */
inline constexpr uint8_t kLostUnit = 0x80;

/** A frame a member asked for (NACK), waiting for the repair round. */
struct RepairAsk {
  Seq first;     ///< the frame's first unit (its position may change meaning once released)
  NodeId member;
  bool operator<(const RepairAsk& o) const { return first != o.first ? seq_lt(first, o.first) : member < o.member; }
};

/** A group this node sends to. */
struct GroupTx {
  GroupId g = 0;  ///< 0: a free slot
  SendWindow tx;
  std::vector<GroupMember> members;  ///< capacity max_peers, set aside at create()
  uint32_t view = 0;
  uint64_t unsent_bytes = 0;
  uint32_t fast_pending = 0;
  std::vector<RepairAsk> asks;  ///< capacity kMaxAsks, set aside at create()
  uint64_t repair_due = ~uint64_t{0};
  bool nack = false;     ///< NACK-based: frames freed by age and room, not by ACKs
  bool closing = false;  ///< group_close(): no more sends; freed once every member left
  /** Every member starts beyond what was sent (admitted while messages waited to go out):
   *  none acknowledges them, so each flush releases them (group_release() says). */
  bool ahead = false;
  uint64_t closed_ns = 0;
  // Parity (3.7.7): frames are numbered as they first go out; a block is open while ptx.tag.k.
  uint32_t frame_no = 0;
  ParityAcc ptx;
  uint64_t ptx_ns = 0;      ///< when the open block's last frame went out
  Seq ptx_seq = 0;          ///< the open block's first unit
  bool stop_seen = false;   ///< parity_close() found the stream stopped in the block once
  std::unique_ptr<uint8_t[]> ptx_mem;  ///< mtu bytes, set aside at create()
  bool parity_on = false;   ///< new blocks get parity: losses were frequent
  uint32_t parity_k = 0;    ///< frames in a new block: cheapest_block() at the losses judged
  uint32_t losses = 0;      ///< frames members asked for or rebuilt since the last decision
  uint32_t judged = 0;      ///< frames released since then
  uint64_t judged_ns = 0;   ///< when the last decision was made (0: none yet)
  uint32_t parities = 0;    ///< parity frames sent since then
  uint64_t loss_acc = 0;    ///< losses of the last judgements, each weighing 3/4 of the next
  uint64_t block_acc = 0;   ///< blocks of the last judgements, weighed alike
  uint64_t frame_acc = 0;   ///< frames of the last judgements, weighed alike
  /** The parity frames sent lately: a member's ask without its block's parity may have
   *  crossed one (repair_frames()). */
  struct SentParity {
    uint32_t first = 0, frames = 0;  ///< the block's first frame number, the frames it covers
    uint64_t ns = 0;
  };
  static constexpr size_t kSentParities = 8;
  SentParity sent_par[kSentParities];
  uint32_t sent_par_n = 0;  ///< parity frames recorded (the next goes at n % kSentParities)
  FlightCap flight;  ///< frames in flight after a member overflowed (3.7.8)
};

/** A (source, group) stream this node receives. */
struct GroupRx {
  /** kEnding: the stream ended (end_stream()); what it holds in order is delivered, then its
   *  kEnded event, as the application takes them; then kLeaving (end_leave) or kFree. */
  enum class State : uint8_t { kFree, kActive, kEnding, kLeaving };
  State state = State::kFree;
  GroupId g = 0;
  NodeId src = 0;
  RecvWindow rx;
  Reassembly reasm;
  Seq start = 0;                  ///< where its stream began for us (JOIN_OK): our LEAVE names it
  Seq tail = 0;                   ///< one past the highest unit the source said it sent
  uint64_t ack_deadline = ~uint64_t{0};
  uint64_t last_nack_ns = 0;      ///< the first hole's timer: a block's ask restarts it too
  uint64_t first_asked_ns = 0;    ///< the first hole last asked for by name (or appeared)
  uint64_t nack_gap_ns = 0;  ///< between NACKs of the same hole: doubles while unanswered
  Seq last_nack_seq = 0;
  uint64_t leave_ns = 0;
  uint32_t leave_tries = 0;
  uint8_t end_why = 0;     ///< kEnding: GroupEvent::Why (kClosed: unless short of end_at)
  bool end_leave = false;  ///< kEnding: say LEAVE once the end is told
  Seq end_at = 0;          ///< kEnding, kClosed; a NACK stream's end_seen: where the stream ended
  bool end_seen = false;   ///< a NACK stream: END came; it ends CLOSED once delivered to end_at
  // Holes that appeared since the last poll (a unit beyond all held, a tail beyond it) lie at
  // or above new_from: each is asked for once at the next poll; the first hole alone is asked
  // again, on a timer.
  Seq new_from = 0;
  uint64_t new_due = 0;  ///< when they are asked (group_nack_backoff_ns)
  bool new_gaps = false;
  bool nack_now = false;    ///< new holes: poll at once
  // The repair round trip, from a hole's first ask to its filling (a hole asked again only
  // raises it: Karn's rule, poll_member()): how long to wait before asking the first hole again.
  uint64_t repair_rtt_ns = 0;
  // How long after its last frame here the parity of a block the source closed early came
  // (smoothed): the source's wait for our ACK and its own scheduling, which no round trip
  // measured on the session shows on a loaded machine.
  uint64_t parity_lag_ns = 0;
  uint64_t probe_ns = 0;
  Seq probe_seq = 0;
  bool probe_active = false, probe_clean = false;
  bool blocked = false;  ///< the application refused a message: retry on poll
  bool nack = false;     ///< the source said the stream is NACK-based: one ACK, then none
  bool acked = false;    ///< NACK stream: its one ACK went out
  bool skip_cont = false;  ///< a unit was lost: the rest of its message is dropped too
  // Parity (3.7.7): the blocks followed, the highest frame number seen, frames rebuilt.
  ParityAcc blocks[kParityBlocks];
  std::unique_ptr<uint8_t[]> blocks_mem;  ///< kParityBlocks x mtu bytes, set aside at create()
  uint32_t hi_frame = 0;
  bool hi_valid = false;
  bool in_block = false;   ///< the frame being taken is in a block: its holes are the block's to ask
  uint32_t rebuilt = 0;    ///< frames rebuilt from parity (told in ACKs)
  uint64_t hold_until = 0;  ///< the first hole is not asked again before (its block asks first)
};

/** A group this node joined: asked of every peer until each answered. */
struct GroupWant {
  GroupId g = 0;
  bool from_oldest = false;
  uint64_t asked_ns = 0;       ///< last round of JOINs
  std::vector<uint8_t> asked;  ///< per peer (index of add_peer()): 1 answered
};

/** Engine-wide counters of group streams. */
struct GroupCounters {
  uint64_t msgs_sent = 0;       ///< messages accepted by group_send()
  uint64_t data_frames = 0;     ///< group frames first sent (once per frame with multicast)
  uint64_t unicast_copies = 0;  ///< first sends to each member where the sink cannot multicast
  uint64_t repair_frames = 0;   ///< frames resent on a NACK (unicast to one asker, or once to the group)
  uint64_t repair_multicast = 0;  ///< of repair_frames: sent once to the group (several asked)
  uint64_t status_sent = 0;     ///< STATUS and repeated JOIN_OK entries to lagging members
  uint64_t joins = 0;           ///< members admitted
  uint64_t leaves = 0;          ///< members that left
  uint64_t expiries = 0;        ///< members expired (silent, or their session ended)
  uint64_t msgs_received = 0;   ///< group messages delivered
  uint64_t acks_sent = 0;
  uint64_t nacks_sent = 0;
  uint64_t dup_received = 0;
  uint64_t overflow = 0;        ///< units beyond the receive window (a source that ignores it)
  uint64_t streams_full = 0;    ///< JOIN_OKs refused: every receive stream in use
  uint64_t nack_freed = 0;      ///< NACK streams: frames freed unacknowledged (age or room)
  uint64_t lost_told = 0;       ///< NACK streams: LOST entries sent for freed units asked for
  uint64_t units_lost = 0;      ///< NACK streams: units this node skipped, reported as lost
  uint64_t lost_events = 0;     ///< NACK streams: LOST events given to the application
  uint64_t parity_sent = 0;     ///< parity frames sent (3.7.7; counted in repair_frames too)
  uint64_t parity_rebuilt = 0;  ///< frames this member rebuilt from a parity frame
  uint64_t parity_bad = 0;      ///< parity frames malformed, or rebuilding a frame that failed its checks
  uint64_t nack_frames_sent = 0;  ///< NACK_FRAMES entries sent (frames of a parity block asked)
  uint64_t interests_full = 0;  ///< JOINs of groups not open here met a full table (remembered or not)
  uint64_t flight_cuts = 0;     ///< a member's NACK of a long hole halved the frames in flight (3.7.8)
};

/** Call @p fn(name, value) for every counter of @p c, in a stable order (the names are the
 *  fields', as docs/PROTOCOL.md 3.7.3 and 3.7.4 name them). */
template <typename Fn>
void for_each_counter(const GroupCounters& c, Fn&& fn) {
  // Every field is a uint64_t and each is named below: a counter added to the struct and not
  // here fails this, so none is kept that an operator cannot read.
  static_assert(sizeof(GroupCounters) == 25 * sizeof(uint64_t), "name the new group counter here");
  fn("msgs_sent", c.msgs_sent), fn("data_frames", c.data_frames), fn("unicast_copies", c.unicast_copies);
  fn("repair_frames", c.repair_frames), fn("repair_multicast", c.repair_multicast);
  fn("status_sent", c.status_sent), fn("joins", c.joins), fn("leaves", c.leaves), fn("expiries", c.expiries);
  fn("msgs_received", c.msgs_received), fn("acks_sent", c.acks_sent), fn("nacks_sent", c.nacks_sent);
  fn("dup_received", c.dup_received), fn("overflow", c.overflow), fn("streams_full", c.streams_full);
  fn("nack_freed", c.nack_freed), fn("lost_told", c.lost_told), fn("units_lost", c.units_lost);
  fn("lost_events", c.lost_events), fn("parity_sent", c.parity_sent), fn("parity_rebuilt", c.parity_rebuilt);
  fn("parity_bad", c.parity_bad), fn("nack_frames_sent", c.nack_frames_sent), fn("interests_full", c.interests_full);
  fn("flight_cuts", c.flight_cuts);
}

}  // namespace imago::rel
