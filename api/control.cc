// SPDX-License-Identifier: BSD-3-Clause
#include "api/control.h"

#include <rte_eal.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>

namespace imago::api {

// A killed process may linger as a zombie until its parent reaps it: that is gone too.
bool process_gone(int pid) {
  if (kill(pid, 0) < 0) return errno == ESRCH;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
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
