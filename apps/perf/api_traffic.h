/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The traffic of a run through imago.h (via_api.h): node A's end sends numbered, checksummed
 * messages (stream and rate: one way; echo: B sends each back; pingpong: one outstanding,
 * FASTPATH both ways), node B's end checks each one (stream_check.h). One thread drives every
 * end this process has, busy-polling, so nothing here sleeps or allocates once running.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "api/imago.h"
#include "apps/common/json.h"
#include "apps/common/pacer.h"
#include "apps/perf/perf.h"
#include "apps/perf/stream_check.h"

namespace imago::perf {

inline constexpr uint64_t kApiNodeA = 1;  ///< the sender's node
inline constexpr uint64_t kApiNodeB = 2;  ///< the receiver's node
inline constexpr char kApiEndpoint[] = "imago-perf";

/** One end of the run: its endpoint and its node's counters when it opened. */
struct ApiEnd {
  imago_ep_t* ep = nullptr;  ///< null when this process does not run this end
  int node_index = -1;
  imago_node_stats node_before{};
  bool up = false;           ///< the peer's endpoint was ready once
  uint64_t deaths_at_up = 0; ///< peer_deaths then: deaths before (a peer not yet started) end nothing
  uint64_t unconfirmed_at_up = 0;  ///< msgs_unconfirmed then: more at a death lost ours with it
};

struct ApiRun {
  Options o;
  imago_t* im = nullptr;
  ApiEnd a, b;
  uint64_t tsc_hz = 1, deadline = 0;
  bool timed_out = false, closed = false, dead = false;
  bool output_failed = false;   ///< --hist-csv was not written (said): exit 1 after RESULT
  const char* ended = nullptr;  ///< why the run ended: done, duration, signal, closed, peer_dead, send_error
  // Node A: the sender.
  std::vector<std::vector<uint8_t>> bufs;  // one message per slot of a send burst
  app::Pacer pacer;
  uint64_t sent = 0, send_errors = 0, first_tsc = 0, took_all_tsc = 0;
  bool outstanding = false;  // pingpong: a ping waits for its reply
  uint64_t ping_tsc = 0;
  EchoTimer echo;  // echo, pingpong: the messages B sent back
  uint64_t last_echo_tsc = 0;
  // Node B: the receiver.
  StreamCheck check;
  app::Histogram delay_ns;  // rate: one-way delay
  EchoQueue back;           // echo, pingpong: what B sends back
  uint64_t echoed = 0, last_rx_tsc = 0;
  ActivityWatch frames;  // B alone: its node's frames, to linger until the sender is quiet
  uint64_t next_stats = 0;
};

/** Run @p r's mode on its open ends to its end, --duration or a signal. @return 0 or a
 *  negative errno after printing why. */
int traffic_run(ApiRun& r);

/** Print the plain-words summary (unless --quiet) and add the mode's RESULT fields. */
void traffic_report(ApiRun& r, app::Json& res);

/** @return the counters of @p e's node since @p e opened (node: its id). */
imago_node_stats node_delta(const ApiRun& r, const ApiEnd& e);

}  // namespace imago::perf
