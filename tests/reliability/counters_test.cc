// SPDX-License-Identifier: BSD-3-Clause
// Counters: every field of PeerCounters reaches the RESULT line and imagod's statistics
// through for_each_counter() / for_each_reject(), so none can be forgotten there.
#include "reliability/counters.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace imago::rel {
namespace {

TEST(Counters, TheVisitorsNameEveryFieldOnce) {
  // Do: visit a PeerCounters whose every field holds a distinct value.
  PeerCounters c;
  auto* f = reinterpret_cast<uint64_t*>(&c);
  constexpr size_t kFields = sizeof(PeerCounters) / sizeof(uint64_t);
  for (size_t i = 0; i < kFields; ++i) f[i] = i + 1;
  std::set<std::string> names;
  std::set<uint64_t> values;
  auto visit = [&](const char* k, uint64_t v) { names.insert(k), values.insert(v); };
  for_each_counter(c, visit);
  for_each_reject(c, visit);
  // Expect: every field but reject[kNone] seen once, under a name of its own.
  EXPECT_EQ(values.size(), kFields - 1);
  EXPECT_EQ(names.size(), kFields - 1);
  EXPECT_EQ(values.count(c.reject[0]), 0u) << "kNone is no reason";
}

}  // namespace
}  // namespace imago::rel
