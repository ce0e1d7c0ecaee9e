// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/if_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

int iface_promiscuous(unsigned if_index) {
  ifreq ifr{};
  if (if_indextoname(if_index, ifr.ifr_name) == nullptr) return -errno;
  const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  const int rc = ioctl(s, SIOCGIFFLAGS, &ifr) == 0 ? (ifr.ifr_flags & IFF_PROMISC) != 0 : -errno;
  close(s);
  return rc;
}

}  // namespace imago::dp
