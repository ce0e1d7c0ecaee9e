// SPDX-License-Identifier: BSD-3-Clause
#include "reliability/counters.h"

namespace imago::rel {

const char* reject_name(Reject r) {
  static constexpr const char* kNames[] = {
      "none",        "too_short",     "bad_version",  "bad_type",     "bad_flags",
      "bad_crc",     "missing_crc",   "wrong_dst",    "unknown_peer", "stale_epoch",
      "wrong_token", "no_session",    "peer_dead",    "bad_sack",     "bad_ack",
      "bad_record",  "out_of_window", "bad_fragment", "too_large",    "unproven_restart",
      "bad_credit",  "not_joined",    "bad_group_ctl", "replayed_ctl",
      "settings_mismatch",
  };
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(Reject::kCount));
  auto i = static_cast<size_t>(r);
  return i < static_cast<size_t>(Reject::kCount) ? kNames[i] : "?";
}

void PeerCounters::add(const PeerCounters& o) {
  // Every field is a uint64_t, so the struct is an array of them.
  static_assert(sizeof(PeerCounters) % sizeof(uint64_t) == 0);
  constexpr size_t n = sizeof(PeerCounters) / sizeof(uint64_t);
  auto* d = reinterpret_cast<uint64_t*>(this);
  const auto* s = reinterpret_cast<const uint64_t*>(&o);
  for (size_t i = 0; i < n; ++i) d[i] += s[i];
}

uint64_t PeerCounters::rejects() const {
  uint64_t t = 0;
  for (uint64_t v : reject) t += v;
  return t;
}

}  // namespace imago::rel
