/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The reliable modes' ends (stream, rate, echo, pingpong): a node's engine built by
 * dp::node_engine_open() on one of imago-perf's ports, and which peer it talks to.
 */
#pragma once

#include <array>
#include <ctime>
#include <memory>

#include "apps/perf/perf.h"
#include "dataplane/node_engine.h"
#include "reliability/engine.h"

namespace imago::perf {

inline constexpr rel::NodeId kNodeA = 1;
inline constexpr rel::NodeId kNodeB = 2;

/** What a node on two networks reported (its link set's Listener), kept for RESULT with the
 *  wall-clock time of each (rare: a vDSO clock read is no cost): written on the engine lcore
 *  into room set aside, read after the run. */
struct NetEventLog final : rel::red::Listener {
  static constexpr size_t kMax = 1024;
  std::array<rel::red::NetEvent, kMax> ev{};
  std::array<uint64_t, kMax> unix_us{};
  size_t n = 0;
  uint64_t dropped = 0;  ///< events past kMax
  void on_net_event(const rel::red::NetEvent& e) override {
    if (n == kMax) return void(++dropped);
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    unix_us[n] = static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
    ev[n++] = e;
  }
};

/** A mode's application (its engine's sink), as far as the peer's life goes: a death ends a
 *  run once the peer was up, or when it dropped messages of ours unconfirmed. One never heard
 *  yet (its end started later than this one, beyond --dead-after-ms) is declared dead by the
 *  engine, which goes on probing, and a run with nothing lost waits for it, as the receiver
 *  started first must; a sender whose messages went with it cannot (they are lost). */
struct PeerLife : rel::AppSink {
  bool up = false;         ///< the session came up at least once
  bool dead = false;       ///< a death that ends the run: after up, or one that lost ours
  uint64_t discarded = 0;  ///< our messages lost unconfirmed with the peer at those deaths
  void on_peer_up(rel::NodeId) override { up = true; }
  void on_peer_dead(rel::NodeId, uint64_t n) override {
    if (up || n != 0) dead = true, discarded += n;
  }
  rel::NodeId self = 0;  ///< for on_peer_settings()'s notice
  void on_peer_settings(rel::NodeId peer, rel::PeerSettings theirs, rel::PeerSettings ours) override {
    dp::node_engine_log_settings(self, peer, theirs, ours);
  }
  /// The peer died once this end, alone in its process, had everything (@p alone_with_all)
  /// and none of its own messages went with it: it left when all was confirmed, before this
  /// end's 200 ms linger was over. The run is done, not dead: true, and the death forgotten.
  bool left_after_all(bool alone_with_all) {
    if (!dead || !alone_with_all || discarded != 0) return false;
    dead = false;
    return true;
  }
};

/** One reliable end of a mode: the node's engine (dp::NodeEngine) on one of this process's
 *  ports, and the one peer it talks to. */
struct EngineEnd : dp::NodeEngine {
  NodePort* node = nullptr;  ///< null when this process does not run this end
  rel::NodeId self = 0;
  rel::NodeId peer = 0;
  dp::StatsBoard board;      ///< the engine as its lcore publishes it (telemetry)
  NetEventLog net_events;    ///< --redundancy
};

/**
 * Create the engine of @p en (identity @p self, talking to @p peer) on @p node, delivering
 * to @p app. The epoch grows with wall-clock time so a restarted process is a new session.
 * @return 0 or a negative errno after printing why.
 */
int engine_end_open(Context& ctx, EngineEnd& en, NodePort* node, rel::NodeId self, rel::NodeId peer,
                     PeerLife* app);

/** One side of a reliable mode: its engine, its application and the lcore task driving it. */
struct EngineSide {
  EngineEnd* node;
  PeerLife* app;
  const char* task_name;
  dp::TaskFn task;
  void* task_arg;
};

/**
 * Open side A (node kNodeA, unless this process is --role rx) and side B (node kNodeB,
 * unless --role tx) and register their tasks on the lcores the shape gives them.
 * @return 0 or a negative errno after printing why.
 */
int open_engine_sides(Context& ctx, const EngineSide& a, const EngineSide& b);

/** @return the engine configuration the options ask for (identity filled in by the caller). */
rel::Config engine_config(const Options& o);

/** Add the engine counters of @p en to @p r under "engine_<node>". */
void engine_counters_json(const EngineEnd& en, app::Json& r);

/** Add "engine_<node>" for each side this process runs, and their summed "retransmits",
 *  "acks_sent", "nacks_sent" and "decode_rejected". */
void engine_sides_json(const EngineEnd& a, const EngineEnd& b, app::Json& r);

}  // namespace imago::perf
