/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Command-line convention of every imago app: `[EAL args --] app args`.
 *
 * With `--`, everything before it goes to EAL verbatim. Without it, the app supplies a
 * working embedded default (no hugepages, no PCI, a unique file prefix, the vdevs it needs),
 * so `imago-perf --pair` runs on any machine. Pure: no DPDK calls, so it is unit-tested.
 */
#pragma once

#include <string>
#include <vector>

namespace imago::dp {

/** argv split at the first `--`. */
struct ArgSplit {
  std::string prog;               ///< argv[0]
  std::vector<std::string> eal;   ///< before `--` (empty when there is none)
  std::vector<std::string> app;   ///< after `--`, or all of argv[1..] when there is none
  bool explicit_eal = false;      ///< true when argv held a `--`
};

/** Split @p argv at the first `--`. */
ArgSplit split_args(int argc, const char* const* argv);

/** The kernel-interface PMDs an app can put a port on by name (--iface NAME --pmd ...). */
enum class IfacePmd { kAfPacket, kAfXdp };

/** @return "af_packet" or "af_xdp". */
const char* iface_pmd_name(IfacePmd p);
/** Parse "af_packet" or "af_xdp". @return false for anything else. */
bool parse_iface_pmd(const std::string& s, IfacePmd& out);
/** @return the --vdev that opens Linux interface @p iface with @p pmd: net_af_packet0,iface=X
 *  or net_af_xdp0,iface=X (one queue; XDP on a veth needs its MTU at most 3000). */
std::string iface_vdev(IfacePmd pmd, const std::string& iface, unsigned index = 0);

/** Remove the runtime directories under @p parent (/var/run/dpdk) of embedded processes
 *  (prefix imago-<pid>, ours) that died without cleaning up (a SIGKILL): those whose pid is
 *  gone. Best effort. @return how many. */
unsigned sweep_dead_runtime_dirs(const std::string& parent);

/** @return a message naming the first device name two --vdev arguments of @p eal_args share
 *  (DPDK keeps the last and drops the other without a word), or "" when none do. */
std::string duplicate_vdev(const std::vector<std::string>& eal_args);

/** What an app needs from EAL when the user gave no EAL arguments. */
struct EalDefaults {
  unsigned memory_mb = 512;            ///< -m, enough for the default mempools
  std::vector<std::string> vdevs;      ///< each becomes --vdev=...
  std::string lcores;                  ///< -l value (--lcores for a map, "0@(0-1)"); empty: every core
  std::string file_prefix;             ///< empty means "imago-<pid>"
  std::string log_level = "lib.*:warning";  ///< keeps EAL's start-up chatter out of the way
  /** A primary that secondary processes attach to: hugepages and a shared config instead of
   *  --no-huge -m N --no-shconf. */
  bool shared = false;
  /** Serve rte_telemetry on the runtime directory's socket (dpdk-telemetry.py, imago-stat)
   *  instead of --no-telemetry. */
  bool telemetry = false;
};

/**
 * @return the EAL argument vector for the embedded default: --no-huge -m N --no-pci
 *         --no-shconf --no-telemetry (unless d.telemetry) --file-prefix P [-l L] [--vdev V]... --log-level X
 *         (with d.shared: --proc-type=primary --no-pci --no-telemetry --file-prefix P ...).
 */
std::vector<std::string> default_eal_args(const EalDefaults& d, int pid);

}  // namespace imago::dp
