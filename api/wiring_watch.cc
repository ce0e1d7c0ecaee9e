/* SPDX-License-Identifier: BSD-3-Clause */
#include "api/wiring_watch.h"

#include <cinttypes>

namespace imago::api {

namespace {

// What each counter says, and what to look at.
constexpr const char* kWhy[WiringWatch::kKinds] = {
    "frames in a peer's name from an address not configured for it on that port (link_spoofed): "
    "networks A and B crossed (--iface/--iface-b), a wrong --peer/--peer-b address, a node started "
    "with another's --node-id (this one's, say), or forged frames",
    "frames without a valid two-network shim (net_bad_shim): does the peer run --redundancy too?",
    "frames of an unknown wire version (reject_bad_version): a peer on two networks (--redundancy) "
    "talking to this node on one, another imago version, or frames damaged on the way (a few, with "
    "reject_bad_crc or circ_bad_frame growing too)",
    "frames with records this node cannot take (reject_bad_record): damaged or forged frames, or "
    "frames longer than this node takes from a peer that did not state its frame size (another imago "
    "version; peers that state another are refused: reject_settings_mismatch)",
    "frames without a CRC (reject_missing_crc): a peer run with --no-crc (both ends must agree), or forged frames",
};

}  // namespace

uint64_t wiring_counter(const dp::NodeSnapshot& s, WiringWatch::Kind k) {
  switch (k) {
    case WiringWatch::kSpoofed: return s.link.spoofed + (s.redundant ? s.link_b.spoofed : 0);
    case WiringWatch::kBadShim: return s.redundant ? s.net_bad_shim : 0;
    case WiringWatch::kBadVersion: return s.total.reject[static_cast<size_t>(rel::Reject::kBadVersion)];
    case WiringWatch::kBadRecord: return s.total.reject[static_cast<size_t>(rel::Reject::kBadRecord)];
    case WiringWatch::kMissingCrc: return s.total.reject[static_cast<size_t>(rel::Reject::kMissingCrc)];
    case WiringWatch::kKinds: break;
  }
  return 0;
}

unsigned WiringWatch::check(const dp::NodeSnapshot& s, uint64_t now_ns, FILE* f) {
  unsigned lines = 0;
  for (uint8_t k = 0; k < kKinds; ++k) {
    const uint64_t v = wiring_counter(s, static_cast<Kind>(k));
    const bool grew = primed_ && v > seen_[k];
    seen_[k] = v;
    if (!primed_) said_[k] = v;
    if (!grew || !gate_[k].open(now_ns, quiet_)) continue;
    std::fprintf(f, "imago: node %" PRIu64 " dropped %" PRIu64 " %s\n", s.node_id, v - said_[k], kWhy[k]);
    said_[k] = v;
    ++lines;
  }
  primed_ = true;
  return lines;
}

}  // namespace imago::api
