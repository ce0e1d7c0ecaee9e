/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * EAL bring-up and tear-down for imago apps, and the process-wide stop request.
 *
 * The model is DPDK's l2fwd: EAL arguments first, a stop flag set by SIGINT/SIGTERM that every
 * lcore loop watches, and rte_eal_cleanup() at the end.
 */
#pragma once

#include <string>
#include <vector>

#include "dataplane/eal_args.h"

namespace imago::dp {

/**
 * Initialise EAL with @p eal_args (argv[0] is supplied from @p prog).
 *
 * @return 0, or a negative errno (rte_errno of rte_eal_init) after logging why.
 */
int eal_start(const std::string& prog, const std::vector<std::string>& eal_args);

/** @return true once eal_start() succeeded in this process: EAL cannot start again, even
 *  after eal_stop() (DPDK's rte_eal_init() runs once per process). */
bool eal_was_started();

/**
 * Remove EAL's runtime directory at eal_stop(): for apps that chose their own unique
 * --file-prefix (the embedded default), so nothing is left in /var/run/dpdk.
 */
void eal_own_runtime_dir();

/** Stop EAL: rte_eal_cleanup(). Ports must already be closed. @return 0 or a negative errno. */
int eal_stop();
/**
 * Make eal_stop() leave EAL's devices alone: it skips rte_eal_cleanup(), whose removal of a
 * net_af_xdp device detaches whatever XDP program its interface holds, another process's
 * included (Port::open() refused the device for that). Control path.
 */
void eal_leave_devices();
/** @return the message for a start with no port: none was asked for (@p how: the options
 *  that ask for one), or the --vdev asked for came up as none (the reason is in DPDK's lines
 *  before). Control path. */
std::string no_port_message(const std::string& how);
/** @return the --vdev devices asked for that came up as no port ("net_af_packet0,iface=x0",
 *  separated by ", "), or "" when each did. Control path. */
std::string vdevs_not_up();

/** Route SIGINT and SIGTERM to the stop request (async-signal-safe). */
void install_stop_signals();

/** @return true once SIGINT/SIGTERM arrived or request_stop() was called. */
bool stop_requested();

/** Ask every loop watching stop_requested() to finish. */
void request_stop();

/** Reset the stop request (tests that run several loops in one process). */
void clear_stop();

}  // namespace imago::dp
