// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/log.h"

namespace imago::dp {

LogTypes g_logtypes = {RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1,
                       RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1};

namespace {
// Registered before main() so EAL's --log-level=imago.*:debug finds them while parsing.
__attribute__((constructor)) void register_logtypes() {
  g_logtypes.dataplane = rte_log_register_type_and_pick_level("imago.dataplane", RTE_LOG_INFO);
  g_logtypes.fault = rte_log_register_type_and_pick_level("imago.fault", RTE_LOG_INFO);
  g_logtypes.lcore = rte_log_register_type_and_pick_level("imago.lcore", RTE_LOG_INFO);
  g_logtypes.perf = rte_log_register_type_and_pick_level("imago.perf", RTE_LOG_INFO);
  g_logtypes.daemon = rte_log_register_type_and_pick_level("imago.daemon", RTE_LOG_INFO);
  // Endpoint comings and goings are routine for an application: shown with imago.api:info.
  g_logtypes.api = rte_log_register_type_and_pick_level("imago.api", RTE_LOG_NOTICE);
}
}  // namespace

}  // namespace imago::dp
