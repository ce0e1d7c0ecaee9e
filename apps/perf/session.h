/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * One imago-perf session: the nodes stay up while runs come and go. Batch mode makes one
 * run and exits; interactive mode (-i) makes a run per `start`.
 */
#pragma once

#include "apps/perf/nodes.h"
#include "apps/perf/perf.h"

namespace imago::perf {

struct Session {
  Context ctx;
  Topology topo;
  const Mode* mode = nullptr;  ///< the mode of the current or last run
  bool interactive = false;    ///< pollers stay off the main lcore, which runs the prompt
  bool prepared = false;       ///< a run's mode state exists (reported or not)
  uint64_t deadline_tsc = 0;
  bool timed_out = false;
  bool stopped = false;        ///< interactive: `stop` ended the run before it finished
};

/** Bring the nodes up. @return 0 or a negative errno after printing why. */
int session_open(Session& s);
/** Set up a run of ctx.opt.mode with the current options. @return 0 or a negative errno. */
int session_prepare(Session& s);
/**
 * Run the prepared run: to its end in batch mode, or launched in the background
 * (interactive). @return 0 or a negative errno.
 */
int session_launch(Session& s);
/** Stop the run if it still goes, and wait for its lcores. */
void session_halt(Session& s);
/** Fill @p result with the run's RESULT object and print the summary; frees the run's state. */
void session_report(Session& s, app::Json& result);
/** @return the periodic stats line of the current or last run ("" with none). */
std::string session_stats_line(Session& s);
/** Tear the run (if any) and the nodes down. */
void session_close(Session& s);

}  // namespace imago::perf
