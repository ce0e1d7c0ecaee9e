/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * imago-perf's interactive prompt (-i), on DPDK's cmdline library like testpmd's. The
 * command table is C (cli_commands.c: one struct per command); the handlers are C++.
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/** Run the prompt on stdin/stdout until `quit`, end of input, or SIGINT, SIGTERM or SIGHUP. */
void perf_cli_prompt(void);

/* Handlers of the commands, called by the cmdline glue. */
void perf_cli_start(void);
void perf_cli_stop(void);
void perf_cli_wait(void);
void perf_cli_show(const char* what);
void perf_cli_set(const char* key, const char* value);
void perf_cli_clear_stats(void);
void perf_cli_help(void);

#ifdef __cplusplus
}

namespace imago::perf {
struct Session;
/** Give the handlers the session they act on. */
void cli_attach(Session* s);
}  // namespace imago::perf
#endif
