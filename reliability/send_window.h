/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Per-peer send buffer (Pupa's primary send buffer): a fixed ring of unit descriptors and a
 * fixed ring of held frames, both allocated once.
 *
 * Sequence numbers (mod 2^32) split the unit ring like Pupa's low/sent/high pointers:
 *   [una, nxt)  transmitted at least once, waiting for an ACK
 *   [nxt, end)  queued by the application, not yet transmitted
 * A unit is copied once, as a record, into a frame slot; each frame holds a run of
 * consecutive units and is transmitted whole, the same bytes on every retransmission
 * (frame_sink.h). Frames, like units, are released only from the front (cumulative ACK), so
 * the frame ring is a FIFO: [oldest, next unsent) sent, then the unsent ones, the last of
 * which is open and takes more records until it is sent or full. The memory a frame is
 * built in, its slot, comes from a stack of free slots (the one freed last, still warm in
 * the cache, is used first); a released frame whose slot the sink still uses (a receiver on
 * the same host holds it) parks the slot until the sink lets go, and spare slots stand in.
 * Transmission state is kept per frame (a unit descriptor says only where the unit is): a
 * frame's units go out, arrive and vanish together. Frames in flight (sent, not wholly
 * acknowledged or SACKed, not queued for a repair) are linked in the order they were last
 * transmitted, for loss detection by time (RACK).
 *
 * A large message may also be queued by reference (push_ext(), when the sink chains frames:
 * FrameSink::chains()): each of its units is a frame of its own whose slot holds the headers
 * and whose payload stays in the caller's buffer, sent from there on every transmission. The
 * buffer goes back (take_done()) once every one of its frames is acknowledged and the sink
 * let go of each frame's slot.
 */
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "reliability/codec.h"
#include "reliability/config.h"
#include "reliability/frame_sink.h"
#include "reliability/seq.h"
#include "reliability/seq_bitmap.h"

namespace imago::rel {

/** One unit (a message or a fragment): where it is. Every other state is its frame's. */
struct TxUnit {
  uint32_t fpos;      ///< the frame holding it
  uint32_t poff;      ///< its payload's offset in that frame's slot
  uint16_t len;       ///< payload bytes
  uint8_t rec_flags;  ///< rec_flag::kMore/kCont/kFast
};

/**
 * One held frame: a run of units, and once sent the bytes that went out and the state of
 * its transmissions. A frame's units arrive or vanish together, so loss detection, repair,
 * RTT samples and the in-flight list are per frame, not per unit.
 */
struct TxFrame {
  Seq first;             ///< its first unit
  uint32_t n;            ///< units in it
  uint32_t rec_len;      ///< record bytes written so far
  uint32_t start;        ///< offset of the frame's first byte in the slot (once sealed)
  uint32_t len;          ///< frame bytes (once sealed)
  uint32_t slot;         ///< the slot it is built in
  uint64_t enq_ns;       ///< when the application queued its first unit (coalescing age)
  uint64_t first_tx_ns;  ///< first transmission (RTT sample when tx_count == 1)
  uint64_t last_tx_ns;   ///< last transmission (retransmission guard)
  uint64_t number;       ///< number of its last transmission (per peer, increasing)
  uint32_t older;        ///< in-flight list: the frame transmitted just before this one
  uint32_t newer;        ///< in-flight list: the frame transmitted just after this one
  uint16_t tx_count;
  uint16_t fast;         ///< units queued with rec_flag::kFast
  bool retx;             ///< queued for retransmission
  bool in_flight;        ///< sent, not yet delivered, not queued for a repair
  bool probe = false;    ///< queued by a tail-loss probe (a guess, not a loss seen)
  uint8_t path = 0;      ///< the path its last transmission took (FrameSink::sent_path())
  const uint8_t* ext = nullptr;  ///< by reference: its one unit's payload, outside the slot
  uint32_t ext_len = 0;          ///< ...its bytes (the last ext_len of rec_len)
  /** Its delivery proves transmission `number - proof_back` got through (RACK): 0 after a
   *  first transmission or a probe; after a repair, the number its delivery proved before
   *  (the original may still be on its way, reordered: crediting the repair's number would
   *  call every frame sent before the repair lost). */
  uint32_t proof_back = 0;
};

class SendWindow {
 public:
  SendWindow() = default;
  SendWindow(const SendWindow&) = delete;
  SendWindow& operator=(const SendWindow&) = delete;
  ~SendWindow() { release_memory(); }

  /** @return the frames a window of @p c needs: for send_buffer_bytes of records, and for a
   *  message of max_message_size bytes at one fragment a frame. */
  static uint32_t frames_for(const Config& c) {
    const uint64_t budget = record_budget(c.mtu, c.max_sack), cap = unit_capacity(c);
    return static_cast<uint32_t>(std::max((c.send_buffer_bytes + budget - 1) / budget,
                                          (c.max_message_size + cap - 1) / cap) + 1);
  }

  /**
   * Allocate @p slots unit descriptors and @p frames frame slots for frames of at most @p mtu
   * bytes with up to @p max_sack SACK ranges, with @p room around each for @p sink (control
   * path). Slot memory comes from the sink when it offers it, else from the heap.
   */
  void init(uint32_t slots, uint32_t frames, uint32_t mtu, uint32_t max_sack, FrameRoom room,
            FrameSink* sink) {
    slots_ = slots;
    assert(slots != 0 && (slots & (slots - 1)) == 0);  // Engine::create checks it
    mask_ = slots - 1;  // a mask, not a division, on every access
    units_ = std::make_unique<TxUnit[]>(slots);
    sacked_.init(slots);
    frames_n_ = frames;
    frames_ = std::make_unique<TxFrame[]>(frames);
    // Spares for slots parked in the sink's hands: a quarter of the ring, 64 to 1024.
    slots_n_ = frames + std::min(1024u, std::max(64u, frames / 4));
    free_ = std::make_unique<uint32_t[]>(slots_n_);
    parked_ = std::make_unique<uint32_t[]>(slots_n_);
    slot_ext_ = std::make_unique<uint32_t[]>(slots_n_);
    std::fill_n(slot_ext_.get(), slots_n_, kNoExt);
    ext_ = std::make_unique<ExtMsg[]>(frames);
    ext_free_ = std::make_unique<uint32_t[]>(frames);
    ext_free_n_ = 0;
    for (uint32_t i = frames; i-- > 0;) ext_free_[ext_free_n_++] = i;
    done_ = std::make_unique<uint64_t[]>(size_t{2} * frames);  // the engine takes them after every release
    done_n_ = 0;
    free_n_ = parked_n_ = 0;
    for (uint32_t i = slots_n_; i-- > 0;) free_[free_n_++] = i;
    rec_budget_ = record_budget(mtu, max_sack);
    rec_off_ = align64(room.priv) + room.head + (mtu - rec_budget_);
    slot_bytes_ = align64(rec_off_ + rec_budget_ + room.tail);
    priv_ = room.priv;
    const size_t bytes = size_t{slots_n_} * slot_bytes_;
    sink_ = sink;
    mem_ = sink != nullptr ? sink->frame_memory_alloc(bytes) : nullptr;
    if (mem_ == nullptr) {
      own_ = std::make_unique_for_overwrite<uint8_t[]>(bytes + 64);
      mem_ = own_.get() + (64 - reinterpret_cast<uintptr_t>(own_.get()) % 64) % 64;
    }
    for (uint32_t i = 0; i < slots_n_; ++i) std::memset(slot(i), 0, priv_);
  }
  /** Empty the window and restart sequence numbers at @p isn. */
  void reset(Seq isn) {
    for (; fr_held_ > 0; --fr_held_, fr_head_ = wrap(fr_head_ + 1)) put_slot(frames_[fr_head_].slot);
    una_ = nxt_ = end_ = isn;
    flight_n_ = retx_n_ = 0;
    fr_head_ = fr_nxt_ = 0;
    fr_held_ = fr_sent_ = 0;
  }
  /** @return true when the slot memory is the sink's: held frames go out through send_held(). */
  bool sink_memory() const { return own_ == nullptr; }

  Seq una() const { return una_; }
  Seq nxt() const { return nxt_; }
  Seq end() const { return end_; }
  uint32_t used() const { return end_ - una_; }
  uint32_t free_slots() const { return slots_ - used(); }
  uint32_t free_frames() const { return frames_n_ - fr_held_; }
  uint64_t free_bytes() const { return uint64_t{free_frames()} * rec_budget_; }
  uint32_t slots() const { return slots_; }
  uint64_t capacity_bytes() const { return uint64_t{frames_n_} * rec_budget_; }
  bool has_unsent() const { return nxt_ != end_; }
  /** @return the frames sent and not yet released, and the frames the window holds at most. */
  uint32_t sent_frames() const { return fr_sent_; }
  /** @return the frames in flight: sent, not known delivered, not queued for a repair. */
  uint32_t flight_frames() const { return flight_n_; }
  uint32_t frames() const { return frames_n_; }
  bool has_outstanding() const { return una_ != nxt_; }
  /** @return true when @p s was transmitted and is not yet acknowledged. */
  bool outstanding(Seq s) const { return seq_le(una_, s) && seq_lt(s, nxt_); }

  /** @return true when @p units units (one message of @p bytes) can be queued now: unit
   *  descriptors, and frame slots the sink no longer uses. */
  bool fits(uint32_t units, uint64_t bytes) {
    return room_for(units, units == 1 && open_room(bytes) ? 0 : units);
  }

  /** @return true when a message of @p units units can be queued by reference now: a
   *  frame and a free slot for each. */
  bool fits_ext(uint32_t units) { return ext_free_n_ != 0 && room_for(units, units); }
  /** Start a message by reference named @p cookie (caller checked fits_ext()). */
  void begin_ext(uint64_t cookie) {
    ext_cur_ = ext_free_[--ext_free_n_];
    ext_[ext_cur_] = ExtMsg{cookie, 0};
  }
  /** Queue one unit of the message begun by begin_ext() by reference: a frame of its own,
   *  the record header in its slot, @p p where it is (it must stay there until take_done()
   *  gives the message back). @return its sequence number. */
  Seq push_ext(std::span<const uint8_t> p, uint8_t rec_flags, uint64_t now) {
    open_frame(now);
    const uint32_t pos = wrap(fr_head_ + fr_held_ - 1);
    TxFrame& f = frames_[pos];
    const size_t h = encode_record_header(slot(f.slot) + rec_off_, rec_flags, end_, false, p.size());
    f.rec_len = static_cast<uint32_t>(h + p.size());
    f.n = 1;
    f.fast = (rec_flags & rec_flag::kFast) != 0;
    f.ext = p.data();
    f.ext_len = static_cast<uint32_t>(p.size());
    slot_ext_[f.slot] = ext_cur_;
    ++ext_[ext_cur_].frames;
    return add_unit(TxUnit{pos, 0, static_cast<uint16_t>(p.size()), rec_flags});
  }
  /** Hand over, through @p fn(cookie), the messages by reference settled since the last call. */
  template <typename F>
  void take_done(F&& fn) {
    for (uint32_t i = 0; i < done_n_; ++i) fn(done_[i]);
    done_n_ = 0;
  }
  /** @return whether messages by reference wait in parked slots or in take_done(). */
  bool ext_pending() const { return done_n_ != 0 || (parked_n_ != 0 && ext_free_n_ != frames_n_); }
  /** Free the parked slots the sink let go of (their messages by reference settle). */
  void reclaim() { unpark(); }

  /** @return true when the peer holds unit @p s out of order (SACK, selective repeat). */
  bool sacked(Seq s) const { return sacked_.test(s); }
  void set_sacked(Seq s) { sacked_.set(s); }
  /** @return which of the 64 units from @p s are SACKed (bit j: unit s + j). */
  uint64_t sacked_bits(Seq s) const { return sacked_.bits64(s); }
  /** @return the distance from @p s to the first unit of [s, s + n) not SACKed, or n. */
  uint32_t sacked_run(Seq s, uint32_t n) const { return sacked_.find(s, n, false); }

  const TxUnit& at(Seq s) const { return units_[s & mask_]; }
  std::span<const uint8_t> payload(const TxUnit& u) const {
    const TxFrame& f = frames_[u.fpos];
    return f.ext != nullptr ? std::span<const uint8_t>{f.ext, u.len} : std::span<const uint8_t>{slot(f.slot) + u.poff, u.len};
  }
  /** @return the frame holding unit @p s (one in [una, end)). */
  uint32_t fpos(Seq s) const { return units_[s & mask_].fpos; }

  /** Queue one unit as a record of the open frame, or of a new one (caller checked fits()).
   *  @return its sequence number. */
  Seq push(std::span<const uint8_t> p, uint8_t rec_flags, uint64_t now) {
    if (!open_room(p.size())) open_frame(now);
    const uint32_t pos = wrap(fr_head_ + fr_held_ - 1);
    TxFrame& f = frames_[pos];
    uint8_t* rec = slot(f.slot) + rec_off_ + f.rec_len;
    // Slots cycle through the whole window and are cold by the time they are reused: ask
    // for the lines a few records ahead, so the copies below do not wait for them.
    __builtin_prefetch(rec + 256, 1);
    const size_t h = encode_record_header(rec, rec_flags, end_, false, p.size());
    const uint32_t poff = rec_off_ + f.rec_len + static_cast<uint32_t>(h);
    if (!p.empty()) std::memcpy(slot(f.slot) + poff, p.data(), p.size());
    f.rec_len += static_cast<uint32_t>(h + p.size());
    f.n++;
    f.fast = static_cast<uint16_t>(f.fast + ((rec_flags & rec_flag::kFast) != 0));
    return add_unit(TxUnit{pos, poff, static_cast<uint16_t>(p.size()), rec_flags});
  }

  /** @return one past the last unit of frame @p pos. */
  Seq frame_end(uint32_t pos) const { return frames_[pos].first + frames_[pos].n; }
  /** @return the first unit of frame @p pos not yet acknowledged. */
  Seq frame_first(uint32_t pos) const {
    return seq_lt(frames_[pos].first, una_) ? una_ : frames_[pos].first;
  }
  /** @return how many units of frame @p pos the peer has neither acknowledged nor SACKed. */
  uint32_t frame_missing(uint32_t pos) const {
    uint32_t n = 0;
    for (Seq s = frame_first(pos); s != frame_end(pos); ++s) n += !sacked_.test(s);
    return n;
  }
  /** @return true when the peer holds every unit of frame @p pos. */
  bool frame_delivered(uint32_t pos) const {
    const Seq from = frame_first(pos);
    const uint32_t n = frame_end(pos) - from;
    return sacked_.find(from, n, false) == n;
  }
  /** Frame @p pos is lost: queue it for a repair. */
  void set_retx(uint32_t pos) {
    flight_remove(pos);
    frames_[pos].retx = true;
    ++retx_n_;
  }
  /** Frame @p pos needs no repair any more (resent, or the peer holds it all). */
  void clear_retx(uint32_t pos) {
    if (!frames_[pos].retx) return;
    frames_[pos].retx = false;
    frames_[pos].probe = false;
    --retx_n_;
  }
  /** @return the frames queued for a repair. */
  uint32_t retx_frames() const { return retx_n_; }
  /** @return when the application queued the first unsent unit (has_unsent() is true). */
  uint64_t unsent_enq_ns() const { return frames_[fr_nxt_].enq_ns; }
  /** @return the slot frame @p pos is built in (its priv bytes first). */
  uint8_t* slot_of(uint32_t pos) const { return slot(frames_[pos].slot); }
  TxFrame& frame(uint32_t pos) { return frames_[pos]; }
  const TxFrame& frame(uint32_t pos) const { return frames_[pos]; }
  /** @return where a slot's records begin (the frame header ends there). */
  uint32_t records_offset() const { return rec_off_; }
  /** @return slots set aside while the sink still uses them. */
  uint32_t parked() const { return parked_n_; }
  /** @return false when nothing is unsent, else the next frame to send. */
  bool next_unsent(uint32_t* pos) const {
    *pos = fr_nxt_;
    return fr_sent_ != fr_held_;
  }
  /** @return false unless the frame numbered @p no is sent and held, else its position. The
   *  caller numbers frames in TxFrame::number as they first go out, one after another (group
   *  streams: the frame numbers of docs/PROTOCOL.md 3.7.7). */
  bool sent_frame(uint32_t no, uint32_t* pos) const {
    if (fr_sent_ == 0) return false;
    const uint32_t d = no - static_cast<uint32_t>(frames_[fr_head_].number);
    if (d >= fr_sent_) return false;
    *pos = wrap(fr_head_ + d);
    return true;
  }
  /** The next unsent frame went out: its units are transmitted. */
  void mark_sent() {
    nxt_ += frames_[fr_nxt_].n;
    fr_nxt_ = wrap(fr_nxt_ + 1);
    ++fr_sent_;
  }

  /** Release every unit before @p ack, and the frames they filled (cumulative ACK; caller
   *  checked the range). */
  void release_to(Seq ack) {
    una_ = ack;
    while (fr_sent_ > 0 && ack - frames_[fr_head_].first >= frames_[fr_head_].n) {
      flight_remove(fr_head_);
      clear_retx(fr_head_);
      put_slot(frames_[fr_head_].slot);
      fr_head_ = wrap(fr_head_ + 1);
      --fr_held_, --fr_sent_;
    }
  }

  /** Frame @p pos was just (re)transmitted: it becomes the newest frame in flight. */
  void flight_push(uint32_t pos) {
    flight_remove(pos);
    TxFrame& f = frames_[pos];
    f.in_flight = true;
    f.older = newest_;
    if (flight_n_++ == 0)
      oldest_ = pos;
    else
      frames_[newest_].newer = pos;
    newest_ = pos;
  }
  /** Frame @p pos left flight: acknowledged, SACKed whole or queued for a repair. */
  void flight_remove(uint32_t pos) {
    TxFrame& f = frames_[pos];
    if (!f.in_flight) return;
    f.in_flight = false;
    if (--flight_n_ == 0) return;
    if (pos == oldest_)
      oldest_ = f.newer;
    else
      frames_[f.older].newer = f.newer;
    if (pos == newest_)
      newest_ = f.older;
    else
      frames_[f.newer].older = f.older;
  }
  /** @return false when nothing is in flight, else the frame transmitted longest ago. */
  bool flight_oldest(uint32_t* pos) const {
    *pos = oldest_;
    return flight_n_ != 0;
  }

  /** @return false when in-flight frame @p pos is the newest, else the one sent after it. */
  bool flight_newer(uint32_t pos, uint32_t* next) const {
    *next = frames_[pos].newer;
    return pos != newest_;
  }

  /** @return how many whole messages end in [una, end) (each counts once, by its last unit). */
  uint64_t messages_held() const {
    uint64_t n = 0;
    for (Seq s = una_; s != end_; ++s)
      if (!(at(s).rec_flags & 0x01)) ++n;  // rec_flag::kMore clear: a message's last unit
    return n;
  }
  size_t memory_bytes() const {
    return slots_ * sizeof(TxUnit) + sacked_.memory_bytes() + frames_n_ * sizeof(TxFrame) +
           slots_n_ * (3 * sizeof(uint32_t) + size_t{slot_bytes_}) +
           frames_n_ * (sizeof(ExtMsg) + sizeof(uint32_t) + 2 * sizeof(uint64_t));
  }

 private:
  static uint32_t align64(uint32_t v) { return (v + 63) & ~uint32_t{63}; }
  uint32_t wrap(uint32_t pos) const { return pos >= frames_n_ ? pos - frames_n_ : pos; }
  /** @return true when the open frame (the newest, unsent) takes a record of @p len more. */
  bool open_room(uint64_t len) const {
    if (fr_sent_ == fr_held_) return false;
    const TxFrame& f = frames_[wrap(fr_head_ + fr_held_ - 1)];
    return f.ext == nullptr && f.rec_len + record_header_size(len, false) + len <= rec_budget_;
  }
  void open_frame(uint64_t now) {
    if (free_n_ == 0) unpark();  // fits() made sure one is free
    frames_[wrap(fr_head_ + fr_held_)] = TxFrame{end_, 0, 0, 0, 0, free_[--free_n_], now, 0, 0, 0, 0, 0, 0, 0,
                                                 false, false, false, 0, nullptr, 0};
    ++fr_held_;
  }
  uint8_t* slot(uint32_t i) const { return mem_ + size_t{i} * slot_bytes_; }
  bool busy(uint32_t i) const { return sink_memory() && sink_->slot_busy(slot(i)); }
  /** @return true when @p units unit descriptors and @p frames free frames and slots (the
   *  parked ones the sink let go of freed now) are there. */
  bool room_for(uint32_t units, uint32_t frames) {
    if (units > free_slots() || frames > free_frames()) return false;
    if (free_n_ < frames) unpark();
    return free_n_ >= frames;
  }
  /** Record unit @p u as the next one. @return its sequence number. */
  Seq add_unit(const TxUnit& u) {
    units_[end_ & mask_] = u;
    sacked_.clear(end_);
    return end_++;
  }
  /** A frame let go of slot @p i: free, or parked while the sink still uses it. */
  void put_slot(uint32_t i) {
    if (busy(i))
      parked_[parked_n_++] = i;
    else
      free_slot(i);
  }
  void free_slot(uint32_t i) {
    free_[free_n_++] = i;
    const uint32_t e = slot_ext_[i];
    if (e == kNoExt) return;
    slot_ext_[i] = kNoExt;
    if (--ext_[e].frames != 0) return;  // the message's other frames still hold it
    assert(done_n_ < 2 * frames_n_);
    done_[done_n_++] = ext_[e].cookie;
    ext_free_[ext_free_n_++] = e;
  }
  /** Free the parked slots the sink let go of. */
  void unpark() {
    uint32_t keep = 0;
    for (uint32_t k = 0; k < parked_n_; ++k) {
      if (busy(parked_[k]))
        parked_[keep++] = parked_[k];
      else
        free_slot(parked_[k]);
    }
    parked_n_ = keep;
  }
  void release_memory() {
    if (own_ != nullptr || mem_ == nullptr) return;
    // A slot still referenced (a frame in a queue that outlives us) must not be freed under
    // it: keep the memory then.
    for (uint32_t i = 0; i < slots_n_; ++i)
      if (busy(i)) return;
    sink_->frame_memory_free(mem_);
  }

  std::unique_ptr<TxUnit[]> units_;
  SeqBitmap sacked_;  ///< units the peer holds out of order
  std::unique_ptr<TxFrame[]> frames_;
  std::unique_ptr<uint8_t[]> own_;  ///< slot memory when the sink gave none
  std::unique_ptr<uint32_t[]> free_;    ///< free slots, the one freed last on top
  std::unique_ptr<uint32_t[]> parked_;  ///< slots of released frames the sink still uses
  /** A message queued by reference: its name and its frames whose slots are not free yet. */
  struct ExtMsg {
    uint64_t cookie;
    uint32_t frames;
  };
  static constexpr uint32_t kNoExt = ~uint32_t{0};
  std::unique_ptr<uint32_t[]> slot_ext_;  ///< per slot: the ExtMsg its frame carries, or kNoExt
  std::unique_ptr<ExtMsg[]> ext_;         ///< one per frame at most
  std::unique_ptr<uint32_t[]> ext_free_;
  uint32_t ext_free_n_ = 0;
  uint32_t ext_cur_ = 0;                  ///< the one begin_ext() started
  std::unique_ptr<uint64_t[]> done_;      ///< settled, for take_done()
  uint32_t done_n_ = 0;
  uint8_t* mem_ = nullptr;
  FrameSink* sink_ = nullptr;
  uint32_t slots_ = 0;
  uint32_t mask_ = 0;  ///< slots_ - 1
  uint32_t frames_n_ = 0;
  uint32_t slots_n_ = 0;  ///< frames_n_ plus spares
  uint32_t free_n_ = 0;
  uint32_t parked_n_ = 0;
  uint32_t slot_bytes_ = 0;
  uint32_t rec_off_ = 0;     ///< records' offset in a slot
  uint32_t rec_budget_ = 0;  ///< record bytes one frame holds
  uint32_t priv_ = 0;
  uint32_t fr_head_ = 0;  ///< oldest held frame
  uint32_t fr_nxt_ = 0;   ///< next frame to send
  uint32_t fr_held_ = 0;  ///< frames held (sent and unsent)
  uint32_t fr_sent_ = 0;  ///< ...of which sent
  Seq una_ = 0;
  Seq nxt_ = 0;
  Seq end_ = 0;
  uint32_t oldest_ = 0;  ///< in-flight list ends, frame positions (valid while flight_n_ > 0)
  uint32_t newest_ = 0;
  uint32_t flight_n_ = 0;
  uint32_t retx_n_ = 0;  ///< frames with retx set
};

}  // namespace imago::rel
