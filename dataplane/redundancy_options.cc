// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/redundancy_options.h"

#include <cerrno>

namespace imago::dp {

// An outside tester: --failback-ms with duplicate, --pingpong-run with active-standby, were
// taken and did nothing.
int check_redundancy(const RedundancyOptions& r, std::string* err) {
  using G = RedundancyOptions::Given;
  if (r.given != 0 && !r.on)
    return *err = "--heartbeat-us, --net-miss, --net-fail-threshold, --net-fail-window-ms, --net-heal-ms, "
                  "--pingpong-run and --failback-ms need --redundancy MODE", -EINVAL;
  if ((r.given & G::kPingpongRun) && r.cfg.mode != rel::red::Mode::kPingPong)
    return *err = std::string("--pingpong-run is for --redundancy ping-pong, not ") + rel::red::mode_name(r.cfg.mode),
           -EINVAL;
  if ((r.given & G::kFailback) && r.cfg.mode != rel::red::Mode::kActiveStandby)
    return *err = std::string("--failback-ms is for --redundancy active-standby, not ") +
                  rel::red::mode_name(r.cfg.mode), -EINVAL;
  return 0;
}

}  // namespace imago::dp
