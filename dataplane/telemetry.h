/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * imago's rte_telemetry commands, for the tools DPDK users already have (dpdk-telemetry.py,
 * imago-stat): a program that runs nodes (imagod, the embedded library, imago-perf) says once
 * what they read, and every command answers from there, on DPDK's telemetry thread. They
 * never touch an engine: they read the boards its lcore publishes (stats_board.h), ethdev
 * statistics, and the lcores' busy/idle counters.
 *
 *   /imago/nodes            every node: id, peers, the headline counters
 *   /imago/node,ID          every counter of node ID's engine and link
 *   /imago/peers,ID         node ID's peers: session, RTT, windows, credits, Pupa's Table 3
 *   /imago/ports            every port: link, packets, bytes, drops
 *   /imago/lcores           every lcore that polls: busy and idle cycles, iterations
 *
 * Commands added by other parts (api/telemetry.h: endpoints, pools) go through
 * telemetry_add(). Control path only.
 */
#pragma once

#include <rte_telemetry.h>

#include <vector>

#include "dataplane/lcore.h"
#include "dataplane/stats_board.h"

namespace imago::dp {

/** What the commands read: the boards and the runner must stay alive until the next
 *  telemetry_set() or telemetry_clear() returns. */
struct TelemetrySources {
  std::vector<const StatsBoard*> boards;  ///< one per node
  const LcoreRunner* runner = nullptr;    ///< the lcores polling the nodes
};

/** Register the commands above (once per process; later calls do nothing).
 *  @return 0 or a negative errno (rte_telemetry refused a command). */
int telemetry_register();

/** Read @p src from now on (copied). Once it returns no command reads the previous sources,
 *  so they may go. */
void telemetry_set(const TelemetrySources& src);

/** Read nothing (the program is tearing its nodes down): commands answer empty. */
void telemetry_clear();

/** Register one more command, under /imago/. @return 0 or a negative errno. */
int telemetry_add(const char* cmd, telemetry_cb fn, const char* help);

/** Read node @p id's board into @p out (a caller's buffer). @return false when there is no
 *  such node or no consistent copy. From inside a command only (it holds the sources). */
bool telemetry_node(uint64_t id, NodeSnapshot* out);

/** A command's hold on the sources: programs changing them wait until it returns. */
class TelemetryLock {
 public:
  TelemetryLock();
  ~TelemetryLock();
  TelemetryLock(const TelemetryLock&) = delete;
  TelemetryLock& operator=(const TelemetryLock&) = delete;
};

}  // namespace imago::dp
