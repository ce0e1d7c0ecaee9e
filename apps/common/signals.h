/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The signals of imagod and imago-perf, the programs that own EAL and must release it: a
 * stop asked for by SIGINT, SIGTERM or SIGHUP is a clean stop (lcores stop, ports close,
 * rte_eal_cleanup(), a primary removes its runtime directory and hugepage files), and SIGPIPE
 * is ignored, so that a closed standard output (`imagod | head`, a log reader gone) is a
 * write error the program handles instead of a death that leaves those files behind. The
 * default action of each of the three would kill the process there and then.
 */
#pragma once

#include <csignal>

#include "dataplane/eal.h"

namespace imago::app {

/** Route SIGINT, SIGTERM and SIGHUP to the stop request (dp::stop_requested()) and ignore
 *  SIGPIPE. Call before EAL starts: a signal while it starts then stops the run once it
 *  begins. */
inline void install_stop_signals() {
  dp::install_stop_signals();
  // SIGHUP (the terminal closed, or an operator's `kill -HUP`) is SIGTERM's stop: the same
  // handler, so the two can never mean different things.
  struct sigaction term {};
  sigaction(SIGTERM, nullptr, &term);
  sigaction(SIGHUP, &term, nullptr);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

}  // namespace imago::app
