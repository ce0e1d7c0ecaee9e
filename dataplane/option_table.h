/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The option-table machinery every imago program shares (imagod and the library, imago-perf,
 * the peers of bench/), after testpmd's parameters.c: one row per option with its argument,
 * help, parser and shown value, so --help, parsing and `show config` never disagree. And one
 * parser each for the values options take: numbers, IPv4 addresses, MAC addresses.
 *
 * Pure (no DPDK): unit-tested and fuzzed without EAL. EAL arguments are split off first
 * (eal_args.h); these tables see only what follows `--`.
 */
#pragma once

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "dataplane/encap_headers.h"

namespace imago::dp {

/** Parse all of @p s as a number of type T within [@p lo, @p hi]. @return false otherwise
 *  (and @p out unchanged). */
template <typename T>
bool parse_num(const std::string& s, T& out, T lo = std::numeric_limits<T>::lowest(),
               T hi = std::numeric_limits<T>::max()) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !(v >= lo && v <= hi)) return false;
  out = v;
  return true;
}

/** Parse dotted-quad @p s into @p out (host order). */
bool parse_ipv4(const std::string& s, uint32_t& out);
/** Parse @p s, six hex bytes separated by ':', into @p out. */
bool parse_mac(const std::string& s, MacAddr& out);
/** Parse a node id, 1 .. 2^32 - 1 (what the wire's node fields hold: never narrowed). */
bool parse_node_id(const std::string& s, uint64_t& id);
/** Parse a peer, ID, ID@MAC, ID@IPv4 or ID@IPv4@MAC (the next hop's MAC for a peer behind a
 *  router; the --peer option of every program): @p mac and @p ip are set only when given. */
bool parse_peer(const std::string& s, uint64_t& id, MacAddr& mac, uint32_t& ip);

/** @return the shortest text that reads back as @p v ("0.1", not "0.100000"). */
std::string format_num(double v);
/** @return @p ip (host order) as a dotted quad. */
std::string format_ipv4(uint32_t ip);
/** @return @p m as aa:bb:cc:dd:ee:ff. */
std::string format_mac(const MacAddr& m);

/** One option of a program whose settings are a T. */
template <typename T>
struct OptionRow {
  const char* name;  ///< without the leading "--"
  const char* arg;   ///< what the value is, for --help; nullptr: a flag without value
  const char* help;
  std::function<bool(T&, const std::string&)> set;  ///< false: a bad value
  std::function<std::string(const T&)> show;        ///< the value as set (empty: shows nothing)
};

template <typename T>
using OptionTable = std::vector<OptionRow<T>>;

/** @return the row of @p table named @p name (without "--"), or nullptr. */
template <typename T>
const OptionRow<T>* find_option(const OptionTable<T>& table, const std::string& name) {
  for (const OptionRow<T>& r : table)
    if (name == r.name) return &r;
  return nullptr;
}

/**
 * Parse @p args ("--name value", "--name=value", "--flag") into @p o through @p table.
 * @return 0; 1 for -h or --help; -EINVAL with the reason in @p err (unknown option, missing
 * or bad value: the value, then the row's help).
 */
template <typename T>
int parse_option_table(const OptionTable<T>& table, const std::vector<std::string>& args, T& o,
                       std::string* err) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") return 1;
    std::string name = a.rfind("--", 0) == 0 ? a.substr(2) : std::string();
    std::string value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) value = name.substr(eq + 1), name.resize(eq);
    const OptionRow<T>* r = name.empty() ? nullptr : find_option(table, name);
    if (r == nullptr) return *err = "unknown option '" + a + "' (see --help)", -EINVAL;
    if (r->arg != nullptr && eq == std::string::npos) {
      if (i + 1 == args.size()) return *err = "--" + name + " needs " + r->arg, -EINVAL;
      value = args[++i];
    }
    if (r->arg == nullptr && eq != std::string::npos) return *err = "--" + name + " takes no value", -EINVAL;
    if (!r->set(o, value)) {  // the row's help says what it takes (the range)
      *err = "bad value '" + value + "' for --" + name + (r->arg ? std::string(" ") + r->arg : "") + ": " + r->help;
      return -EINVAL;
    }
  }
  return 0;
}

/** @return the names (without "--") of the options of @p table that @p args gives, in
 *  order, whatever their values (a default given is given). Values are skipped, not read as
 *  names. */
template <typename T>
std::vector<std::string> given_options(const OptionTable<T>& table, const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) != 0) continue;
    std::string name = args[i].substr(2);
    const size_t eq = name.find('=');
    if (eq != std::string::npos) name.resize(eq);
    const OptionRow<T>* r = find_option(table, name);
    if (r == nullptr) continue;
    names.push_back(name);
    if (r->arg != nullptr && eq == std::string::npos) ++i;  // its value
  }
  return names;
}

/** Refuse an option of @p table that takes a value and is among @p given (given_options())
 *  twice: the second would replace the first without a word. @p repeatable names those that
 *  add one more each time (a peer, a port). @return 0, or -EINVAL with the reason in @p err. */
template <typename T>
int refuse_repeats(const OptionTable<T>& table, const std::vector<std::string>& given,
                   const std::vector<std::string>& repeatable, std::string* err) {
  std::vector<std::string> seen;
  for (const std::string& name : given) {
    const bool repeats = std::find(repeatable.begin(), repeatable.end(), name) != repeatable.end();
    if (find_option(table, name)->arg == nullptr || repeats) continue;
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      std::string only;
      for (const std::string& n : repeatable) only += (only.empty() ? "--" : ", --") + n;
      const char* verb = repeatable.size() == 1 ? " repeats)" : " repeat)";
      *err = "--" + name + " given twice: it takes one value" + (only.empty() ? "" : " (only " + only + verb);
      return -EINVAL;
    }
    seen.push_back(name);
  }
  return 0;
}

/** Write one line per row of @p table to @p f: name, argument, help and, in brackets, the
 *  value @p defaults shows; then -h/--help. */
template <typename T>
void print_option_table(FILE* f, const OptionTable<T>& table, const T& defaults) {
  for (const OptionRow<T>& r : table) {
    const std::string lhs = std::string("--") + r.name + (r.arg ? std::string(" ") + r.arg : "");
    const std::string def = r.show ? r.show(defaults) : std::string();
    std::fprintf(f, "  %-28s %s%s\n", lhs.c_str(), r.help, def.empty() ? "" : (" [" + def + "]").c_str());
  }
  std::fprintf(f, "  %-28s %s\n", "-h, --help", "this text");
}

}  // namespace imago::dp
