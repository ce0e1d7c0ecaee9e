// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/fault_model.h"

#include <cerrno>
#include <charconv>
#include <cstdio>

namespace imago::dp {
namespace {

// One key of the spec: a probability, a microsecond count or the seed.
struct Knob {
  const char* key;
  double FaultConfig::*prob;
  uint32_t FaultConfig::*micros;
};

constexpr Knob kKnobs[] = {
    {"loss", &FaultConfig::drop, nullptr},
    {"burst", &FaultConfig::burst_enter, nullptr},
    {"burst-exit", &FaultConfig::burst_exit, nullptr},
    {"burst-drop", &FaultConfig::burst_drop, nullptr},
    {"dup", &FaultConfig::dup, nullptr},
    {"corrupt", &FaultConfig::corrupt, nullptr},
    {"reorder", &FaultConfig::reorder, nullptr},
    {"reorder-us", nullptr, &FaultConfig::reorder_us},
    {"delay-us", nullptr, &FaultConfig::delay_us},
    {"jitter-us", nullptr, &FaultConfig::jitter_us},
};

template <typename T>
bool parse_number(std::string_view s, T& v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}

int set_knob(FaultConfig& c, std::string_view key, std::string_view val, std::string& err) {
  if (key == "seed") {
    if (parse_number(val, c.seed)) return 0;
    err = "fault spec: seed wants an unsigned integer, got '" + std::string(val) + "'";
    return -EINVAL;
  }
  for (const Knob& k : kKnobs) {
    if (key != k.key) continue;
    if (k.prob) {
      double p;
      if (parse_number(val, p) && p >= 0 && p <= 1) {
        c.*k.prob = p;
        return 0;
      }
      err = "fault spec: " + std::string(key) + " wants a probability in [0,1], got '" +
            std::string(val) + "'";
    } else {
      uint32_t us;
      if (parse_number(val, us) && us <= 10'000'000) {
        c.*k.micros = us;
        return 0;
      }
      err = "fault spec: " + std::string(key) + " wants microseconds in [0,10000000], got '" +
            std::string(val) + "'";
    }
    return -EINVAL;
  }
  err = "fault spec: unknown key '" + std::string(key) +
        "' (known: loss burst burst-exit burst-drop dup corrupt reorder reorder-us delay-us "
        "jitter-us seed)";
  return -EINVAL;
}

// Defaults and knobs that only qualify another (burst shape, reorder hold) stay unprinted
// unless the knob they qualify is on.
bool knob_shown(const FaultConfig& c, const Knob& k) {
  if (k.prob == &FaultConfig::burst_exit || k.prob == &FaultConfig::burst_drop) {
    return c.burst_enter > 0;
  }
  if (k.micros == &FaultConfig::reorder_us) return c.reorder > 0;
  return k.prob ? c.*k.prob > 0 : c.*k.micros > 0;
}

}  // namespace

bool FaultConfig::active() const {
  return drop > 0 || burst_enter > 0 || dup > 0 || corrupt > 0 || reorder > 0 || delay_us > 0 ||
         jitter_us > 0;
}

int parse_fault_spec(std::string_view spec, FaultConfig& out, std::string& err, bool* seed_given) {
  FaultConfig c = out;
  if (seed_given != nullptr) *seed_given = false;
  if (spec == "none" || spec.empty()) {
    out = FaultConfig{.seed = out.seed};
    return 0;
  }
  std::string given = ",";  // the keys so far, each between commas
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      err = "fault spec: '" + std::string(item) + "' is not key=value";
      return -EINVAL;
    }
    // A key given twice: the last one was taken without a word (an outside tester).
    const std::string key(item.substr(0, eq));
    if (given.find("," + key + ",") != std::string::npos) {
      err = "fault spec: " + key + " given twice: give each key once";
      return -EINVAL;
    }
    given += key + ",";
    if (int rc = set_knob(c, item.substr(0, eq), item.substr(eq + 1), err); rc < 0) return rc;
  }
  if (seed_given != nullptr) *seed_given = given.find(",seed,") != std::string::npos;
  out = c;
  return 0;
}

std::string format_fault_spec(const FaultConfig& c) {
  if (!c.active()) return "none";
  std::string s;
  char buf[64];
  for (const Knob& k : kKnobs) {
    if (!knob_shown(c, k)) continue;
    s += k.key;
    s += '=';
    // Shortest text that parses back to the same double (%g would round to 6 digits).
    char* end = k.prob ? std::to_chars(buf, buf + sizeof buf, c.*k.prob).ptr
                       : std::to_chars(buf, buf + sizeof buf, c.*k.micros).ptr;
    s.append(buf, end);
    s += ',';
  }
  std::snprintf(buf, sizeof buf, "seed=%llu", static_cast<unsigned long long>(c.seed));
  return s + buf;
}

bool FaultModel::lost_in_burst() {
  if (cfg_.burst_enter <= 0) return false;
  bad_state_ = bad_state_ ? !rng_.chance(cfg_.burst_exit) : rng_.chance(cfg_.burst_enter);
  return bad_state_ && rng_.chance(cfg_.burst_drop);
}

FaultVerdict FaultModel::next() {
  FaultVerdict v;
  ++counters_.frames_in;
  if (lost_in_burst()) {
    ++counters_.burst_dropped;
    v.drop = true;
    return v;
  }
  if (rng_.chance(cfg_.drop)) {
    ++counters_.dropped;
    v.drop = true;
    return v;
  }
  v.dup = rng_.chance(cfg_.dup);
  v.corrupt = rng_.chance(cfg_.corrupt);
  v.reordered = rng_.chance(cfg_.reorder);
  if (v.corrupt) v.corrupt_pick = static_cast<uint32_t>(rng_.next());
  uint64_t us = cfg_.delay_us;
  if (cfg_.jitter_us) us += rng_.below(uint64_t{cfg_.jitter_us} + 1);
  if (us) ++counters_.delayed;
  if (v.reordered) us += cfg_.reorder_us;
  v.delay_ns = us * 1000;
  counters_.duplicated += v.dup;
  counters_.corrupted += v.corrupt;
  counters_.reordered += v.reordered;
  return v;
}

}  // namespace imago::dp
