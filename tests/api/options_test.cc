// SPDX-License-Identifier: BSD-3-Clause
// A node's command line (imagod, imago_attach_embedded()) as api::parse_runtime_options()
// checks it, without EAL: a line that says two things at once is refused with the reason,
// never taken with one of them silently dropped.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "api/options.h"

namespace imago::api {
namespace {

// @return parse_runtime_options()'s verdict on @p args, its reason in *why.
int parse(std::vector<std::string> args, std::string* why) {
  RuntimeOptions o;
  return parse_runtime_options(args, o, why);
}

constexpr const char* kMacA = "2@02:00:00:00:00:02";
constexpr const char* kMacB = "2@02:00:00:00:01:02";

TEST(RuntimeOptionsTest, TwoNetworksTakeTheirOwnInterfacesAndPeers) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "1", "--iface", "va", "--iface-b", "vb", "--redundancy", "duplicate", "--peer", kMacA,
                   "--peer-b", kMacB}, &why), 0) << why;
}

TEST(RuntimeOptionsTest, NetworkBOnNetworkAsInterfaceIsRefused) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "1", "--iface", "va", "--iface-b", "va", "--redundancy", "duplicate"}, &why), -EINVAL);
  EXPECT_NE(why.find("network B needs one of its own"), std::string::npos) << why;
}

TEST(RuntimeOptionsTest, APeerGivenTwiceIsRefusedNotTheLastTaken) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "1", "--peer", kMacA, "--peer", "2@02:00:00:00:00:09"}, &why), -EINVAL);
  EXPECT_NE(why.find("--peer 2 given twice"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--iface", "va", "--iface-b", "vb", "--redundancy", "duplicate", "--peer", kMacA,
                   "--peer-b", kMacB, "--peer-b", "2@02:00:00:00:01:09"}, &why), -EINVAL);
  EXPECT_NE(why.find("--peer-b 2 given twice"), std::string::npos) << why;
}

TEST(RuntimeOptionsTest, AnAddressOnNetworkBWithoutOneOnAIsRefused) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "1", "--redundancy", "duplicate", "--src-ip-b", "10.0.1.1"}, &why), -EINVAL);
  EXPECT_NE(why.find("--src-ip-b needs --src-ip"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--redundancy", "duplicate", "--src-ip", "10.0.0.1", "--src-ip-b", "10.0.1.1"}, &why),
            0) << why;
}

}  // namespace
}  // namespace imago::api
