/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What only counters would tell an operator, said in a line: a node dropping frames sent in
 * a peer's name from an address not configured for it on that port (`link_spoofed`: two
 * networks' ports crossed, a wrong `--peer` address, or forgery), frames on two networks
 * without a valid shim (`net_bad_shim`: a peer not on two networks), or frames of an unknown
 * wire version (`reject_bad_version`: a peer on two networks talking to a node on one),
 * frames with units longer than this node takes (`reject_bad_record`: a peer with a larger
 * --mtu) or without a CRC (`reject_missing_crc`: a peer with --no-crc). Each is a full
 * outage (of that peer's stream, the last two) with every link up. Control path (imagod's loop), from the node's
 * board; a line per kind at most every 10 s (dataplane/log_gate.h).
 */
#pragma once

#include <cstdint>
#include <cstdio>

#include "dataplane/log_gate.h"
#include "dataplane/stats_board.h"

namespace imago::api {

class WiringWatch {
 public:
  enum Kind : uint8_t { kSpoofed, kBadShim, kBadVersion, kBadRecord, kMissingCrc, kKinds };
  /** The counters of @p s, read at @p now_ns: a line to @p f for each that grew since the
   *  last call, saying how much since its last line (the first call only takes note).
   *  @return lines printed. */
  unsigned check(const dp::NodeSnapshot& s, uint64_t now_ns, FILE* f);

 private:
  bool primed_ = false;
  uint64_t seen_[kKinds] = {};  ///< at the last call
  uint64_t said_[kKinds] = {};  ///< at the last line (or the first call)
  dp::LogGate gate_[kKinds];
  uint64_t quiet_ = 0;  ///< lines the gates held back
};

/** @return counter @p k of @p s. */
uint64_t wiring_counter(const dp::NodeSnapshot& s, WiringWatch::Kind k);

}  // namespace imago::api
