// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/if_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace imago::dp {

namespace {

constexpr const char* kClaimDir = "/run/imago";

// A claim no process holds is left behind by one that ended (it cannot remove its file when
// killed): removed here, under its lock, so that one file per interface and namespace ever
// used does not pile up. A process that opened such a file just before finds it gone once it
// holds the lock (iface_claim() opens it again).
void sweep_claims() {
  DIR* d = opendir(kClaimDir);
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("iface-", 0) != 0 || name.compare(name.size() - 5, 5, ".lock") != 0) continue;
    const std::string path = std::string(kClaimDir) + "/" + name;
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) unlink(path.c_str());
    close(fd);
  }
  closedir(d);
}

// @return whether @p fd is still the file at @p path (a sweep may have removed it).
bool still_there(int fd, const std::string& path) {
  struct stat a {}, b {};
  return fstat(fd, &a) == 0 && stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

}  // namespace

int iface_claim(unsigned if_index) {
  char name[IF_NAMESIZE];
  struct stat ns {};
  if (if_indextoname(if_index, name) == nullptr || stat("/proc/self/ns/net", &ns) != 0) return 0;
  mkdir(kClaimDir, 0755);  // best effort: without it nothing is claimed, as before
  sweep_claims();
  const std::string path = std::string(kClaimDir) + "/iface-" + std::to_string(ns.st_ino) + "-" + name + ".lock";
  for (int tries = 0; tries < 8; ++tries) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(fd);
      return err == EWOULDBLOCK ? -EBUSY : 0;
    }
    if (still_there(fd, path)) return 0;  // held (the fd stays open) until the process ends
    close(fd);  // swept away under us: claim the new file
  }
  return 0;
}

namespace {

// @return the flags of interface @p if_index (its name in @p ifr), or a negative errno
// (-ENXIO: no interface has that index any more).
int iface_flags(unsigned if_index, ifreq* ifr) {
  if (if_indextoname(if_index, ifr->ifr_name) == nullptr) return -errno;
  const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  const int rc = ioctl(s, SIOCGIFFLAGS, ifr) == 0 ? 0 : -errno;
  close(s);
  return rc < 0 ? rc : static_cast<uint16_t>(ifr->ifr_flags);
}

}  // namespace

int iface_promiscuous(unsigned if_index) {
  ifreq ifr{};
  const int f = iface_flags(if_index, &ifr);
  return f < 0 ? f : (f & IFF_PROMISC) != 0;
}

int iface_running(unsigned if_index) {
  ifreq ifr{};
  const int f = iface_flags(if_index, &ifr);
  return f < 0 ? f : (f & IFF_UP) != 0 && (f & IFF_RUNNING) != 0;
}

// DPDK 22.11's net_af_packet puts each port's socket in fanout group (pid ^ ifindex) & 0xffff,
// and group numbers are per network namespace: two processes on the two ends of a veth pair
// (consecutive indexes) whose ids differ as the indexes do collide, and the second fails with
// EINVAL. Joining the same group here, on a socket of our own, tells that apart.
std::string af_packet_open_failure(const std::string& iface) {
  const unsigned idx = if_nametoindex(iface.c_str());
  if (idx == 0) return "no such interface in this network namespace";
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0 && (errno == EPERM || errno == EACCES)) return "no permission: raw sockets need root or CAP_NET_RAW";
  if (fd < 0) return std::string("a raw socket: ") + std::strerror(errno);
  sockaddr_ll sa{};
  sa.sll_family = AF_PACKET;
  sa.sll_protocol = htons(ETH_P_ALL);
  sa.sll_ifindex = static_cast<int>(idx);
  const unsigned group = (static_cast<unsigned>(getpid()) ^ idx) & 0xffff;
  const int arg = static_cast<int>(
      group | (PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG | PACKET_FANOUT_FLAG_ROLLOVER) << 16);
  const bool clash = bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0 &&
                     setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) != 0 && errno == EINVAL;
  close(fd);
  if (!clash) return "see DPDK's lines above";
  return "DPDK's net_af_packet numbers its socket group by process id XOR interface index (here " +
         std::to_string(group) + ") and another process in this network namespace holds that number on "
         "another interface: a clash of numbers, not of interfaces; start this process again (it gets "
         "another id)";
}

std::string port_open_failure(const std::string& pmd, const std::string& iface) {
  if (pmd.rfind("net_af_packet", 0) == 0) return af_packet_open_failure(iface);
  return "see DPDK's lines above: no such interface, or no permission?";
}

}  // namespace imago::dp
