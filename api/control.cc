// SPDX-License-Identifier: BSD-3-Clause
#include "api/control.h"

#include <rte_eal.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <sys/random.h>

#include <algorithm>
#include <atomic>
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

uint64_t ctl_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t ctl_time_left_ns(uint64_t deadline_ns) {
  constexpr uint64_t kMs = 1'000'000;
  const uint64_t now = ctl_clock_ns();
  if (deadline_ns <= now + kCtlMarginMs * kMs) return 0;
  return std::min(deadline_ns - now - kCtlMarginMs * kMs, kCtlGiveUpMs * kMs);
}

namespace {

// Unique per request for the process's life; from a random start, so that a reused pid's
// requests are not taken for its predecessor's.
uint64_t next_ctl_id() {
  static std::atomic<uint64_t> next{[] {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r) r = ctl_clock_ns() ^ (static_cast<uint64_t>(getpid()) << 32);
    return r;
  }()};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// One try of @p m, waiting up to @p wait_ns. @return true when the answer to this very
// request (id, pid, op) came, into @p m; DPDK may hand us an earlier request's late answer.
bool ctl_try(CtlMsg& m, uint64_t wait_ns) {
  rte_mp_msg req{};
  std::snprintf(req.name, sizeof req.name, "%s", kCtlAction);
  req.len_param = sizeof m;
  std::memcpy(req.param, &m, sizeof m);
  struct rte_mp_reply reply {};
  timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
  bool ours = false;
  if (rte_mp_request_sync(&req, &reply, &ts) == 0 && reply.nb_received == 1 &&
      reply.msgs[0].len_param == sizeof m) {
    CtlMsg a;
    std::memcpy(&a, reply.msgs[0].param, sizeof a);
    ours = a.id == m.id && a.pid == m.pid && a.op == m.op;
    if (ours) m = a;
  }
  std::free(reply.msgs);
  return ours;
}

}  // namespace

int ctl_request(CtlMsg& m) {
  constexpr uint64_t kMs = 1'000'000;
  m.version = kShmVersion;
  m.pid = getpid();
  m.id = next_ctl_id();
  m.deadline_ns = ctl_clock_ns() + kCtlGiveUpMs * kMs;
  for (;;) {
    const uint64_t now = ctl_clock_ns();
    if (now >= m.deadline_ns) return -ENOTCONN;
    if (ctl_try(m, std::min(m.deadline_ns - now, kCtlTryMs * kMs))) return m.rc;
    if (ctl_clock_ns() - now < 10 * kMs) usleep(10'000);  // refused at once: no busy loop
  }
}

}  // namespace imago::api
