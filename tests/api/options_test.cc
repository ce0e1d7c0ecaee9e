// SPDX-License-Identifier: BSD-3-Clause
// A node's command line (imagod, imago_attach_embedded()) as api::parse_runtime_options()
// checks it, without EAL: a line that says two things at once is refused with the reason,
// never taken with one of them silently dropped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rte_config.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>
#include <string>
#include <utility>
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

TEST(RuntimeOptionsTest, MorePeersThanANodeTakesAreRefusedOnTheCommandLine) {
  // Do: 32 peers, then 33 (before: taken, and the node failed to start with no reason).
  std::vector<std::string> args = {"--node-id", "1"};
  for (int id = 2; id <= 33; ++id) args.insert(args.end(), {"--peer", std::to_string(id)});
  std::string why;
  EXPECT_EQ(parse(args, &why), 0) << why;
  args.insert(args.end(), {"--peer", "34"});
  EXPECT_EQ(parse(args, &why), -EINVAL);
  EXPECT_NE(why.find("at most 32 peers"), std::string::npos) << why;
}

TEST(RuntimeOptionsTest, AnAddressOnNetworkBWithoutOneOnAIsRefused) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "1", "--redundancy", "duplicate", "--src-ip-b", "10.0.1.1"}, &why), -EINVAL);
  EXPECT_NE(why.find("--src-ip-b needs --src-ip"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--redundancy", "duplicate", "--src-ip", "10.0.0.1", "--src-ip-b", "10.0.1.1",
                   "--peer", "2@10.0.0.2"},
                  &why),
            0) << why;
}

// An outside tester: imagod without a --peer was refused only once EAL and its port were up
// ("failed to start", exit 1); a bad command line is exit 2.
TEST(RuntimeOptionsTest, ANodeWithoutPeersIsRefusedOnTheCommandLine) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "2", "--iface", "x0"}, &why), -EINVAL);
  EXPECT_NE(why.find("node 2 needs at least one --peer"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "2", "--iface", "x0", "--peer", "1@02:00:00:00:00:01"}, &why), 0) << why;
  EXPECT_EQ(parse({"--pair"}, &why), 0) << why;
}

// Run-to-completion has no engine lcore: one named was ignored (an outside tester).
TEST(RuntimeOptionsTest, AnEngineLcoreWithRunToCompletionIsRefused) {
  std::string why;
  EXPECT_EQ(parse({"--pair", "--run-to-completion", "--engine-lcore", "1"}, &why), -EINVAL);
  EXPECT_NE(why.find("--run-to-completion runs no engine lcore"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--run-to-completion", "--engine-lcore=0"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--engine-lcore", "1"}, &why), 0) << why;
  EXPECT_EQ(parse({"--pair", "--run-to-completion"}, &why), 0) << why;
}

// An IP address names a peer over UDP only: on Ethernet (no --src-ip) it was ignored, and
// the peer reached by broadcast (an outside tester).
TEST(RuntimeOptionsTest, APeersIpWithoutOurOwnIsRefused) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "1", "--peer", "2@10.0.0.2"}, &why), -EINVAL);
  EXPECT_NE(why.find("--peer 2@IP needs --src-ip "), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--redundancy", "duplicate", "--peer", kMacA, "--peer-b", "2@10.0.1.2"}, &why),
            -EINVAL);
  EXPECT_NE(why.find("--peer-b 2@IP needs --src-ip-b"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--src-ip", "10.0.0.1", "--peer", "2@10.0.0.2"}, &why), 0) << why;
}

TEST(RuntimeOptionsTest, PairRefusesWhatNamesAnotherNodeOrPort) {
  std::string why;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--node-id", "5"}, {"--peer", "7"}, {"--iface", "lo"}}) {
    std::vector<std::string> args = {"--pair"};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_EQ(parse(args, &why), -EINVAL) << extra[0];
    EXPECT_NE(why.find("--pair excludes"), std::string::npos) << why;
  }
  EXPECT_EQ(parse({"--pair", "--max-message", "1048576"}, &why), 0) << why;
}

// An outside tester: these were taken silently (the link options ignored without a fabric,
// the last --topology taken, a fabric peer's address ignored).
TEST(RuntimeOptionsTest, FabricOptionsThatCannotMeanAnythingAreRefused) {
  std::string why;
  EXPECT_EQ(parse({"--node-id", "1", "--link-miss", "5"}, &why), -EINVAL);
  EXPECT_NE(why.find("need --topology"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--link-hello-us", "500"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--node-id", "1", "--topology", "line:3", "--topology", "ring:3"}, &why), -EINVAL);
  EXPECT_NE(why.find("--topology given twice"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--topology", "line:3", "--peer", "3@02:00:00:00:00:03"}, &why), -EINVAL);
  EXPECT_NE(why.find("by id alone"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--topology", "line:3", "--peer", "3", "--link-miss", "5"}, &why), 0) << why;
  // A node with no link, or more than a node can have: refused at start before, exit 1.
  EXPECT_EQ(parse({"--node-id", "1", "--topology", "line:1"}, &why), -EINVAL);
  EXPECT_NE(why.find("node 1 has 0 ports: a fabric node has 1 to 16"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--topology", "mesh:18"}, &why), -EINVAL);
  EXPECT_NE(why.find("node 1 has 17 ports"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--topology", "mesh:17"}, &why), 0) << why;
}

// An outside tester: --failback-ms with duplicate and --pingpong-run with active-standby were
// taken and did nothing.
TEST(RuntimeOptionsTest, TwoNetworkOptionsOfAnotherModeAreRefused) {
  std::string why;
  EXPECT_EQ(parse({"--pair", "--redundancy", "duplicate", "--failback-ms", "100"}, &why), -EINVAL);
  EXPECT_NE(why.find("--failback-ms is for --redundancy active-standby, not duplicate"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--redundancy", "active-standby", "--pingpong-run", "4"}, &why), -EINVAL);
  EXPECT_NE(why.find("--pingpong-run is for --redundancy ping-pong"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--net-miss", "5"}, &why), -EINVAL);
  EXPECT_NE(why.find("need --redundancy MODE"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--redundancy", "ping-pong", "--pingpong-run", "4", "--net-miss", "5"}, &why), 0) << why;
  EXPECT_EQ(parse({"--pair", "--redundancy", "active-standby", "--failback-ms", "100"}, &why), 0) << why;
}

TEST(RuntimeOptionsTest, SizesAndTimesBeyondWhatTheyCanMeanAreRefused) {
  std::string why;
  // Each overflowed further down: a crash in DPDK's pool creation, an exit at once.
  EXPECT_EQ(parse({"--pair", "--pool-buffers", "16777217"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--pool-buffers", "4294967295"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--pool-buffers", "16777216"}, &why), 0) << why;
  EXPECT_EQ(parse({"--pair", "--duration", "9000000000"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--stats-period", "1e300"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--duration", "315360000"}, &why), 0) << why;
}

// An outside tester: `bad value '0' for --ack-delay-us US` and its like never said what the
// option takes; --engine-lcore 2147483648 was taken, and refused only once EAL had started.
TEST(RuntimeOptionsTest, AValueRefusedIsToldWithWhatTheOptionTakes) {
  std::string why;
  // Do: values beyond their ranges.
  // Expect: refused, naming the option, the value and the range.
  EXPECT_EQ(parse({"--pair", "--pool-max", "0"}, &why), -EINVAL);
  EXPECT_NE(why.find("bad value '0' for --pool-max BYTES"), std::string::npos) << why;
  EXPECT_NE(why.find("49..2048"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--engine-lcore", "2147483648"}, &why), -EINVAL);
  EXPECT_NE(why.find("bad value '2147483648' for --engine-lcore N"), std::string::npos) << why;
  EXPECT_NE(why.find("0.." + std::to_string(RTE_MAX_LCORE - 1)), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--engine-lcore", std::to_string(RTE_MAX_LCORE)}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--engine-lcore", std::to_string(RTE_MAX_LCORE - 1)}, &why), 0) << why;
}

// An outside tester: --file-prefix A --file-prefix B ran with B, without a word.
TEST(RuntimeOptionsTest, AnOptionWithAValueGivenTwiceIsRefused) {
  std::string why;
  // Do: give a value-taking option twice, a repeatable one twice, a flag twice.
  // Expect: only the first refused, by name.
  EXPECT_EQ(parse({"--pair", "--file-prefix", "A", "--file-prefix=B"}, &why), -EINVAL);
  EXPECT_NE(why.find("--file-prefix given twice"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--fault-rx", "loss=0.1", "--fault-rx", "loss=0.2"}, &why), -EINVAL);
  EXPECT_NE(why.find("--fault-rx given twice"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--peer", kMacA, "--peer", "3@02:00:00:00:00:03", "--vdev", "net_null0", "--vdev",
                   "net_null1"}, &why), 0) << why;
  EXPECT_EQ(parse({"--pair", "--pair", "--no-huge", "--no-huge"}, &why), 0) << why;
}

// An outside tester: --loss 0.5 --fault-rx loss=0.1 ran with 0.1, and --pmd af_xdp --pair
// opened nothing with it; both were taken without a word.
TEST(RuntimeOptionsTest, TwoOptionsForOneSettingAndAPmdWithNothingToOpenAreRefused) {
  std::string why;
  // Do: --loss with --fault-rx, --seed with a spec's seed=, --pmd without --iface.
  // Expect: each refused and said; --seed with a spec that has no seed, --pmd with --iface taken.
  EXPECT_EQ(parse({"--pair", "--loss", "0.5", "--fault-rx", "loss=0.1"}, &why), -EINVAL);
  EXPECT_NE(why.find("--loss P is --fault-rx loss=P"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--loss", "0.5", "--fault-rx", "dup=0.1"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--seed", "3", "--fault-rx", "dup=0.1,seed=4"}, &why), -EINVAL);
  EXPECT_NE(why.find("both set the faults' seed"), std::string::npos) << why;
  EXPECT_EQ(parse({"--pair", "--fault-rx=seed=1", "--seed", "3"}, &why), -EINVAL);
  EXPECT_EQ(parse({"--pair", "--seed", "3", "--fault-rx", "dup=0.1"}, &why), 0) << why;
  EXPECT_EQ(parse({"--pair", "--pmd", "af_xdp"}, &why), -EINVAL);
  EXPECT_NE(why.find("--pmd chooses what opens --iface"), std::string::npos) << why;
  EXPECT_EQ(parse({"--node-id", "1", "--iface", "x0", "--pmd", "af_xdp", "--peer", "2@02:00:00:00:00:02"}, &why), 0)
      << why;
}

// An outside tester: a FIFO given as --topology held the start for ever (opening it waits for
// a writer); imago-cp refuses such a file, "not a regular file".
TEST(RuntimeOptionsTest, ATopologyThatIsNoRegularFileIsRefusedUnread) {
  char dir[] = "/tmp/imago-options-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Do: parse --topology FIFO on a thread of its own.
  auto parsed = std::async(std::launch::async, [fifo] {
    std::string why;
    const int rc = parse({"--node-id", "1", "--topology", fifo}, &why);
    return std::make_pair(rc, why);
  });
  if (parsed.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "still waiting on the FIFO after 5 s";
    close(open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // a writer comes and goes: the wait ends
    parsed.wait();
  } else {
    // Expect: refused at once, and why.
    const auto [rc, why] = parsed.get();
    EXPECT_EQ(rc, -EINVAL);
    EXPECT_NE(why.find("--topology " + fifo + ": not a regular file"), std::string::npos) << why;
  }
  unlink(fifo.c_str());
  rmdir(dir);
}

// An outside tester: an error quoting bytes it was given sent them to the terminal raw.
TEST(RuntimeOptionsTest, AnErrorShowsControlBytesEscaped) {
  std::string why;
  // Do: a --topology value with an escape sequence in it.
  EXPECT_EQ(parse({"--node-id", "1", "--topology", "\x1b[31mred\xff"}, &why), -EINVAL);
  // Expect: the bytes written as \xNN, none of them raw.
  EXPECT_EQ(why.find('\x1b'), std::string::npos) << why;
  EXPECT_EQ(why.find('\xff'), std::string::npos) << why;
  EXPECT_NE(why.find("\\x1b[31mred\\xff"), std::string::npos) << why;
}

}  // namespace
}  // namespace imago::api
