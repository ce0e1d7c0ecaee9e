/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Logging through rte_log with one logtype per component ("imago.dataplane", "imago.fault",
 * "imago.lcore", "imago.perf", "imago.daemon", "imago.api"). Levels are set with EAL's --log-level, e.g.
 * --log-level=imago.*:debug. Control path only: nothing on the hot path logs.
 */
#pragma once

#include <rte_log.h>

namespace imago::dp {

/** The registered logtypes (valid after static initialisation). */
struct LogTypes {
  int dataplane;
  int fault;
  int lcore;
  int perf;
  int daemon;
  int api;
};
extern LogTypes g_logtypes;

}  // namespace imago::dp

/** IMAGO_LOG(ERR, dataplane, "port %u: %s\n", id, msg): log at rte_log level RTE_LOG_ERR. */
#define IMAGO_LOG(level, component, ...) \
  rte_log(RTE_LOG_##level, ::imago::dp::g_logtypes.component, "imago." #component ": " __VA_ARGS__)
