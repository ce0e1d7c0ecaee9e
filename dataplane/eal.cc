// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/eal.h"

#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "dataplane/eal_args.h"
#include "dataplane/if_state.h"
#include "dataplane/log.h"

namespace imago::dp {
namespace {

// Written by the signal handler or any thread; read by every lcore loop. Relaxed is enough:
// the flag carries no data, loops only need to see it eventually.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "used from a signal handler");

void on_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

std::string g_runtime_dir;  // set by eal_own_runtime_dir(); control path only
bool g_started = false;     // rte_eal_init() succeeded once in this process; control path only
bool g_leave_devices = false;  // eal_leave_devices(); control path only

}  // namespace

int eal_start(const std::string& prog, const std::vector<std::string>& eal_args) {
  if (const std::string dup = duplicate_vdev(eal_args); !dup.empty()) {
    IMAGO_LOG(ERR, dataplane, "%s\n", dup.c_str());
    return -EINVAL;
  }
  // EAL may keep pointers into argv (e.g. vdev arguments): the strings live for the process.
  static std::vector<std::string> owned;
  owned.assign(1, prog.empty() ? "imago" : prog);
  owned.insert(owned.end(), eal_args.begin(), eal_args.end());
  static std::vector<char*> argv;
  argv.clear();
  for (auto& s : owned) argv.push_back(s.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(owned.size()), argv.data()) < 0) {
    int err = rte_errno;
    // EALREADY: an earlier rte_eal_init() of this process got far enough to refuse any other.
    if (err == EALREADY) IMAGO_LOG(ERR, dataplane, "EAL starts once per process: attach again in a new process\n");
    else IMAGO_LOG(ERR, dataplane, "EAL initialisation failed: %s\n", err ? rte_strerror(err) : "see EAL's messages");
    return err ? -err : -EIO;  // EAL does not always set rte_errno
  }
  g_started = true;
  return 0;
}

bool eal_was_started() { return g_started; }

void eal_own_runtime_dir() {
  g_runtime_dir = rte_eal_get_runtime_dir();
  sweep_dead_runtime_dirs(std::filesystem::path(g_runtime_dir).parent_path().string());
}

namespace {

// A primary's hugepage files (<hugetlbfs mount>/<prefix>map_N) outlive rte_eal_cleanup() so
// that secondaries could still map them; once the primary is done they are litter.
void remove_hugepage_files(const std::string& prefix) {
  std::ifstream mounts("/proc/mounts");
  std::string dev, dir, type, rest;
  while (mounts >> dev >> dir >> type && std::getline(mounts, rest)) {
    if (type != "hugetlbfs") continue;
    std::error_code ec;  // best effort, as for the runtime directory
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind(prefix + "map_", 0) == 0) std::filesystem::remove(e.path(), ec);
  }
}

// Whether a socket of @p dir is listened on by another process (ours, telemetry's, outlives
// rte_eal_cleanup()): it shares the prefix (--no-shconf lets primaries do so) and still needs
// the directory.
bool runtime_dir_in_use(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (!e.is_socket(ec)) continue;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    const std::string path = e.path().string();
    if (path.size() >= sizeof sa.sun_path) continue;
    path.copy(sa.sun_path, path.size());
    for (int type : {SOCK_SEQPACKET, SOCK_STREAM}) {
      const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      ucred who{};
      socklen_t len = sizeof who;
      const bool other = connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0 &&
                         getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &who, &len) == 0 && who.pid != getpid();
      close(fd);
      if (other) return true;
    }
  }
  return false;
}

}  // namespace

void eal_leave_devices() { g_leave_devices = true; }

std::string no_port_message(const std::string& how) {
  if (rte_devargs_type_count(RTE_DEVTYPE_VIRTUAL) == 0) return "no port: give " + how;
  return "no port: the --vdev given did not come up (" + vdevs_not_up() +
         "; see DPDK's lines above: no such interface, a memif socket already in use, a file that does not exist, ...)";
}

std::string vdevs_not_up() {
  std::string out;
  struct rte_devargs* da;
  RTE_EAL_DEVARGS_FOREACH("vdev", da) {
    uint16_t id;
    if (rte_eth_dev_get_port_by_name(da->name, &id) == 0) continue;
    out += (out.empty() ? "" : ", ") + std::string(da->name);
    const std::string args = da->args != nullptr ? da->args : "";
    if (!args.empty()) out += "," + args;
    // net_af_packet's iface=NAME: why it failed, when this process can tell.
    const size_t at = args.find("iface=");
    if (std::string(da->name).rfind("net_af_packet", 0) != 0 || at == std::string::npos) continue;
    const size_t end = args.find(',', at);
    const std::string iface = args.substr(at + 6, end == std::string::npos ? end : end - at - 6);
    out += ": " + af_packet_open_failure(iface);
  }
  return out;
}

int eal_stop() {
  const bool primary = rte_eal_process_type() == RTE_PROC_PRIMARY;
  // Skipped, the process ends all the same: the kernel frees what EAL held.
  int rc = g_leave_devices ? 0 : rte_eal_cleanup();
  if (!g_runtime_dir.empty() && runtime_dir_in_use(g_runtime_dir)) {
    IMAGO_LOG(INFO, dataplane, "%s left: another process of this prefix still uses it\n", g_runtime_dir.c_str());
  } else if (!g_runtime_dir.empty()) {
    std::error_code ec;  // best effort: a failure leaves a directory, never an error
    std::filesystem::remove_all(g_runtime_dir, ec);
    if (primary) remove_hugepage_files(std::filesystem::path(g_runtime_dir).filename().string());
  }
  g_runtime_dir.clear();
  return rc;
}

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }
void request_stop() { g_stop.store(true, std::memory_order_relaxed); }
void clear_stop() { g_stop.store(false, std::memory_order_relaxed); }

}  // namespace imago::dp
