/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The primary side of imago: EAL, the shared table, the buffer pools, the ports and their
 * nodes, the engine lcore, and the control path that opens, closes and reclaims endpoints.
 * imagod runs one as a daemon; imago_attach_embedded() runs one inside the application.
 */
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/control.h"
#include "api/ctl_answers.h"
#include "api/ctl_worker.h"
#include "api/node.h"
#include "api/options.h"
#include "api/wiring_watch.h"
#include "dataplane/eal_args.h"
#include "dataplane/fault.h"
#include "dataplane/lcore.h"
#include "dataplane/node_port.h"
#include "dataplane/port.h"
#include "dataplane/ring_pair.h"

namespace imago::api {

class Runtime {
 public:
  Runtime();
  ~Runtime();

  /**
   * Start EAL (@p args, or the default for @p daemon), the pools, ports, nodes and the
   * engine lcore; a daemon also answers applications over rte_mp.
   * @return 0; -EIO (EAL), -ENODEV (no port), -ENOMEM, -EINVAL (no worker lcore, bad peer).
   */
  int start(const RuntimeOptions& o, const dp::ArgSplit& args, bool daemon);
  /** Stop the engine lcore, reclaim every endpoint, free everything and stop EAL. */
  void stop();

  /** Control path: open an endpoint for process @p req.pid, waiting for the engine no later
   *  than TSC @p until. @return 0 and req.slot, or a negative errno (see imago_open()). */
  int open_endpoint(CtlMsg& req, uint64_t until = kForever);
  /** Daemon, control thread (a HELLO: rte_mp thread): answer request @p m of a secondary
   *  (into m). @return its rc. */
  int answer_ctl(CtlMsg& m);
  /** Daemon, rte_mp thread: request @p param (@p len bytes) from rte_mp socket @p peer:
   *  a bad one or a HELLO answered at once, an open or close queued for the control thread
   *  (api/ctl_worker.h), each counted (print_stats()'s `requests:` line). */
  void on_request(const void* param, size_t len, const char* peer);
  /** Daemon, rte_mp thread: process @p pid attached. */
  void note_app(int32_t pid);
  /** Control path: close slot @p slot and reclaim what it held, waiting for the engine no
   *  later than TSC @p until. @return 0, -EINVAL, -ETIMEDOUT. */
  int close_endpoint(uint32_t slot, uint64_t until = kForever);
  static constexpr uint64_t kForever = ~uint64_t{0};
  /** Control path, periodically: reclaim endpoints of processes that died, finish closes
   *  that timed out. @return endpoints reclaimed. */
  unsigned housekeeping();
  /** Print one line per node and per open endpoint. */
  void print_stats(FILE* f);
  /** Control path, about once a second: a line to @p f for each node whose counters say it
   *  is miswired (api/wiring_watch.h). */
  void watch_wiring(FILE* f);
  /** (lcore, loop iterations) of each engine lcore while they run (api/engine_watch.h);
   *  empty otherwise. Control path. */
  std::vector<std::pair<unsigned, uint64_t>> engine_loops() const;

  ShmRoot* shm() const { return shm_; }
  size_t node_count() const { return nodes_.size(); }
  /** @return true when the application drives the nodes (--run-to-completion). */
  bool inline_engines() const { return o_.run_to_completion; }
  /** Run-to-completion: one poll of every node, on the application's thread. One thread at
   *  a time: a call while another thread is inside returns -EBUSY at once (that one moves
   *  the engines). @return work done, or -EBUSY. */
  int poll_inline();

 private:
  int start_eal(const dp::ArgSplit& args, bool daemon);
  int create_shared();
  int open_port(dp::NodePort& np, uint16_t port_id);
  int open_nodes();
  int open_fabric_node();
  int add_node(dp::NodePort& pb, uint64_t id, const std::vector<PeerAddr>& peers, dp::NodePort* pb_b = nullptr,
               const dp::CircuitSetup* circuits = nullptr);
  int open_pair();
  int find_ports(uint16_t* a, uint16_t* b) const;
  int start_engines();
  /** Daemon: the live processes that attached (kHello), and a stop that leaves them the
   *  shared memory. */
  unsigned apps_attached() const;
  void stop_under_apps(unsigned apps);
  void serve_telemetry();
  int fill_slot(uint32_t i, const CtlMsg& req, int node_index);
  unsigned reclaim(uint32_t slot);
  static void free_rings(EndpointSlot& s);
  void hold_intr_thread_once_linked();
  bool wait_drained(uint32_t slot, uint64_t until);
  /** Before the engines stop: let the nodes' group LEAVEs be answered, the groups they
   *  closed as sources end at every member, and their sessions' messages and endpoint
   *  announcements be acknowledged (bounded). */
  void linger();
  /** @return whether @p s's node has nothing left to send or be acknowledged on a live session. */
  static bool sessions_settled(const dp::NodeSnapshot& s);
  /** Wait (up to a second and to TSC @p until; run-to-completion: polling the nodes) until
   *  @p done. Time-bounded, not counted: a loaded machine stretches every sleep. */
  bool wait_engine(const std::function<bool()>& done, uint64_t until = kForever);
  int group_answer(uint32_t slot, uint64_t until);

  RuntimeOptions o_;
  bool daemon_ = false;
  bool eal_up_ = false;
  bool pdump_up_ = false;  ///< daemon: dpdk-dumpcap can capture the ports
  const rte_memzone* mz_ = nullptr;
  ShmRoot* shm_ = nullptr;
  std::vector<std::unique_ptr<dp::NodePort>> ports_;
  dp::RingPair ring_{};
  dp::RingPair ring_b_{};  ///< --pair --redundancy: network B
  bool has_ring_ = false;
  bool iface_vdevs_ = false;  ///< --iface / --iface-b made their vdevs (default EAL args)
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<WiringWatch> wiring_;  ///< per node
  std::unique_ptr<dp::LcoreRunner> runner_;
  bool engines_running_ = false;
  std::mutex ctl_;  // the control path: rte_mp thread, housekeeping and the application
  CtlAnswers answers_;  // the control thread
  CtlWorker ctl_worker_;  // answers the applications' opens and closes
  // The applications' requests (rte_mp thread): all, malformed (answered -EPROTO/-EINVAL),
  // and opens/closes dropped unanswered because CtlWorker::kMaxQueued were waiting.
  std::atomic<uint64_t> requests_in_{0}, requests_bad_{0}, requests_dropped_{0};
  uint32_t ring_serial_ = 0;
  static constexpr unsigned kMaxApps = 64;
  std::array<std::atomic<int32_t>, kMaxApps> apps_{};  ///< pids that attached (the rte_mp thread writes)
  std::atomic<bool> apps_overflow_{false};  ///< more attached at once than apps_ holds
  std::atomic<bool> polling_{false};  ///< a thread is inside poll_inline()
};

}  // namespace imago::api
