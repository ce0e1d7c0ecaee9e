// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/if_state.h"

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

int iface_claim(unsigned if_index) {
  char name[IF_NAMESIZE];
  struct stat ns {};
  if (if_indextoname(if_index, name) == nullptr || stat("/proc/self/ns/net", &ns) != 0) return 0;
  mkdir("/run/imago", 0755);  // best effort: without it nothing is claimed, as before
  const std::string path = "/run/imago/iface-" + std::to_string(ns.st_ino) + "-" + name + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;  // held (the fd stays open) until the process ends
  const int err = errno;
  close(fd);
  return err == EWOULDBLOCK ? -EBUSY : 0;
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
