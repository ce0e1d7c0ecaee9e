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

/** What an app needs from EAL when the user gave no EAL arguments. */
struct EalDefaults {
  unsigned memory_mb = 512;            ///< -m, enough for the default mempools
  std::vector<std::string> vdevs;      ///< each becomes --vdev=...
  std::string lcores;                  ///< -l value; empty lets EAL take every core
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
