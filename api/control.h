/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The control messages applications send to the primary over DPDK's multi-process IPC
 * (rte_mp_request_sync, action kCtlAction): hello, open an endpoint, close one.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/shm.h"

namespace imago::api {

inline constexpr char kCtlAction[] = "imago_ctl";
/// A request is tried (the same id again: answered once) for up to kCtlGiveUpMs, each try
/// waiting up to kCtlTryMs. The primary starts nothing with less than kCtlMarginMs left
/// and bounds its waits by what is left, so its answer comes while the application waits.
inline constexpr uint32_t kCtlTryMs = 2000;
inline constexpr uint32_t kCtlGiveUpMs = 5000;
inline constexpr uint32_t kCtlMarginMs = 500;

enum class CtlOp : uint32_t { kHello = 1, kOpen = 2, kClose = 3 };

/** Request and reply alike (the reply fills rc and slot). */
struct CtlMsg {
  CtlOp op;
  uint32_t version;
  int32_t pid;
  int32_t rc;
  uint32_t slot;
  uint32_t ring_size;
  uint64_t node;
  uint64_t peer;
  char name[kNameMax + 1];
  uint32_t group;        ///< kOpen of a group endpoint (peer 0): its group
  uint32_t group_flags;  ///< IMAGO_GROUP_* for a group endpoint, IMAGO_EP_* for the others
  uint32_t rx_inline;    ///< kOpen: 1 when the application copies medium deliveries out of the
                         ///< rx ring (kTierRing, tiers.h); 0 (an ordered group) for pool buffers
  uint32_t pad;
  /// Unique per request of a process (its tries share it): DPDK matches a late answer to a
  /// later request of the same action, and the primary answers a retried one as it did.
  uint64_t id;
  uint64_t deadline_ns;  ///< ctl_clock_ns() when the application gives up
};

/** CLOCK_MONOTONIC in ns: the same clock in every process of the machine. */
uint64_t ctl_clock_ns();
/** @return how long the primary may work on a request due at @p deadline_ns: 0 when less
 *  than kCtlMarginMs is left, at most kCtlGiveUpMs (a hostile deadline buys nothing). */
uint64_t ctl_time_left_ns(uint64_t deadline_ns);

/** @return true when process @p pid is gone: it does not exist, or it is a zombie (killed,
 *  not yet reaped by its parent). Control path: a syscall and a read of /proc. */
bool process_gone(int pid);

/** @return EAL's runtime directory of file prefix @p prefix (root's: /var/run/dpdk/PREFIX). */
inline std::string dpdk_runtime_dir(const std::string& prefix) { return "/var/run/dpdk/" + prefix; }

/** @return the live processes other than this one that are DPDK secondaries of file
 *  prefix @p prefix (their mp_socket_PID_* in its runtime directory). Control path. */
std::vector<int> live_secondaries(const std::string& prefix);

/** @return true when a DPDK primary of file prefix @p prefix runs: it holds the lock on its
 *  runtime directory's config file. Control path. */
bool primary_runs(const std::string& prefix);

/** Secondary side: send @p m to the primary and wait for its answer (into @p m), trying
 *  again for up to kCtlGiveUpMs. @return the answer's rc, or -ENOTCONN when none came. */
int ctl_request(CtlMsg& m);

}  // namespace imago::api
