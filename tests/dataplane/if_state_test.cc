// SPDX-License-Identifier: BSD-3-Clause
// Interface claims (dataplane/if_state.h): one live process per interface, and the files of
// processes that ended do not pile up in /run/imago.
#include "dataplane/if_state.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace imago::dp {
namespace {

std::string claim_path(const char* ifname) {
  struct stat ns {};
  EXPECT_EQ(stat("/proc/self/ns/net", &ns), 0);
  return "/run/imago/iface-" + std::to_string(ns.st_ino) + "-" + ifname + ".lock";
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// Before, every interface and namespace ever claimed left its file behind (a killed process
// cannot remove its own): one per veth of every test namespace, for ever.
TEST(IfaceClaim, AClaimIsOneLiveProcessEachAndFilesLeftByEndedOnesGo) {
  const unsigned lo = if_nametoindex("lo");
  ASSERT_NE(lo, 0u);
  if (mkdir("/run/imago", 0755) != 0 && errno != EEXIST) GTEST_SKIP() << "cannot make /run/imago: " << strerror(errno);
  // A claim left by a process that ended: its file, held by nobody.
  const std::string stale = claim_path("imago-gone0");
  { std::ofstream(stale).put('\n'); }
  ASSERT_TRUE(exists(stale));
  // Do: claim lo here; then, from a child process, claim it again.
  ASSERT_EQ(iface_claim(lo), 0);
  EXPECT_FALSE(exists(stale)) << "a file nobody holds is left";
  EXPECT_TRUE(exists(claim_path("lo")));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(iface_claim(lo) == -EBUSY ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a second process claimed what this one holds";
  EXPECT_TRUE(exists(claim_path("lo"))) << "the sweep removed a file a live process holds";
}

}  // namespace
}  // namespace imago::dp
