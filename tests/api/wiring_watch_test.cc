/* SPDX-License-Identifier: BSD-3-Clause */
// imagod's miswiring lines (api/wiring_watch.h): a line when a counter that only miswiring
// (or forgery) moves grows, saying how much, at most one per kind every 10 s.
#include "api/wiring_watch.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace imago::api {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

struct Watch {
  WiringWatch w;
  dp::NodeSnapshot s;
  std::string out;
  Watch() { s.node_id = 7, s.redundant = true; }
  unsigned at(uint64_t t) {
    char buf[4096] = {};
    FILE* f = fmemopen(buf, sizeof buf, "w");
    unsigned n = w.check(s, t, f);
    std::fclose(f);
    out = buf;
    return n;
  }
};

TEST(WiringWatch, CrossedNetworksAreSaidOnceEveryTenSecondsWithHowManyFrames) {
  Watch x;
  x.s.link.spoofed = 5;  // before the watch began: not said
  EXPECT_EQ(x.at(1 * kSec), 0u);
  x.s.link.spoofed = 105, x.s.link_b.spoofed = 50;
  EXPECT_EQ(x.at(2 * kSec), 1u);
  EXPECT_NE(x.out.find("node 7 dropped 150 frames in a peer's name"), std::string::npos) << x.out;
  EXPECT_NE(x.out.find("networks A and B crossed"), std::string::npos) << x.out;
  x.s.link.spoofed = 300;
  EXPECT_EQ(x.at(3 * kSec), 0u);  // within 10 s of the last line
  x.s.link.spoofed = 400;
  EXPECT_EQ(x.at(13 * kSec), 1u);
  EXPECT_NE(x.out.find("dropped 295 frames"), std::string::npos) << x.out;  // since the last line
  EXPECT_EQ(x.at(30 * kSec), 0u);  // no growth: nothing to say
}

TEST(WiringWatch, APeerNotOnTwoNetworksAndANodeOnOneEachHaveTheirLine) {
  Watch x;
  EXPECT_EQ(x.at(1 * kSec), 0u);
  x.s.net_bad_shim = 9;
  x.s.total.reject[static_cast<size_t>(rel::Reject::kBadVersion)] = 4;
  EXPECT_EQ(x.at(2 * kSec), 2u);
  EXPECT_NE(x.out.find("dropped 9 frames without a valid two-network shim"), std::string::npos) << x.out;
  EXPECT_NE(x.out.find("dropped 4 frames of an unknown wire version"), std::string::npos) << x.out;
}

TEST(WiringWatch, RecordsTooLongOrFramesWithoutCrcAreSaid) {
  // An outside tester: two nodes with --mtu 1500 and 1400 stalled one way for good, 4.5 M
  // retransmissions, and nothing said (such peers now refuse each other at the handshake:
  // engine_test PeersStatingDifferentFrameSizes...); a peer restarted with --no-crc never
  // came up, silently.
  Watch x;
  EXPECT_EQ(x.at(1 * kSec), 0u);
  x.s.total.reject[static_cast<size_t>(rel::Reject::kBadRecord)] = 2797;
  x.s.total.reject[static_cast<size_t>(rel::Reject::kMissingCrc)] = 86;
  EXPECT_EQ(x.at(2 * kSec), 2u);
  EXPECT_NE(x.out.find("dropped 2797 frames with records this node cannot take (reject_bad_record): damaged or "
                       "forged frames"), std::string::npos) << x.out;
  EXPECT_NE(x.out.find("dropped 86 frames without a CRC (reject_missing_crc): a peer run with --no-crc"),
            std::string::npos) << x.out;
}

TEST(WiringWatch, ANodeOnOneNetworkIgnoresNetworkBsCounters) {
  Watch x;
  x.s.redundant = false;
  EXPECT_EQ(x.at(1 * kSec), 0u);
  x.s.link_b.spoofed = 10, x.s.net_bad_shim = 10;  // not its: not published for it
  EXPECT_EQ(x.at(2 * kSec), 0u);
  x.s.link.spoofed = 1;
  EXPECT_EQ(x.at(3 * kSec), 1u);
}

}  // namespace
}  // namespace imago::api
