/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * How one peer looks on one network (NASA KSC's failure count, with heartbeats): up, suspect
 * or down. A network is down toward a peer when it lags the other by `heartbeat_miss` of the
 * peer's heartbeats and nothing came on it for as many intervals (the peer sends them on both
 * together: its stall delays both, so time alone would blame the network its stall fell
 * before; the link set counts the lag; silent
 * on both at once, the silence is the peer's: a stall, a restart, or both networks dead
 * alike; suspect then, and the engine's dead-peer timer decides), when the peer says it hears
 * nothing from us on it (and something on the other), or when `fail_threshold` failures
 * (frames sent on it that had to be sent again, heartbeats missed) fall within
 * `fail_window_ns`. A down network is up again only after it has stayed
 * healthy for `heal_ns`, so a flapping link does not flap the traffic with it; it is suspect
 * (in use, but watched) while failures are recent or a heartbeat is late (it lags by two,
 * quiet for 1.5 intervals)
 * or the peer has been silent on both for `heal_ns`.
 */
#pragma once

#include <algorithm>
#include <cstdint>

namespace imago::rel::red {

enum class NetState : uint8_t { kUp = 0, kSuspect = 1, kDown = 2 };

inline const char* net_state_name(NetState s) {
  return s == NetState::kUp ? "up" : s == NetState::kSuspect ? "suspect" : "down";
}

struct HealthConfig {
  uint64_t heartbeat_ns = 1'000'000;   ///< a heartbeat on every network to every peer this often
  uint32_t heartbeat_miss = 3;         ///< heartbeats behind the other network, and intervals quiet: down (>= 2)
  uint32_t fail_threshold = 10;        ///< failures within fail_window_ns: down
  uint64_t fail_window_ns = 100'000'000;
  uint64_t heal_ns = 50'000'000;       ///< healthy this long: a down network is up again
};

class NetHealth {
 public:
  void start(uint64_t now) {
    last_rx_ = now, state_ = NetState::kUp, up_since_ = now, peer_hears_ = true, peer_heard_ = false;
    failures_ = 0, window_start_ = now, last_failure_ = 0, healthy_since_ = kNever, behind_ = false;
  }
  /** A valid frame from the peer arrived on this network. */
  void heard(uint64_t now) { last_rx_ = now; }
  /** We were not polled for @p ns beyond the tolerance: that is not the peer's silence. */
  void credit(uint64_t now, uint64_t ns) { last_rx_ = std::min(now, last_rx_ + ns); }
  /** The peer says whether it hears us on this network (any frame from it, any network).
   *  "No" counts only once it said "yes": a peer that starts after us has heard nothing yet. */
  void peer_hears(bool yes) {
    peer_heard_ |= yes;
    peer_hears_ = yes || !peer_heard_;
  }
  /** A frame sent on this network had to be sent again, or a heartbeat went missing. */
  void failure(const HealthConfig& c, uint64_t now) {
    if (now - window_start_ > c.fail_window_ns) window_start_ = now, failures_ = 0;
    ++failures_;
    last_failure_ = now;
  }
  /** The peer was silent on every network and is heard again: this network's silence
   *  counts from @p now (it was the peer's, not this network's). */
  void peer_back(uint64_t now) { last_rx_ = std::max(last_rx_, now); }
  /** Re-evaluate at @p now; @p peer_silent: the peer is silent on every network (for
   *  heal_ns, that makes this one suspect, never down); @p lag: the peer's heartbeats that came
   *  on the other network and not (nor anything later) on this one. @return true when the
   *  state changed. */
  bool update(const HealthConfig& c, uint64_t now, bool peer_silent, uint32_t lag) {
    const NetState before = state_;
    // Both: a backlog on one network (its receive ring filled before the other's) lags it
    // by a few heartbeats while it delivers; a silence with no lag is the peer's.
    const uint64_t silence = now - last_rx_;
    behind_ = lag >= c.heartbeat_miss && silence > c.heartbeat_miss * c.heartbeat_ns;
    const bool failing = failures_ >= c.fail_threshold && now - window_start_ <= c.fail_window_ns;
    if (behind_ || !peer_hears_ || failing) {
      state_ = NetState::kDown;
      healthy_since_ = kNever;
      return state_ != before;
    }
    if (state_ == NetState::kDown) {
      if (healthy_since_ == kNever) healthy_since_ = now;
      if (now - healthy_since_ < c.heal_ns) return false;
      up_since_ = now;
    }
    const bool recent = last_failure_ != 0 && now - last_failure_ <= c.fail_window_ns;
    // The peer silent on both: suspect once that outlasts a stall of its lcore (or ours not
    // credited), which on a loaded machine recur every few milliseconds and blame no network.
    const bool late = (lag >= 2 && silence > c.heartbeat_ns + c.heartbeat_ns / 2) ||
                      (peer_silent && silence > std::max(c.heal_ns, c.heartbeat_miss * c.heartbeat_ns));
    state_ = late || recent ? NetState::kSuspect : NetState::kUp;
    return state_ != before;
  }
  /** @return true when nothing came on this network for the down-detection time. */
  bool quiet(const HealthConfig& c, uint64_t now) const { return now - last_rx_ > c.heartbeat_miss * c.heartbeat_ns; }
  /** @return true when the peer, heard lately on some network (@p peer_heard), is heard on
   *  this one too (not behind at the last update(): the shim's heard bit). */
  bool heard_lately(bool peer_heard) const { return peer_heard && !behind_; }
  /** @return true when the peer is heard here and says it hears us: the network works
   *  both ways now, whatever its failure count says. */
  bool both_ways(bool peer_heard) const { return heard_lately(peer_heard) && peer_hears_; }
  /** @return true when this network lagged the other, and was quiet, at the last update(). */
  bool behind() const { return behind_; }
  NetState state() const { return state_; }
  bool down() const { return state_ == NetState::kDown; }
  /** @return true when the network is down but healthy again, waiting out heal_ns. */
  bool healing() const { return state_ == NetState::kDown && healthy_since_ != kNever; }

  /** @return when the network last came up (fail-back waits on it). */
  uint64_t up_since() const { return up_since_; }

 private:
  static constexpr uint64_t kNever = ~uint64_t{0};
  uint64_t last_rx_ = 0;
  NetState state_ = NetState::kUp;
  uint64_t up_since_ = 0;
  bool peer_hears_ = true;
  bool peer_heard_ = false;  ///< the peer said once that it hears us
  uint32_t failures_ = 0;
  uint64_t window_start_ = 0;
  uint64_t last_failure_ = 0;
  uint64_t healthy_since_ = kNever;
  bool behind_ = false;  ///< at the last update(): lagging the other by heartbeat_miss, and quiet
};

}  // namespace imago::rel::red
