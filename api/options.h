/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The node options shared by imagod and imago_attach_embedded(): which port, which node,
 * which peers, the buffer tiers, and the daemon's own settings.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "api/node.h"
#include "dataplane/auth.h"
#include "dataplane/eal_args.h"
#include "dataplane/fabric_options.h"
#include "dataplane/fault_model.h"
#include "dataplane/protocol_options.h"
#include "dataplane/redundancy_options.h"

namespace imago::api {

struct RuntimeOptions {
  bool pair = false;                ///< two nodes (1 and 2) over a crossed net_ring pair
  uint64_t node_id = 1;
  bool node_id_given = false;  ///< --node-id was on the command line
  std::string iface;                ///< a port on this interface...
  dp::IfacePmd pmd = dp::IfacePmd::kAfPacket;  ///< ...through this PMD
  std::vector<std::string> vdevs;   ///< extra EAL --vdev (default EAL args only)
  std::vector<PeerAddr> peers;
  uint32_t src_ip = 0;              ///< nonzero: UDP/IPv4 encapsulation from this address
  dp::RedundancyOptions redundancy; ///< --redundancy: a second network, and how both are used
  dp::FabricOptions fabric;         ///< --topology: a node of a multi-hop fabric (virtual circuits)
  std::string iface_b;              ///< network B's port on this interface (through --pmd)
  std::vector<PeerAddr> peers_b;    ///< --peer-b: peers' addresses on network B (id, mac, ip)
  uint32_t src_ip_b = 0;            ///< UDP on network B: our address there
  std::optional<dp::AuthKey> auth_key;  ///< --auth-key: frames tagged, untagged ones dropped
  unsigned engine_lcore = 0;        ///< 0: the first worker lcore
  bool run_to_completion = false;   ///< embedded: no engine lcore, imago_engine_poll() drives the nodes
  uint32_t pool_max = 512;          ///< largest message copied into the pool tier
  uint32_t max_message = 65536;
  uint32_t pool_buffers = 4096;     ///< in each of the small and frame-sized pools
  uint32_t big_buffers = 64;
  dp::ProtocolOptions protocol;     ///< MTU, modes, timers (fast-link preset), --dead-after-ms
  dp::FaultConfig fault_rx;         ///< injected on every port's receive side, for tests
  bool fault_rx_seed_given = false;  ///< --fault-rx had a seed=N
  std::string file_prefix;          ///< daemon: the shared EAL prefix ["imago"]
  bool no_huge = false;             ///< daemon without hugepages (no secondaries then)
  double stats_period_s = 10;       ///< daemon
  double duration_s = 0;            ///< daemon: 0 runs until a signal
};

/**
 * Parse @p args (the part after `--`, or the whole command line without one): "--name value",
 * "--name=value" or "--flag".
 * @return 0; 1 for --help; -EINVAL after writing the reason to @p err.
 */
int parse_runtime_options(const std::vector<std::string>& args, RuntimeOptions& o, std::string* err);

/** Write the option list, one per line, to @p f. */
void print_runtime_options(FILE* f);

}  // namespace imago::api
