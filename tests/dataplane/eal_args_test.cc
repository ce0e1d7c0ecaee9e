// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for dataplane/eal_args.h: the `[EAL args --] app args` split and EAL defaults.
#include "dataplane/eal_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace imago::dp {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ArgSplit split(const std::vector<const char*>& argv) {
  return split_args(static_cast<int>(argv.size()), argv.data());
}

// @return the value following @p flag in @p args, or "" when the flag is absent.
std::string value_after(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
}

TEST(EalArgs, SplitsAtTheDoubleDash) {
  // Do: split "prog -l 0-1 --vdev=x -- --pair -n 5".
  auto s = split({"prog", "-l", "0-1", "--vdev=x", "--", "--pair", "-n", "5"});
  // Expect: EAL gets what precedes "--", the app what follows; the split is explicit.
  EXPECT_EQ(s.prog, "prog");
  EXPECT_THAT(s.eal, ElementsAre("-l", "0-1", "--vdev=x"));
  EXPECT_THAT(s.app, ElementsAre("--pair", "-n", "5"));
  EXPECT_TRUE(s.explicit_eal);
}

TEST(EalArgs, SplitsOnlyAtTheFirstDoubleDash) {
  // Do: split a command line holding "--" twice.
  auto s = split({"prog", "-l", "0", "--", "--pair", "--", "x"});
  // Expect: the second "--" belongs to the app.
  EXPECT_THAT(s.eal, ElementsAre("-l", "0"));
  EXPECT_THAT(s.app, ElementsAre("--pair", "--", "x"));
}

TEST(EalArgs, WithoutDoubleDashEverythingIsTheApps) {
  // Do: split a command line with no "--".
  auto s = split({"prog", "--pair", "-l", "0"});
  // Expect: no EAL args, every argument to the app, not explicit.
  EXPECT_THAT(s.eal, IsEmpty());
  EXPECT_THAT(s.app, ElementsAre("--pair", "-l", "0"));
  EXPECT_FALSE(s.explicit_eal);
}

TEST(EalArgs, DoubleDashFirstGivesEmptyExplicitEal) {
  // Do: split "prog -- --pair".
  auto s = split({"prog", "--", "--pair"});
  // Expect: explicit but empty EAL args (the user asked for EAL's own defaults).
  EXPECT_TRUE(s.explicit_eal);
  EXPECT_THAT(s.eal, IsEmpty());
  EXPECT_THAT(s.app, ElementsAre("--pair"));
}

TEST(EalArgs, DoubleDashLastGivesNoAppArgs) {
  // Do: split "prog -l 0 --".
  auto s = split({"prog", "-l", "0", "--"});
  // Expect: all arguments to EAL, none to the app.
  EXPECT_TRUE(s.explicit_eal);
  EXPECT_THAT(s.eal, ElementsAre("-l", "0"));
  EXPECT_THAT(s.app, IsEmpty());
}

TEST(EalArgs, ProgramNameAloneSplitsToNothing) {
  // Do: split argv holding only the program name, then an empty argv.
  auto s = split({"prog"});
  auto none = split_args(0, nullptr);
  // Expect: nothing for EAL or the app; the empty argv leaves prog empty.
  EXPECT_EQ(s.prog, "prog");
  EXPECT_THAT(s.eal, IsEmpty());
  EXPECT_THAT(s.app, IsEmpty());
  EXPECT_FALSE(s.explicit_eal);
  EXPECT_EQ(none.prog, "");
  EXPECT_THAT(none.app, IsEmpty());
}

TEST(EalArgs, DefaultsAreHugepagelessAndPciless) {
  // Do: build the default EAL args with nothing configured.
  auto a = default_eal_args(EalDefaults{}, 4242);
  // Expect: exactly the documented embedded defaults, in order.
  EXPECT_THAT(a, ElementsAre("--no-huge", "-m", "512", "--no-shconf", "--no-pci", "--iova-mode=va",
                             "--no-telemetry", "--file-prefix", "imago-4242",
                             "--log-level=lib.*:warning"));
}

TEST(EalArgs, SharedPrimaryKeepsHugepagesAndItsConfig) {
  // Do: build the defaults of a primary that secondary processes attach to.
  EalDefaults d;
  d.shared = true;
  d.file_prefix = "demo";
  auto a = default_eal_args(d, 4242);
  // Expect: a primary with the shared config; no --no-huge, -m or --no-shconf.
  EXPECT_THAT(a, ElementsAre("--proc-type=primary", "--no-pci", "--iova-mode=va", "--no-telemetry", "--file-prefix",
                             "demo", "--log-level=lib.*:warning"));
}

TEST(EalArgs, FilePrefixUsesThePid) {
  // Do: build defaults for two different pids.
  auto a = default_eal_args(EalDefaults{}, 1);
  auto b = default_eal_args(EalDefaults{}, 99999);
  // Expect: each gets its own prefix, so concurrent runs do not share runtime files.
  EXPECT_EQ(value_after(a, "--file-prefix"), "imago-1");
  EXPECT_EQ(value_after(b, "--file-prefix"), "imago-99999");
}

TEST(EalArgs, ExplicitFilePrefixOverridesThePid) {
  // Do: set a file prefix.
  EalDefaults d;
  d.file_prefix = "dts-run";
  auto a = default_eal_args(d, 77);
  // Expect: it is used verbatim and the pid is not.
  EXPECT_EQ(value_after(a, "--file-prefix"), "dts-run");
  EXPECT_EQ(std::count(a.begin(), a.end(), "imago-77"), 0);
}

TEST(EalArgs, VdevsLcoresMemoryAndLogLevelAreEmitted) {
  // Do: configure two vdevs, an lcore list, memory and a log level.
  EalDefaults d;
  d.vdevs = {"net_ring0", "net_null0,size=64"};
  d.lcores = "0-1";
  d.memory_mb = 256;
  d.log_level = "*:debug";
  auto a = default_eal_args(d, 5);
  // Expect: -l with its value, one --vdev= per vdev in order, -m and --log-level as given.
  EXPECT_EQ(value_after(a, "-l"), "0-1");
  EXPECT_EQ(value_after(a, "-m"), "256");
  EXPECT_THAT(std::vector<std::string>(a.end() - 3, a.end()),
              ElementsAre("--vdev=net_ring0", "--vdev=net_null0,size=64", "--log-level=*:debug"));
}

TEST(EalArgs, EmptyLcoresAndLogLevelAreOmitted) {
  // Do: clear the log level and leave lcores empty.
  EalDefaults d;
  d.log_level.clear();
  auto a = default_eal_args(d, 5);
  // Expect: neither -l nor any --log-level argument appears.
  EXPECT_EQ(std::count(a.begin(), a.end(), "-l"), 0);
  EXPECT_TRUE(std::none_of(a.begin(), a.end(),
                           [](const std::string& s) { return s.rfind("--log-level", 0) == 0; }));
}

TEST(EalArgs, TelemetryIsOffUnlessAsked) {
  EalDefaults d;
  auto off = default_eal_args(d, 5);
  EXPECT_EQ(std::count(off.begin(), off.end(), "--no-telemetry"), 1);
  d.telemetry = true;
  auto on = default_eal_args(d, 5);
  EXPECT_EQ(std::count(on.begin(), on.end(), "--no-telemetry"), 0);
}

TEST(EalArgs, AnInterfaceOpensThroughEitherKernelPmd) {
  IfacePmd p = IfacePmd::kAfPacket;
  EXPECT_TRUE(parse_iface_pmd("af_xdp", p));
  EXPECT_EQ(p, IfacePmd::kAfXdp);
  EXPECT_EQ(iface_vdev(p, "veth1"), "net_af_xdp0,iface=veth1");
  EXPECT_TRUE(parse_iface_pmd("af_packet", p));
  EXPECT_EQ(iface_vdev(p, "veth1"), "net_af_packet0,iface=veth1");
  for (const char* bad : {"", "af_xdp0", "AF_XDP", "pcap"}) EXPECT_FALSE(parse_iface_pmd(bad, p)) << bad;
  EXPECT_STREQ(iface_pmd_name(IfacePmd::kAfXdp), "af_xdp");
}

TEST(EalArgs, ALcoreMapGoesToLcoresAPlainListToL) {
  EalDefaults d;
  d.lcores = "0@(0-1)";
  auto a = default_eal_args(d, 5);
  EXPECT_EQ(std::count(a.begin(), a.end(), "--lcores"), 1);
  EXPECT_EQ(std::count(a.begin(), a.end(), "-l"), 0);
  d.lcores = "0-1";
  a = default_eal_args(d, 5);
  EXPECT_EQ(std::count(a.begin(), a.end(), "-l"), 1);
}

// DPDK keeps the last of two --vdev of one name and drops the other without a word: a fabric
// node then had one port fewer than its links, and said only that.
TEST(EalArgs, TwoVdevsOfOneNameAreNamed) {
  EXPECT_EQ(duplicate_vdev({"--vdev=net_null0", "--vdev", "net_null1", "-l", "0"}), "");
  const std::string m = duplicate_vdev({"--no-huge", "--vdev", "net_af_packet0,iface=a", "--vdev=net_af_packet0,iface=b"});
  EXPECT_NE(m.find("--vdev net_af_packet0 given twice (net_af_packet0,iface=a and net_af_packet0,iface=b)"),
            std::string::npos) << m;
  EXPECT_NE(m.find("(net_af_packet0, net_af_packet1, ...)"), std::string::npos) << m;
  EXPECT_NE(duplicate_vdev({"--vdev=net_ring0", "--vdev=net_ring0"}), "");
  EXPECT_EQ(duplicate_vdev({"--vdev"}), "") << "a dangling --vdev is EAL's to refuse";
}

TEST(EalArgs, OnlyTheRuntimeDirectoriesOfDeadEmbeddedProcessesAreSwept) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("imago_sweep_" + std::to_string(getpid()));
  fs::remove_all(root);
  // A pid that is gone: a child that exited and was reaped.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  int st;
  ASSERT_EQ(waitpid(dead, &st, 0), dead);
  const std::vector<std::string> keep = {"imago-" + std::to_string(getpid()), "imago", "imago-12ab", "immc1",
                                         "imago-123456789012"};
  for (const std::string& n : keep) fs::create_directories(root / n);
  fs::create_directories(root / ("imago-" + std::to_string(dead)));
  std::ofstream(root / ("imago-" + std::to_string(dead)) / "config") << "x";
  EXPECT_EQ(sweep_dead_runtime_dirs(root.string()), 1u);
  EXPECT_FALSE(fs::exists(root / ("imago-" + std::to_string(dead))));
  for (const std::string& n : keep) EXPECT_TRUE(fs::exists(root / n)) << n;
  EXPECT_EQ(sweep_dead_runtime_dirs((root / "none").string()), 0u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace imago::dp
