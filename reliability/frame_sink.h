/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Where the engine writes frames (the dataplane, or the simulator), and the held frames it
 * keeps for retransmission.
 *
 * A data frame is built once, in a slot of the peer's send window: the application's bytes
 * are copied into it (the only copy on the send side), and the slot is what goes out, again
 * on every retransmission, until the peer acknowledges every unit in it. A sink that can send
 * a slot as it is (DPDK: an mbuf attached to it as an external buffer) overrides send_held();
 * the default copies it like any other frame.
 *
 * On receive, a sink that can keep a received frame alive (DPDK: a reference on its mbuf)
 * overrides hold_frame(): units behind a hole then wait in the frame they came in.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "reliability/wire.h"

namespace imago::rel {

/** Why send_held() sends a frame. */
namespace send_why {
inline constexpr uint8_t kFirst = 0;  ///< its first sending
inline constexpr uint8_t kLost = 1;   ///< again: the peer's ACKs or a timeout say it was lost
inline constexpr uint8_t kProbe = 2;  ///< again: a tail-loss probe, a guess (nothing heard for a while)
}  // namespace send_why

/** Paths a sink may send a peer's frames over (FrameSink::sent_path()). */
inline constexpr uint8_t kMaxPaths = 2;

/** What a sink wants around every held frame of a send window. */
struct FrameRoom {
  uint32_t priv = 0;  ///< bytes at the start of each slot for the sink's own use (zeroed once)
  uint32_t head = 0;  ///< bytes before the frame (a link header)
  uint32_t tail = 0;  ///< bytes after it (a trailer)
};

class FrameSink {
 public:
  virtual ~FrameSink() = default;
  /**
   * Transmit one frame to @p peer. The span is valid only during the call.
   * @return false on back-pressure (TX ring full): the engine keeps the state and retries.
   */
  virtual bool send_frame(NodeId peer, std::span<const uint8_t> frame) = 0;

  /** @return the room send_held() needs around each frame (asked once, by Engine::create). */
  virtual FrameRoom frame_room() const { return {}; }
  /**
   * Memory for the held frames of one peer (control path): @p bytes, 64-byte aligned, from
   * where the sink can send it (DPDK: hugepage memory another process may read too).
   * @return nullptr to let the engine allocate it on its own heap; then send_held() is
   *         never called and held frames go out through send_frame().
   */
  virtual uint8_t* frame_memory_alloc(size_t /*bytes*/) { return nullptr; }
  /** Give back what frame_memory_alloc() returned (the engine is being destroyed). */
  virtual void frame_memory_free(uint8_t* /*mem*/) {}
  /**
   * Transmit the held frame @p frame of the slot starting at @p slot (its priv bytes first),
   * for the first time when @p again is send_why::kFirst (0), else again and why. The bytes
   * stay as they are until the engine reuses the slot, which it does only once slot_busy()
   * says the sink let go of it. @return false on back-pressure, as send_frame().
   */
  virtual bool send_held(NodeId peer, uint8_t* slot, std::span<uint8_t> frame, uint8_t again) {
    (void)slot, (void)again;
    return send_frame(peer, frame);
  }
  /**
   * @return true when send_ext() sends a frame made of two parts as one, without copying
   * them (DPDK: two mbufs chained, each attached to its part): then the engine sends large
   * messages by reference (Engine::send_ref()). False (the default): never called.
   */
  virtual bool chains() const { return false; }
  /**
   * Transmit one frame made of @p head (its headers, in the held slot @p slot as
   * send_held()'s frame, or in the engine's memory when @p slot is nullptr) followed by
   * @p ext (the payload, in the sender's buffer), as send_held(). Both stay as they are
   * until the engine reuses the slot, which it does only once slot_busy() says the sink let
   * go of it (of both parts).
   */
  virtual bool send_ext(NodeId /*peer*/, uint8_t* /*slot*/, std::span<uint8_t> /*head*/,
                        std::span<const uint8_t> /*ext*/, uint8_t /*again*/) {
    return false;
  }
  /**
   * @return the path the data frame send_held() (or send_frame()) just took went on, below
   * kMaxPaths. Frames on one path arrive in the order they were sent; frames on two paths
   * overtake each other by as much as the paths' queues differ. So loss detection (RACK)
   * calls a frame lost when a later one got through on its own path, and on another path
   * only once an RTO has passed. A sink with one path (the default) returns 0.
   */
  virtual uint8_t sent_path() const { return 0; }
  /** @return true while a frame sent from @p slot is still in use by the sink or beyond it
   *  (a PMD's queue, a receiver on the same host). Called from the engine's lcore. */
  virtual bool slot_busy(const uint8_t* /*slot*/) const { return false; }

  /**
   * In-place receive. Keep the frame being handed to Engine::on_frame() now (its bytes as
   * they are) past that call: the engine holds a unit received out of order in it instead of
   * copying the unit into its window. Called only from inside on_frame().
   * @return a name for the hold, given back to release_frame() exactly once; nullptr to
   *         refuse (the engine copies the unit, as with a sink that never holds).
   */
  virtual void* hold_frame() { return nullptr; }
  /** Let go of one hold_frame() (the unit was delivered, or its session ended). */
  virtual void release_frame(void* /*held*/) {}

  /**
   * Groups (reliable multicast). @return true when send_group() reaches every node subscribed
   * to a group with one transmission; false (the default): the engine sends a group's frames
   * to each member with send_frame().
   */
  virtual bool multicast() const { return false; }
  /** Transmit @p frame to every node subscribed to group @p g (multicast() true). As
   *  send_frame(): false on back-pressure. */
  virtual bool send_group(GroupId /*g*/, std::span<const uint8_t> /*frame*/) { return true; }
  /** Receive group @p g's transmissions from now on (@p on), or no longer. Control path. */
  virtual void subscribe(GroupId /*g*/, bool /*on*/) {}
};

}  // namespace imago::rel
