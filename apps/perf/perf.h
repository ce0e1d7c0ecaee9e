/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * imago-perf's shared state: its options, the nodes it runs, and the mode table entry type
 * (testpmd's struct fwd_engine, one file per mode).
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/common/json.h"
#include "dataplane/eal_args.h"
#include "dataplane/encap.h"
#include "dataplane/fault.h"
#include "apps/common/histogram.h"
#include "dataplane/lcore.h"
#include "dataplane/node_port.h"
#include "dataplane/redundancy_options.h"
#include "dataplane/port.h"
#include "dataplane/protocol_options.h"
#include "dataplane/telemetry.h"

namespace imago::perf {

/** Every command-line option; defaults are the values here. */
struct Options {
  std::string mode = "raw";
  bool pair = false;          ///< two nodes in one process over a net_ring pair
  std::string role;           ///< "tx" or "rx": one node in this process on port 0
  std::string iface;          ///< embedded default only: a port on this interface...
  dp::IfacePmd pmd = dp::IfacePmd::kAfPacket;  ///< ...through this PMD
  std::vector<std::string> vdevs;  ///< embedded default only: extra --vdev arguments
  std::string lcores;         ///< embedded default only: EAL -l
  uint64_t msgs = 1'000'000;
  uint16_t size = 64;
  uint16_t burst = 32;
  uint64_t rate_pps = 0;
  dp::EncapConfig encap;
  uint64_t peer_id = 0;       ///< --peer ID@ADDR: the id given (checked against the role)
  dp::MacAddr peer_at_mac = dp::kBroadcastMac;  ///< --peer ID@MAC's MAC (checked against --peer-mac)
  dp::MacAddr peer_mac = dp::kBroadcastMac;     ///< --peer-mac's
  std::string auth_key_file;  ///< --auth-key's file (the key is in encap.auth): --via api hands it on
  double duration_s = 60;
  unsigned idle_timeout_ms = 1000;
  uint64_t ping_timeout_us = 10'000;
  std::string hist_csv;       ///< write the round-trip histogram here (ping-pong modes)
  std::string arrivals_csv;   ///< rate mode receiver: each message's arrival and delay here
  double stats_period_s = 0;
  dp::FaultConfig fault_tx;
  dp::FaultConfig fault_rx;
  bool spec_seed = false;     ///< a --fault-tx/--fault-rx of the line parse_options() reads set seed=N
  unsigned ring_size = 1024;
  unsigned fault_capacity = 1024;
  uint16_t nb_desc = 1024;
  dp::ProtocolOptions protocol;  ///< reliable modes: MTU, modes, timers (fast-link preset)
  bool verbose_summary = true;
  bool interactive = false;
  bool via_api = false;       ///< reliable modes through imago.h endpoints (apps/perf/via_api.h)
  std::string attach;         ///< via the API: a secondary of the imagod with this --file-prefix
  bool run_to_completion = false;  ///< via the API, embedded: this thread polls the engines too
  bool send_copy = false;     ///< --send-copy: never by reference (Engine::send_ref())
  dp::RedundancyOptions redundancy;  ///< reliable modes: a second network per node
  std::string iface_b;        ///< --redundancy: network B's port on this interface (else the second port)
  dp::MacAddr peer_mac_b = dp::kBroadcastMac;  ///< --peer-b: the peer's address on network B
  uint32_t dst_ip_b = 0, src_ip_b = 0;         ///< UDP on network B
};

/** One node of this process: the library's node port (dp::NodePort), named A or B. */
struct NodePort : dp::NodePort {
  const char* name = "";
  NodePort* net_b = nullptr;  ///< --redundancy: this node's port on network B
};

/** The run: options, nodes, lcore runner and clock. */
struct Context {
  Options opt;
  std::vector<NodePort*> nodes;  ///< pair: [A, B]; role: [the one node]
  dp::LcoreRunner runner;
  uint64_t tsc_hz = 0;
  void* mode_state = nullptr;  ///< owned by the mode: set in setup, freed in teardown
  bool keep_main_free = false; ///< interactive: the main lcore runs the prompt, never a poller
  bool peer_dead = false;      ///< the mode's report found the peer dead (RESULT's ended)
  bool fell_silent = false;    ///< a receiver alone gave up after --idle-timeout-ms short of --msgs (ended: idle)
  bool explicit_eal = false;   ///< EAL args were given: --iface made no vdev
  dp::TelemetrySources tel;    ///< what /imago/... telemetry reads: the run's engine boards, the lcores
  bool output_failed = false;  ///< a file asked for (--hist-csv, --arrivals) was not written: exit 1
};

/**
 * Choose the sender and receiver lcores of a pair: two workers when there are, else the main
 * lcore takes the receiver (unless ctx.keep_main_free: then both share the one worker).
 */
void pick_lcores(const Context& ctx, unsigned& tx_lcore, unsigned& rx_lcore);
/** @return the lcore for the only node of a --role process. */
unsigned single_lcore(const Context& ctx);

/** A perf mode (testpmd's fwd_engine): set-up registers lcore tasks; report writes results. */
struct Mode {
  const char* name;
  const char* help;
  bool message_is_frame;  ///< raw modes: each message is one frame (else frames follow --mtu)
  /** Register tasks on ctx.runner. @return 0 or a negative errno after printing why. */
  int (*setup)(Context& ctx);
  /** Periodic: @return true when the run is complete. */
  bool (*finished)(Context& ctx, uint64_t now_tsc);
  /** One periodic stats line (no newline). */
  std::string (*stats_line)(Context& ctx, uint64_t now_tsc);
  /** Fill the RESULT object and print the plain-words summary. */
  void (*report)(Context& ctx, app::Json& result);
  /** Free mode state. */
  void (*teardown)(Context& ctx);
};

/** The longest --duration and --stats-period, as imagod's: ten years in seconds. With it,
 *  seconds times any TSC rate stays far inside 64 bits (an outside tester: --duration
 *  9000000000 overflowed into a deadline already past, and the run ended at once). */
inline constexpr double kMaxSeconds = 315360000;

/** @return the TSC @p s seconds after @p now on a clock of @p hz, or UINT64_MAX (never)
 *  when that is beyond 64 bits: a deadline never wraps into the past. */
inline uint64_t tsc_after(uint64_t now, double s, uint64_t hz) {
  const double cycles = s * static_cast<double>(hz);
  if (!(cycles >= 0 && cycles < 0x1p63) || static_cast<uint64_t>(cycles) > UINT64_MAX - now) return UINT64_MAX;
  return now + static_cast<uint64_t>(cycles);
}

/**
 * @return true when more than @p span cycles passed from @p since to @p now. A @p since
 *         later than @p now (stamped after the loop read its clock) is not silence.
 */
inline bool silent_for(uint64_t now, uint64_t since, uint64_t span) {
  return now > since && now - since > span;
}

/** Tells when a counter (frames received, say) last moved, as seen by periodic checks. */
struct ActivityWatch {
  uint64_t last_count = 0;
  uint64_t last_change_tsc = 0;

  /** @return true once @p count has not moved for @p span cycles (and has moved at all). */
  bool quiet(uint64_t now, uint64_t count, uint64_t span) {
    if (count != last_count) {
      last_count = count;
      last_change_tsc = now;
    }
    return count != 0 && silent_for(now, last_change_tsc, span);
  }
};

/** Mode::teardown for a mode whose state is a @p State made by its setup. */
template <typename State>
void delete_state(Context& ctx) {
  delete static_cast<State*>(ctx.mode_state);
  ctx.mode_state = nullptr;
}

/** @return the largest frame @p o makes: a whole message in raw modes, else one MTU. */
size_t max_frame_bytes(const Options& o);

/** @return "p50 X us  p90 ...  max Z us" of a round-trip histogram in nanoseconds. */
std::string rtt_percentiles(const app::Histogram& ns);
/** @return the RESULT "rtt_us" object of a round-trip histogram in nanoseconds. */
app::Json rtt_json(const app::Histogram& ns);

/** Write @p ns as CSV to --hist-csv, if the options name a file. @return false when it could
 *  not be written (said on stderr, with why). */
bool write_hist_csv(const Options& o, const app::Histogram& ns);

/**
 * Print the RESULT line of @p result, the last of the run, and see it written: standard
 * output may be a pipe whose reader left (SIGPIPE is ignored: apps/common/signals.h).
 * @return the process's exit status: 0; 1 when RESULT could not be written or a file the
 *         run was asked for was not (@p output_failed), each said on stderr.
 */
int print_result(const app::Json& result, bool output_failed);

/** @return the mode table, terminated by an entry with a null name. */
const Mode* modes();
/** @return the mode called @p name, or nullptr. */
const Mode* find_mode(const std::string& name);

}  // namespace imago::perf
