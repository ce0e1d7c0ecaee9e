/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * imago-perf's reliable modes through imago.h (--via api): the figures an application gets,
 * through its endpoints' rings and buffer tiers, not the engine called directly.
 *
 * The nodes are the library's: embedded (imago_attach_embedded() with an imagod command line
 * made from imago-perf's node options) or imagod's (--attach PREFIX: a secondary process).
 * Node A (id 1) sends, node B (id 2) receives, on endpoints named "imago-perf". This process
 * runs both ends when it has both nodes (--pair, or an imagod --pair), else the end --role
 * names. The calling thread is the application of every end here and busy-polls: it
 * interleaves send bursts with receive bursts (up to 8 per send burst); the engines run on the
 * library's engine lcore.
 */
#pragma once

#include <string>

#include "apps/perf/perf.h"
#include "dataplane/eal_args.h"

namespace imago::perf {

/** @return "" when @p o can run through the API, else why not (an option with no meaning
 *  there, or one that belongs to imagod with --attach). */
std::string via_api_refusal(const Options& o, const dp::ArgSplit& args);

/** Run @p o's mode through imago.h: attach, run, print the summary and the RESULT line,
 *  detach. @return the process's exit status (0 ran; 1 failed, said why). */
int run_via_api(const Options& o, const dp::ArgSplit& args);

}  // namespace imago::perf
