// SPDX-License-Identifier: BSD-3-Clause
#include "api/control.h"

#include <rte_eal.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ctime>
#include <string>
#include <string_view>

namespace imago::api {

std::vector<int> live_secondaries(const std::string& prefix) {
  std::vector<int> pids;
  std::error_code ec;
  constexpr std::string_view kSock = "mp_socket_";
  for (const auto& f : std::filesystem::directory_iterator(dpdk_runtime_dir(prefix), ec)) {
    const std::string name = f.path().filename().string();
    if (name.size() <= kSock.size() || name.compare(0, kSock.size(), kSock) != 0) continue;
    const int pid = std::atoi(name.c_str() + kSock.size());  // mp_socket_PID_TSC; the primary's has none
    if (pid > 0 && pid != getpid() && !process_gone(pid)) pids.push_back(pid);
  }
  return pids;
}

bool primary_runs(const std::string& prefix) {
  const std::string path = dpdk_runtime_dir(prefix) + "/config";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock l {};
  l.l_type = F_WRLCK;  // would a write lock be refused? (F_GETLK takes nothing)
  l.l_whence = SEEK_SET;
  const bool held = fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK;
  close(fd);  // this process held no lock on it: closing drops none
  return held;
}

// A killed process may linger as a zombie until its parent reaps it: that is gone too.
bool process_gone(int pid) {
  if (kill(pid, 0) < 0) return errno == ESRCH;
  // read(2), not a stream: the process may vanish while we read (ESRCH), and libstdc++'s
  // filebuf throws on that.
  char path[32], buf[512];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return n < 0 && errno == ESRCH;
  const std::string_view stat(buf, static_cast<size_t>(n));
  const size_t paren = stat.rfind(')');
  return paren != std::string_view::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

int ctl_request(CtlMsg& m) {
  m.version = kShmVersion;
  m.pid = getpid();
  rte_mp_msg req{};
  std::snprintf(req.name, sizeof req.name, "%s", kCtlAction);
  req.len_param = sizeof m;
  std::memcpy(req.param, &m, sizeof m);
  struct rte_mp_reply reply {};
  timespec ts{kCtlTimeoutMs / 1000, (kCtlTimeoutMs % 1000) * 1000000L};
  int rc = -ENOTCONN;
  if (rte_mp_request_sync(&req, &reply, &ts) == 0 && reply.nb_received == 1 &&
      reply.msgs[0].len_param == sizeof m) {
    std::memcpy(&m, reply.msgs[0].param, sizeof m);
    rc = m.rc;
  }
  std::free(reply.msgs);
  return rc;
}

}  // namespace imago::api
