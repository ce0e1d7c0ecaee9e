// SPDX-License-Identifier: BSD-3-Clause
#include "api/runtime.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_memzone.h>
#include <rte_pdump.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>

#include "api/buffers.h"
#include "api/control_check.h"
#include "api/ctl_worker.h"
#include "api/handoff.h"
#include "api/telemetry.h"
#include "dataplane/eal.h"
#include "dataplane/if_state.h"
#include "dataplane/log.h"
#include "dataplane/telemetry.h"

namespace imago::api {

namespace {

Runtime* g_runtime = nullptr;  // the one the rte_mp action answers for

constexpr unsigned kFaultCapacity = 1024;
constexpr unsigned kPairRing = 1024;
// Mbufs a port needs beyond its descriptors: received frames applications hold zero-copy.
constexpr unsigned kHeldMbufs = 4096;

// @return the machine's free hugepages (of every size), from /proc/meminfo.
uint64_t free_hugepages() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[128];
  unsigned long long n = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "HugePages_Free: %llu", &n) == 1) break;
  std::fclose(f);
  return n;
}

// On the rte_mp thread: a bad request and a HELLO answered here, opens and closes queued for
// the control thread (ctl_worker.h: they allocate, and an allocation may need this thread).
int on_ctl(const rte_mp_msg* msg, const void* peer) {
  const size_t len = msg->len_param < 0 ? 0 : static_cast<size_t>(msg->len_param);
  g_runtime->on_request(msg->param, len, static_cast<const char*>(peer));
  return 0;
}

// rte_mempool_mem_iter() callback: note one chunk of pool memory (counting past the table,
// so the caller sees an overflow). A chunk that starts where the last one ended extends it:
// hugepages fragmented by other processes split a pool into many chunks, mostly adjacent.
void note_range(rte_mempool*, void* arg, rte_mempool_memhdr* m, unsigned) {
  auto* shm = static_cast<ShmRoot*>(arg);
  const auto lo = reinterpret_cast<uintptr_t>(m->addr);
  const uint32_t n = shm->n_pool_mem;
  if (n > 0 && n <= ShmRoot::kMaxRanges && shm->pool_mem[n - 1].hi == lo) {
    shm->pool_mem[n - 1].hi = lo + m->len;
    return;
  }
  if (n < ShmRoot::kMaxRanges) shm->pool_mem[n] = {lo, lo + m->len};
  ++shm->n_pool_mem;
}

// A message pool, shared with every application process. A process can be killed on any
// instruction: a get or put on a ring takes two steps (its head, then its tail), and one
// killed between them stops every other process at that ring for good (imagod's engine
// lcore first). DPDK's lock-free stack takes or gives buffers with one compare-and-swap: a
// kill leaves it whole, at worst a burst of buffers out of it. A ring only where that driver
// is missing (librte_mempool_stack not loaded), said once.
rte_mempool* shared_pool(const char* name, unsigned n, unsigned size) {
  rte_mempool* mp = rte_mempool_create_empty(name, n, size, 0, 0, rte_socket_id(), 0);
  if (mp == nullptr) return nullptr;
  const bool stack = rte_mempool_set_ops_byname(mp, "lf_stack", nullptr) == 0;
  if (!stack) {
    IMAGO_LOG(WARNING, api, "mempool driver lf_stack missing (librte_mempool_stack): pool %s is a ring, and an "
              "application killed inside a buffer get can stop imagod (docs/USER.md)\n", name);
    rte_mempool_set_ops_byname(mp, "ring_mp_mc", nullptr);
  }
  if (rte_mempool_populate_default(mp) < 0) {
    rte_mempool_free(mp);
    return nullptr;
  }
  return mp;
}

}  // namespace

Runtime::Runtime() = default;
Runtime::~Runtime() { stop(); }

int Runtime::start(const RuntimeOptions& o, const dp::ArgSplit& args, bool daemon) {
  o_ = o;
  daemon_ = daemon;
  if (daemon && o.run_to_completion) {
    std::fprintf(stderr, "imagod: --run-to-completion is for embedded applications: imagod's engines have their lcore\n");
    return -EINVAL;
  }
  if (int rc = start_eal(args, daemon); rc < 0) return rc;
  if (int rc = create_shared(); rc < 0) return rc;
  if (int rc = open_nodes(); rc < 0) return rc;
  for (auto& n : nodes_) n->share_big_pool(static_cast<uint32_t>(nodes_.size()));
  if (int rc = start_engines(); rc < 0) return rc;
  if (daemon_ && o_.no_huge) {
    // No shared hugepage memory, so no secondary can map our rings: serve the nodes only.
    std::printf("imagod: --no-huge: applications cannot attach (secondary processes need hugepages); "
                "the nodes still run and answer their peers\n");
  } else if (daemon_) {
    // DPDK's capture framework: dpdk-dumpcap / dpdk-pdump attach as secondaries and copy the
    // ports' frames (a callback on each port's bursts while a capture runs, none otherwise).
    if (rte_pdump_init() < 0) {
      IMAGO_LOG(WARNING, api, "packet capture unavailable: rte_pdump_init: %s\n", rte_strerror(rte_errno));
    } else {
      pdump_up_ = true;
    }
    g_runtime = this;
    ctl_worker_.start([this](CtlMsg& m) { return answer_ctl(m); });
    if (rte_mp_action_register(kCtlAction, on_ctl) < 0) {
      IMAGO_LOG(ERR, api, "cannot serve applications: rte_mp_action_register: %s%s\n", rte_strerror(rte_errno),
                rte_errno == ENOTSUP ? " (EAL runs without a shared config: drop --no-shconf / --in-memory, or give imagod's own --no-huge after --, which serves no application)" : "");
      return -EIO;
    }
  }
  return 0;
}

int Runtime::start_eal(const dp::ArgSplit& args, bool daemon) {
  std::vector<std::string> eal = args.eal;
  std::string own_dir;  // our prefix's runtime directory, when the prefix is ours alone
  if (!args.explicit_eal) {
    dp::EalDefaults d;
    d.vdevs = o_.vdevs;
    if (!o_.iface.empty()) d.vdevs.push_back(dp::iface_vdev(o_.pmd, o_.iface));
    if (!o_.iface_b.empty()) d.vdevs.push_back(dp::iface_vdev(o_.pmd, o_.iface_b, 1));
    // The caller's thread, and a worker for the engines. Run to completion, the caller's
    // thread alone, free to run on any CPU: several such processes on a small machine are
    // spread by the kernel instead of all pinned to CPU 0.
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    d.lcores = !o_.run_to_completion ? "0-1" : cpus > 1 ? "0@(0-" + std::to_string(cpus - 1) + ")" : "0";
    d.telemetry = true;  // /imago/... commands: dpdk-telemetry.py, imago-stat
    d.shared = daemon && !o_.no_huge;
    if (d.shared) d.file_prefix = o_.file_prefix.empty() ? "imago" : o_.file_prefix;
    // Another primary on our prefix: EAL would refuse its lock, and its advice (hugepages)
    // would be wrong.
    if (d.shared && primary_runs(d.file_prefix)) {
      std::fprintf(stderr, "imagod: an imagod (or another DPDK primary) already runs with file prefix '%s': "
                   "give this one another --file-prefix, or stop that one first\n", d.file_prefix.c_str());
      return -EBUSY;
    }
    // Applications of an earlier imagod map its memory still: EAL would fail to start over
    // it, and pull that memory from under them.
    if (d.shared)
      if (const std::vector<int> apps = live_secondaries(d.file_prefix); !apps.empty()) {
        std::fprintf(stderr, "imagod: %zu application(s) of an earlier imagod with file prefix '%s' still run (pid %d%s): "
                     "stop them first\n", apps.size(), d.file_prefix.c_str(), apps[0], apps.size() > 1 ? " ..." : "");
        return -EBUSY;
      }
    eal = dp::default_eal_args(d, getpid());
    own_dir = dpdk_runtime_dir(d.file_prefix.empty() ? "imago-" + std::to_string(getpid()) : d.file_prefix);
  }
  if (int rc = dp::eal_start(args.prog, eal); rc < 0) {
    if (rc == -EALREADY) return -ENOTSUP;  // an attach of this process failed after EAL began
    if (daemon && !args.explicit_eal && !o_.no_huge && free_hugepages() == 0)
      std::fprintf(stderr, "imago: EAL needs hugepages for applications to attach (echo 512 > "
                   "/proc/sys/vm/nr_hugepages), or run with --no-huge\n");
    // Nobody else uses our prefix (checked above): what EAL made of it is ours to remove.
    std::error_code ec;
    if (!own_dir.empty()) std::filesystem::remove_all(own_dir, ec);
    return -EIO;
  }
  eal_up_ = true;
  iface_vdevs_ = !args.explicit_eal;
  // Our prefix, or (the primary, with EAL args of its own) one only we may hold: leave
  // nothing behind. (An embedded node's primary had kept its directory.)
  if (!args.explicit_eal || rte_eal_process_type() == RTE_PROC_PRIMARY) dp::eal_own_runtime_dir();
  return 0;
}

int Runtime::create_shared() {
  mz_ = rte_memzone_reserve_aligned(kShmName, sizeof(ShmRoot), rte_socket_id(), 0, RTE_CACHE_LINE_SIZE);
  if (mz_ == nullptr) {
    IMAGO_LOG(ERR, api, "cannot reserve %zu bytes for the endpoint table: %s\n", sizeof(ShmRoot),
              rte_strerror(rte_errno));
    return -ENOMEM;
  }
  shm_ = new (mz_->addr) ShmRoot();
  shm_->version = kShmVersion;
  shm_->primary_pid = getpid();
  shm_->pool_max = o_.pool_max;
  shm_->max_message = o_.max_message;
  // No per-lcore caches: secondary processes share lcore ids (see buffers.h).
  shm_->msg_pool = shared_pool("imago_msgs", o_.pool_buffers, o_.pool_max + kHeadroom);
  shm_->frame_pool = shared_pool("imago_frames", o_.pool_buffers, kFrameClass + kHeadroom);
  shm_->big_pool = shared_pool("imago_big", o_.big_buffers, o_.max_message + kHeadroom);
  if (!shm_->msg_pool || !shm_->frame_pool || !shm_->big_pool) {
    // ENOENT / ENOMEM: EAL found no room for them (its memory: hugepages, or -m with --no-huge).
    const uint64_t mib = (uint64_t{o_.pool_buffers} * (o_.pool_max + kFrameClass + 2 * kHeadroom) +
                          uint64_t{o_.big_buffers} * (o_.max_message + kHeadroom)) >> 20;
    IMAGO_LOG(ERR, api, "cannot create the message pools (about %llu MiB): %s: give EAL more memory "
              "(hugepages; -m with --no-huge) or take a smaller --max-message / --pool-buffers\n",
              static_cast<unsigned long long>(mib), rte_strerror(rte_errno));
    return -ENOMEM;
  }
  for (rte_mempool* mp : {shm_->msg_pool, shm_->frame_pool, shm_->big_pool}) rte_mempool_mem_iter(mp, note_range, shm_);
  if (shm_->n_pool_mem > ShmRoot::kMaxRanges) {
    IMAGO_LOG(ERR, api, "the message pools lie in %u chunks of memory, more than %u: hugepages too fragmented "
              "(more free hugepages, a smaller --max-message, or --no-huge)\n", shm_->n_pool_mem, ShmRoot::kMaxRanges);
    return -ENOMEM;
  }
  shm_->magic = kShmMagic;  // last: a secondary that sees it sees the rest
  return 0;
}

int Runtime::open_port(dp::NodePort& np, uint16_t port_id) {
  dp::NodePortConfig c;
  c.pool_name = "imago_mbuf_" + std::to_string(port_id);
  c.max_frame = o_.protocol.mtu + sizeof(dp::EthHdr);
  c.extra_mbufs = kHeldMbufs;
  c.fault_rx = o_.fault_rx;
  c.fault_rx.seed = o_.fault_rx.seed + port_id;
  c.fault_capacity = kFaultCapacity;
  c.fault_offset = static_cast<uint32_t>(dp::encap_header_len(o_.src_ip ? dp::Encap::Udp : dp::Encap::L2));
  return dp::node_port_open(np, port_id, c);
}

// Nodes 1 and 2 over a crossed net_ring pair (and a second one as network B).
int Runtime::open_pair() {
  if (int rc = dp::create_ring_pair("imago_pair", kPairRing, ring_); rc < 0) return rc;
  has_ring_ = true;
  std::vector<uint16_t> ids = {ring_.port_a, ring_.port_b};
  if (o_.redundancy.on) {
    if (int rc = dp::create_ring_pair("imago_pair_b", kPairRing, ring_b_); rc < 0) return rc;
    ids.insert(ids.end(), {ring_b_.port_a, ring_b_.port_b});
  }
  for (uint16_t id : ids) {
    ports_.push_back(std::make_unique<dp::NodePort>());
    if (int rc = open_port(*ports_.back(), id); rc < 0) return rc;
  }
  dp::NodePort* b1 = o_.redundancy.on ? ports_[2].get() : nullptr;
  dp::NodePort* b2 = o_.redundancy.on ? ports_[3].get() : nullptr;
  if (int rc = add_node(*ports_[0], 1, {PeerAddr{.id = 2}}, b1); rc < 0) return rc;
  return add_node(*ports_[1], 2, {PeerAddr{.id = 1}}, b2);
}

// Network A's port and, with --redundancy, network B's: the --iface / --iface-b vdevs, else
// the first and the second port.
int Runtime::find_ports(uint16_t* a, uint16_t* b) const {
  const std::string pmd = std::string("net_") + dp::iface_pmd_name(o_.pmd);
  std::vector<uint16_t> all;
  uint16_t id;
  RTE_ETH_FOREACH_DEV(id) all.push_back(id);
  // An --iface whose port did not come up is said as such, never replaced by another port.
  for (const auto& [iface, k] : {std::pair{o_.iface, 0}, std::pair{o_.iface_b, 1}}) {
    const std::string vdev = pmd + std::to_string(k);
    if (!iface_vdevs_ || iface.empty() || rte_eth_dev_get_port_by_name(vdev.c_str(), &id) == 0) continue;
    std::fprintf(stderr, "imago: %s %s: %s could not open it (%s)\n", k == 0 ? "--iface" : "--iface-b",
                 iface.c_str(), pmd.c_str(), dp::port_open_failure(pmd, iface).c_str());
    return -ENODEV;
  }
  if (all.empty()) {
    // --iface and --vdev made ports only with the default EAL args: with EAL args of one's
    // own, the port goes there, and saying "give --iface" to one who gave it would mislead.
    const bool unmade = !iface_vdevs_ && (!o_.iface.empty() || !o_.vdevs.empty());
    std::fprintf(stderr, "imago: %s\n",
                 dp::no_port_message(unmade ? "the port in your EAL args (--iface and --vdev make ports only with the "
                                              "default EAL args): e.g. --vdev net_af_packet0,iface=NAME before --"
                                            : "--pair, --iface NAME, --vdev DEV, or EAL args with a --vdev").c_str());
    return -ENODEV;
  }
  *a = all[0];
  if (!o_.iface.empty() && rte_eth_dev_get_port_by_name((pmd + "0").c_str(), &id) == 0) *a = id;
  if (!o_.redundancy.on) return 0;
  *b = RTE_MAX_ETHPORTS;
  if (!o_.iface_b.empty() && rte_eth_dev_get_port_by_name((pmd + "1").c_str(), &id) == 0) *b = id;
  for (uint16_t p : all)
    if (*b == RTE_MAX_ETHPORTS && p != *a) *b = p;
  if (*b == RTE_MAX_ETHPORTS) {
    std::fprintf(stderr, "imago: --redundancy needs a second port (network B): give --iface-b NAME or a second --vdev\n");
    return -ENODEV;
  }
  return 0;
}

// A node of a fabric: every port, in order, is a link of its topology (port k: the k-th).
int Runtime::open_fabric_node() {
  static_assert(dp::kFabricMaxPorts == dp::CircuitLink::kMaxPorts);
  const rel::circ::Topology& t = o_.fabric.topology;
  const size_t need = dp::fabric_ports(o_.fabric, o_.node_id);  // 1..kFabricMaxPorts: check_fabric()
  std::vector<uint16_t> ids;
  uint16_t id;
  RTE_ETH_FOREACH_DEV(id) ids.push_back(id);
  // One more is refused too: a port list from another topology would run with a link unused.
  if (ids.size() != need) {
    const std::string down = dp::vdevs_not_up();
    std::fprintf(stderr, "imago: node %" PRIu64 " has %zu ports in --topology %s and %zu DPDK ports: "
                 "give a --vdev per link, in topology port order%s%s%s\n", o_.node_id, need, o_.fabric.spec.c_str(),
                 ids.size(), down.empty() ? "" : "; did not come up: ", down.c_str(),
                 down.empty() ? "" : " (see DPDK's lines above: no such interface, ...)");
    return -ENODEV;
  }
  dp::CircuitSetup setup;
  setup.topology = t;
  setup.health = o_.fabric.health;
  setup.show_routes = o_.fabric.show_routes ? stdout : nullptr;
  for (size_t k = 0; k < need; ++k) {
    ports_.push_back(std::make_unique<dp::NodePort>());
    if (int rc = open_port(*ports_.back(), ids[k]); rc < 0) return rc;
    setup.ports.push_back({&ports_.back()->faulty, ports_.back()->pool, ports_.back()->port.mac()});
  }
  return add_node(*ports_.front(), o_.node_id, o_.peers, nullptr, &setup);
}

int Runtime::open_nodes() {
  if (o_.pair) return open_pair();
  if (o_.fabric.on()) return open_fabric_node();
  uint16_t port_a = 0, port_b = 0;
  if (int rc = find_ports(&port_a, &port_b); rc < 0) return rc;
  if (o_.peers.empty()) {
    std::fprintf(stderr, "imago: node %" PRIu64 " needs at least one --peer\n", o_.node_id);
    return -EINVAL;
  }
  ports_.push_back(std::make_unique<dp::NodePort>());
  if (int rc = open_port(*ports_.back(), port_a); rc < 0) return rc;
  dp::NodePort* pb_b = nullptr;
  if (o_.redundancy.on) {
    ports_.push_back(std::make_unique<dp::NodePort>());
    if (int rc = open_port(*ports_.back(), port_b); rc < 0) return rc;
    pb_b = ports_.back().get();
  }
  return add_node(*ports_.front(), o_.node_id, o_.peers, pb_b);
}

int Runtime::add_node(dp::NodePort& pb, uint64_t id, const std::vector<PeerAddr>& peers, dp::NodePort* pb_b,
                      const dp::CircuitSetup* circuits) {
  NodeSpec s;
  s.circuits = circuits;
  s.id = id;
  s.index = static_cast<unsigned>(nodes_.size());
  s.port = &pb.faulty;
  s.mbuf_pool = pb.pool;
  s.encap.kind = o_.src_ip ? dp::Encap::Udp : dp::Encap::L2;
  s.encap.src_mac = pb.port.mac();
  s.encap.src_ip = o_.src_ip;
  s.encap.auth = o_.auth_key;  // every frame tagged; the tag's room comes off the MTU
  s.engine = o_.protocol.engine;  // modes and timers: the fast-link preset and the options
  s.engine.mtu = static_cast<uint32_t>(dp::max_payload(s.encap, o_.protocol.mtu));
  // The endpoint tag; at least a frame's payload, which the engine needs (endpoints still
  // refuse what is above --max-message: a smaller one, 1024 say, is the API's limit alone).
  s.engine.max_message_size = std::max(o_.max_message + 4, rel::unit_capacity(s.engine));
  if (pb_b != nullptr) {
    s.port_b = &pb_b->faulty;
    s.mbuf_pool_b = pb_b->pool;
    s.encap_b = s.encap;
    s.encap_b.src_mac = pb_b->port.mac();
    s.encap_b.src_ip = o_.src_ip_b;
    s.redundancy = o_.redundancy.cfg;
  }
  auto node = std::make_unique<Node>();
  if (int rc = node->init(s, shm_); rc < 0) return rc;
  for (const PeerAddr& p : peers) {
    if (int rc = node->add_peer(p); rc < 0) {
      std::fprintf(stderr, "imago: node %" PRIu64 " cannot add peer %" PRIu64 "\n", id, p.id);
      return rc;
    }
  }
  shm_->node_ids[shm_->n_nodes++] = id;
  nodes_.push_back(std::move(node));
  return 0;
}

int Runtime::start_engines() {
  if (o_.run_to_completion) {  // the application's thread polls (poll_inline())
    serve_telemetry();
    return 0;
  }
  unsigned lcore = o_.engine_lcore ? o_.engine_lcore : rte_get_next_lcore(-1, 1, 0);
  if (lcore >= RTE_MAX_LCORE || !rte_lcore_is_enabled(lcore) || lcore == rte_get_main_lcore()) {
    if (o_.engine_lcore == 0)
      std::fprintf(stderr, "imago: the engines need a worker lcore: give EAL two lcores (-l 0-1)\n");
    else if (lcore == rte_get_main_lcore())
      std::fprintf(stderr, "imago: --engine-lcore %u is EAL's main lcore (the application's): give a worker lcore\n",
                   lcore);
    else
      std::fprintf(stderr, "imago: --engine-lcore %u is not one of EAL's lcores: give one of them, or -l with it "
                   "(e.g. -l 0,%u)\n", lcore, lcore);
    return -EINVAL;
  }
  runner_ = std::make_unique<dp::LcoreRunner>();
  for (auto& n : nodes_)
    if (int rc = runner_->add_poll(lcore, "engine", Node::task, n.get()); rc < 0) return rc;
  if (int rc = runner_->start(); rc < 0) return rc;
  engines_running_ = true;
  serve_telemetry();
  return 0;
}

// rte_telemetry's /imago/... commands read the engines' boards, the lcore, the endpoints and
// the pools from here on (a failure only costs the commands).
void Runtime::serve_telemetry() {
  dp::TelemetrySources src;
  for (uint32_t i = 0; i < shm_->n_nodes && i < kMaxNodes; ++i) src.boards.push_back(&shm_->boards[i]);
  src.runner = runner_.get();
  std::vector<rte_mempool*> mbuf_pools;
  for (const auto& pb : ports_) mbuf_pools.push_back(pb->pool);
  dp::telemetry_set(src);
  if (dp::telemetry_register() < 0 || telemetry_serve(shm_, mbuf_pools) < 0)
    IMAGO_LOG(WARNING, api, "telemetry commands not registered\n");
}

void Runtime::note_app(int32_t pid) {
  for (auto& a : apps_) {
    const int32_t v = a.load(std::memory_order_relaxed);
    if (v == pid) return;
    if (v == 0 || process_gone(v)) return a.store(pid, std::memory_order_relaxed);
  }
  apps_overflow_.store(true, std::memory_order_relaxed);  // untracked: assume it stays attached
}

unsigned Runtime::apps_attached() const {
  unsigned n = 0;
  for (const auto& a : apps_) {
    const int32_t v = a.load(std::memory_order_relaxed);
    n += v != 0 && !process_gone(v);
  }
  return n + (apps_overflow_.load(std::memory_order_relaxed) ? 1 : 0);
}

// Applications still attached map the shared memory: freeing it would have EAL unmap it in
// them too (its memory sync), and their next call would fault. So imagod stops its engines
// and ports, tells them it is gone, and exits leaving that memory to them (the next imagod
// with the prefix clears it); their calls return -ENOTCONN and imago_detach() frees what is
// theirs.
void Runtime::stop_under_apps(unsigned apps) {
  shm_->primary_stopping.store(1, std::memory_order_release);
  std::printf("imagod: %u application(s) still attached: told imagod is gone; the shared memory is left to them\n",
              apps);
  std::fflush(stdout);
  if (engines_running_) {
    runner_->stop();
    runner_->join();
    engines_running_ = false;
  }
  for (auto& n : nodes_) n->leave_fabric();
  for (auto& pb : ports_) pb->port.stop();  // no DMA into memory the next imagod may take
  eal_up_ = false;  // no rte_eal_cleanup(): it would free the memory under them
  // Nor the nodes' and ports' own (the engines' frame memzones): a free that gives pages
  // back asks every secondary to unmap them, which they may not answer now (EAL: "Fail to
  // recv reply ... mp_malloc_sync" after "stopped cleanly"). The process's exit frees it.
  for (auto& n : nodes_) (void)n.release();
  for (auto& pb : ports_) (void)pb.release();
}

void Runtime::stop() {
  if (!eal_up_) return;
  const unsigned apps = daemon_ && shm_ != nullptr && !o_.no_huge ? apps_attached() : 0;
  dp::telemetry_clear();  // before the boards, the runner and the pools go
  telemetry_stop_serving();
  if (pdump_up_ && apps == 0) rte_pdump_uninit();  // frees its memzone: not under applications
  pdump_up_ = false;
  if (daemon_ && g_runtime == this) {
    rte_mp_action_unregister(kCtlAction);
    ctl_worker_.stop();  // after the handler: nothing queues any more
    g_runtime = nullptr;
  }
  linger();
  if (apps > 0) return stop_under_apps(apps);
  if (engines_running_) {
    runner_->stop();
    runner_->join();
    engines_running_ = false;
  }
  for (auto& n : nodes_) n->leave_fabric();  // its lcore stopped: nothing else sends
  if (shm_ != nullptr) {
    for (uint32_t i = 0; i < kMaxEndpoints; ++i)
      if (shm_->slots[i].state.load() != SlotState::kFree) reclaim(i);
  }
  if (shm_ != nullptr)
    for (PoolCaches& pc : shm_->engine_caches) pool_caches_free(pc);  // the engines are stopped
  // Frames held in place, by an engine or a fault stage, may be another node's (net_ring hands
  // over the mbuf itself) and point into its memory: all go back before any node's memory.
  for (auto& n : nodes_) n->release_frames();
  for (auto& pb : ports_) pb->faulty.release();
  nodes_.clear();
  for (auto& pb : ports_) dp::node_port_close(*pb);
  ports_.clear();
  if (has_ring_) dp::destroy_ring_pair(ring_);
  if (has_ring_ && ring_b_.a_to_b != nullptr) dp::destroy_ring_pair(ring_b_);
  if (shm_ != nullptr) {
    rte_mempool_free(shm_->msg_pool);
    rte_mempool_free(shm_->frame_pool);
    rte_mempool_free(shm_->big_pool);
    rte_memzone_free(mz_);
    shm_ = nullptr;
  }
  dp::eal_stop();
  eal_up_ = false;
}

// --- control path ---

void Runtime::on_request(const void* param, size_t len, const char* peer) {
  requests_in_.fetch_add(1, std::memory_order_relaxed);
  CtlMsg m;
  const int rc = ctl_decode(param, len, *shm_, &m);
  if (rc < 0) requests_bad_.fetch_add(1, std::memory_order_relaxed);
  if (rc == 0 && m.op != CtlOp::kHello) {
    // Dropped: the application tries again kCtlTryMs later, then gives up (-ETIMEDOUT).
    if (!ctl_worker_.post(m, peer)) requests_dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  m.rc = rc == 0 ? answer_ctl(m) : rc;
  ctl_reply(m, peer);
}

int Runtime::answer_ctl(CtlMsg& m) {
  if (m.op == CtlOp::kHello) return note_app(m.pid), 0;
  if (const CtlAnswers::Answer* a = answers_.find(m)) return m.slot = a->slot, a->rc;  // a retry
  // An open the application no longer waits for would make an endpoint for nobody; a close
  // is done anyway (its handle is gone), without waiting: housekeeping finishes it.
  const uint64_t left_ns = ctl_time_left_ns(m.deadline_ns);
  if (left_ns == 0 && m.op == CtlOp::kOpen) return -ETIMEDOUT;
  const uint64_t until = rte_rdtsc() + static_cast<uint64_t>(static_cast<double>(left_ns) * rte_get_tsc_hz() / 1e9);
  m.rc = m.op == CtlOp::kOpen ? open_endpoint(m, until) : close_endpoint(m.slot, until);
  answers_.record(m);
  return m.rc;
}

int Runtime::open_endpoint(CtlMsg& req, uint64_t until) {
  std::lock_guard<std::mutex> lock(ctl_);
  int node_index;
  const ServesPeer serves = [this](int n, uint64_t peer) { return nodes_[n]->has_peer(peer); };
  if (int rc = ctl_check_open(req, *shm_, serves, &node_index); rc < 0) return rc;
  for (uint32_t i = 0; i < kMaxEndpoints; ++i) {
    if (shm_->slots[i].state.load(std::memory_order_acquire) != SlotState::kFree) continue;
    if (int rc = fill_slot(i, req, node_index); rc < 0) return rc;
    req.slot = i;
    return req.group != 0 ? group_answer(i, until) : 0;
  }
  return -ENOSPC;
}

// A group endpoint is open once its engine joined or opened the group: wait for its answer,
// and take a refused slot back.
int Runtime::group_answer(uint32_t slot, uint64_t until) {
  EndpointSlot& s = shm_->slots[slot];
  const bool answered =
      wait_engine([&] { return s.group_rc.load(std::memory_order_acquire) != kGroupPending; }, until);
  const int rc = answered ? s.group_rc.load(std::memory_order_acquire) : -ETIMEDOUT;
  if (rc == 0) return 0;
  SlotState open = SlotState::kOpen;
  s.state.compare_exchange_strong(open, SlotState::kClosing);
  shm_->generation.fetch_add(1, std::memory_order_acq_rel);
  if (wait_drained(slot, until)) reclaim(slot);  // else housekeeping finishes it
  return rc;
}

int Runtime::fill_slot(uint32_t i, const CtlMsg& req, int node_index) {
  EndpointSlot& s = shm_->slots[i];
  s.state.store(SlotState::kSetup, std::memory_order_release);
  s.ring_size = req.ring_size ? req.ring_size : kRingDefault;
  ++ring_serial_;  // ring names are unique for the process's life
  s.rx = handoff_create(("imr" + std::to_string(i) + "_" + std::to_string(ring_serial_)).c_str(), s.ring_size, rte_socket_id());
  s.tx = handoff_create(("imt" + std::to_string(i) + "_" + std::to_string(ring_serial_)).c_str(), s.ring_size, rte_socket_id());
  s.ret = rte_ring_create(("ime" + std::to_string(i) + "_" + std::to_string(ring_serial_)).c_str(), kReturnSlots,
                          rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (s.rx == nullptr || s.tx == nullptr || s.ret == nullptr) {
    free_rings(s);
    s.state.store(SlotState::kFree, std::memory_order_release);
    return -ENOMEM;
  }
  s.node_index = static_cast<uint32_t>(node_index);
  s.peer = req.peer;
  s.hash = endpoint_hash(req.name);
  s.pid = req.pid;
  std::snprintf(s.name, sizeof s.name, "%s", req.name);
  s.peer_ready.store(0, std::memory_order_relaxed);
  s.group = req.group;
  s.group_flags = req.group_flags;
  s.rx_inline = req.rx_inline != 0;
  s.group_rc.store(req.group != 0 ? kGroupPending : 0, std::memory_order_relaxed);
  s.max_message.store(shm_->max_message, std::memory_order_relaxed);
  new (&s.c) EngineSideCounters();
  for (Counter* c : {&s.tx_ring_full, &s.release_invalid, &s.buffer_invalid, &s.rx_copy_full, &s.calls_busy}) c->v.store(0, std::memory_order_relaxed);
  s.rx_loans.reset();
  s.tx_loans.reset();
  s.state.store(SlotState::kOpen, std::memory_order_release);
  shm_->generation.fetch_add(1, std::memory_order_acq_rel);
  IMAGO_LOG(INFO, api, "endpoint '%s' to node %" PRIu64 " (group %u) opened in slot %u by pid %d\n", s.name, s.peer,
            s.group, i, s.pid);
  return 0;
}

int Runtime::poll_inline() {
  // Two threads of one process may each wait (imago_wait(), imago_close()) or poll: the
  // engines are single-threaded, so the second leaves them to the first (acquire/release:
  // each poll sees what the one before it did, whichever thread ran it).
  if (polling_.exchange(true, std::memory_order_acquire)) return -EBUSY;
  const uint64_t now = rte_rdtsc();
  unsigned work = 0;
  for (auto& n : nodes_) work += n->poll(now);
  polling_.store(false, std::memory_order_release);
  return static_cast<int>(std::min<unsigned>(work, INT32_MAX));
}

// What a clean stop waits for (bounded), so that the other nodes are told, not left to find
// this one dead (--dead-after-ms later):
// - a member whose stream of a group ended (imago_close(), or its source's END) says LEAVE
//   until the source answers LEAVE_OK; stopped before that, it would be expired
//   (group_expire_ns later) instead of leaving: up to kLeaveLingerMs;
// - a source closed (imago_close() of a SEND endpoint) still owes its members what it sent,
//   then END; stopped before that, they would end GONE, as if what it sent were lost;
// - a peer endpoint closed is announced to its peer in the session's stream, behind what the
//   engine took to send on it; stopped before those are acknowledged, the peer's endpoint
//   would wait for the peer's death to learn it closed, and lose them:
// those up to kCloseLingerMs.
void Runtime::linger() {
  constexpr uint64_t kLeaveLingerMs = 250, kCloseLingerMs = 1000;
  if (shm_ == nullptr || !(engines_running_ || o_.run_to_completion)) return;
  const uint64_t ms = rte_get_tsc_hz() / 1000, start = rte_rdtsc(), leaves_until = start + ms * kLeaveLingerMs;
  thread_local dp::NodeSnapshot snap;
  const auto done = [&] {
    const bool leaves_due = rte_rdtsc() < leaves_until;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      // A board published since the stop began: the engine's state after the last close.
      if (!shm_->boards[i].read(&snap) || snap.published_tsc <= start) return false;
      if (snap.groups_closing != 0 || (leaves_due && snap.groups_leaving != 0) || !sessions_settled(snap))
        return false;
    }
    return true;
  };
  wait_engine(done, start + ms * kCloseLingerMs);
}

bool Runtime::sessions_settled(const dp::NodeSnapshot& s) {
  if (s.app_queued != 0) return false;
  for (uint32_t i = 0; i < s.n_peers && i < dp::NodeSnapshot::kMaxPeers; ++i) {
    const rel::PeerView& v = s.peers[i].view;
    if (v.state == rel::PeerState::kEstablished && (v.tx_unconfirmed_msgs != 0 || v.tx_queued != 0)) return false;
  }
  return true;
}

bool Runtime::wait_engine(const std::function<bool()>& done, uint64_t until) {
  const uint64_t end = std::min(until, rte_rdtsc() + rte_get_tsc_hz());
  if (o_.run_to_completion) {  // the waiting thread is the one that polls
    while (rte_rdtsc() < end) {
      if (done()) return true;
      poll_inline();
    }
    return done();
  }
  while (engines_running_ && runner_->active() && rte_rdtsc() < end) {
    if (done()) return true;
    rte_delay_us_sleep(1000);
  }
  return done();
}

bool Runtime::wait_drained(uint32_t slot, uint64_t until) {
  const EndpointSlot& s = shm_->slots[slot];
  if (wait_engine([&] { return s.state.load(std::memory_order_acquire) == SlotState::kDrained; }, until)) return true;
  // No engine to let go of it (stopping): nobody else touches the slot.
  return !o_.run_to_completion && (!engines_running_ || !runner_->active());
}

int Runtime::close_endpoint(uint32_t slot, uint64_t until) {
  std::lock_guard<std::mutex> lock(ctl_);
  if (slot >= kMaxEndpoints) return -EINVAL;
  EndpointSlot& s = shm_->slots[slot];
  SlotState open = SlotState::kOpen;
  if (!s.state.compare_exchange_strong(open, SlotState::kClosing) && open != SlotState::kClosing) return -EINVAL;
  shm_->generation.fetch_add(1, std::memory_order_acq_rel);
  if (!wait_drained(slot, until)) return -ETIMEDOUT;  // housekeeping finishes it
  reclaim(slot);
  return 0;
}

void Runtime::free_rings(EndpointSlot& s) {
  rte_ring_free(s.rx);
  rte_ring_free(s.tx);
  rte_ring_free(s.ret);
  s.rx = s.tx = s.ret = nullptr;
}

// What a closing endpoint's ring still holds, emptied: the messages in it (events and the
// slots a message's bytes spill into not counted). Its buffers are the loans' to reclaim.
static uint64_t drop_ring_messages(rte_ring* r) {
  imago_msg d[64];
  uint64_t msgs = 0;
  unsigned n, spill = 0;
  while (r != nullptr && (n = rte_ring_sc_dequeue_burst_elem(r, d, sizeof(imago_msg), 64, nullptr)) > 0)
    for (unsigned i = 0; i < n; ++i) {
      if (spill != 0) {
        --spill;
        continue;
      }
      spill = ring_spill_of(d[i]);
      msgs += (d[i].flags & IMAGO_MSG_F_EVENT) == 0;
    }
  return msgs;
}

unsigned Runtime::reclaim(uint32_t slot) {
  EndpointSlot& s = shm_->slots[slot];
  if (s.node_index < kMaxNodes) {
    shm_->closed_unsent[s.node_index].add(drop_ring_messages(s.tx));
    shm_->closed_unreceived[s.node_index].add(drop_ring_messages(s.rx));
  }
  const ReturnSettled r = settle_return(s);  // a return the application died in the middle of
  if (r == ReturnSettled::kUnknown)
    IMAGO_LOG(WARNING, api, "endpoint '%s': its process died putting a buffer straight to its pool; it is left\n", s.name);
  unsigned n = (r == ReturnSettled::kPut) + s.rx_loans.reclaim(put_loaned_uncached) + s.tx_loans.reclaim(put_loaned_uncached);
  pool_caches_free(s.app_caches);  // an application that died with buffers in its caches
  n += free_returned(s);           // released by the application, not yet freed by the engine
  free_rings(s);
  IMAGO_LOG(INFO, api, "endpoint '%s' (slot %u, pid %d) closed: %u buffers reclaimed\n", s.name, slot, s.pid, n);
  s.state.store(SlotState::kFree, std::memory_order_release);
  shm_->generation.fetch_add(1, std::memory_order_acq_rel);
  return n;
}

// net_memif unmaps a port's rings on DPDK's interrupt thread when its peer leaves, under the
// engine lcore's feet (dataplane/port.h, "Holding DPDK's interrupt thread"): once a memif link
// is up, park that thread while the engines poll. Asks without waiting; a later call sees it.
void Runtime::hold_intr_thread_once_linked() {
  if (!engines_running_ || dp::intr_thread_held()) return;
  for (const auto& pb : ports_) {
    dp::LinkStatus l;
    if (pb->port.control_on_intr_thread() && pb->port.link(l) == 0 && l.up) {
      dp::hold_intr_thread(0);
      return;
    }
  }
}

unsigned Runtime::housekeeping() {
  std::lock_guard<std::mutex> lock(ctl_);
  hold_intr_thread_once_linked();
  unsigned reclaimed = 0;
  for (uint32_t i = 0; i < kMaxEndpoints; ++i) {
    EndpointSlot& s = shm_->slots[i];
    SlotState st = s.state.load(std::memory_order_acquire);
    if (st == SlotState::kOpen && s.pid != getpid() && process_gone(s.pid)) {
      std::printf("imago: process %d of endpoint '%s' is gone: closing it\n", s.pid, s.name);
      s.state.store(SlotState::kClosing, std::memory_order_release);
      shm_->generation.fetch_add(1, std::memory_order_acq_rel);
    } else if (st == SlotState::kDrained) {
      unsigned n = reclaim(i);
      std::printf("imago: endpoint '%s' of process %d reclaimed, %u buffers back\n", s.name, s.pid, n);
      ++reclaimed;
    }
  }
  return reclaimed;
}

namespace {

// One line of every counter the node's engine (all peers summed, rejections by reason, its
// group streams as group_<name>) and its link keep: "node N counters: name=value ...".
void print_node_counters(FILE* f, const dp::NodeSnapshot& snap, const Node& n) {
  std::fprintf(f, "node %" PRIu64 " counters:", snap.node_id);
  auto field = [f](const char* prefix) {
    return [f, prefix](const char* k, uint64_t v) { std::fprintf(f, " %s%s=%" PRIu64, prefix, k, v); };
  };
  rel::for_each_counter(snap.total, field(""));
  rel::for_each_reject(snap.total, field("reject_"));
  dp::for_each_counter(snap.link, field("link_"));
  dp::for_each_group_counter(snap, field(""));
  dp::for_each_net_counter(snap, field(""));
  dp::for_each_circuit_counter(snap, field(""));
  std::fprintf(f, " control_in=%" PRIu64 " control_bad=%" PRIu64 " announce_sent=%" PRIu64 "\n",
               n.counters().control_in, n.counters().control_bad, n.counters().announce_sent);
}

}  // namespace

void Runtime::watch_wiring(FILE* f) {
  thread_local dp::NodeSnapshot snap;
  wiring_.resize(nodes_.size());
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (shm_->boards[i].read(&snap) && snap.published_tsc != 0)
      wiring_[i].check(snap, static_cast<uint64_t>(std::chrono::nanoseconds(now).count()), f);
}

std::vector<std::pair<unsigned, uint64_t>> Runtime::engine_loops() const {
  std::vector<std::pair<unsigned, uint64_t>> out;
  if (!engines_running_ || !runner_ || !runner_->active()) return out;
  for (unsigned l : runner_->used_lcores()) out.emplace_back(l, runner_->stats(l).iterations);
  return out;
}

void Runtime::print_stats(FILE* f) {
  // From the boards the engine lcore publishes: the engines run on while this prints.
  thread_local dp::NodeSnapshot snap;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = *nodes_[i];
    if (!shm_->boards[i].read(&snap)) continue;
    const rel::PeerCounters& c = snap.total;
    std::fprintf(f, "node %" PRIu64 ": msgs sent %" PRIu64 " received %" PRIu64 " retransmitted %" PRIu64
                 " frames in %" PRIu64 " out %" PRIu64 " no_endpoint %" PRIu64 " control_bad %" PRIu64
                 " closed_unsent %" PRIu64 " closed_unreceived %" PRIu64 "\n",
                 n.id(), c.msgs_sent, c.msgs_received, c.msgs_retransmitted, snap.link.frames_in,
                 snap.link.frames_out, shm_->no_endpoint[i].get(), n.counters().control_bad,
                 shm_->closed_unsent[i].get(), shm_->closed_unreceived[i].get());
    print_node_counters(f, snap, n);
    if (snap.redundant)
      std::fprintf(f, "node %" PRIu64 " networks (%s): A %s, sent %" PRIu64 " received %" PRIu64
                   " heartbeats lost %" PRIu64 " fail-overs %" PRIu64 "; B %s, sent %" PRIu64 " received %" PRIu64
                   " heartbeats lost %" PRIu64 " fail-overs %" PRIu64 "; duplicates dropped %" PRIu64 "\n",
                   n.id(), rel::red::mode_name(snap.mode), rel::red::net_state_name(snap.nets[0].state),
                   snap.nets[0].frames_sent, snap.nets[0].frames_received, snap.nets[0].heartbeats_lost,
                   snap.nets[0].failovers, rel::red::net_state_name(snap.nets[1].state), snap.nets[1].frames_sent,
                   snap.nets[1].frames_received, snap.nets[1].heartbeats_lost, snap.nets[1].failovers,
                   snap.nets[0].duplicates_dropped + snap.nets[1].duplicates_dropped);
  }
  std::fprintf(f, "requests: in %" PRIu64 " bad %" PRIu64 " dropped %" PRIu64 "\n", requests_in_.load(),
               requests_bad_.load(), requests_dropped_.load());
  unsigned mbufs = 0;
  for (const auto& pb : ports_) mbufs += rte_mempool_in_use_count(pb->pool);
  // In use counts what is out of the pools (held by rings, ports, applications): after an
  // application dies it must come back to where it was before it attached.
  std::fprintf(f, "pools: msgs_in_use=%u frames_in_use=%u big_in_use=%u mbufs_in_use=%u\n",
               pool_in_use(*shm_, shm_->msg_pool), pool_in_use(*shm_, shm_->frame_pool),
               pool_in_use(*shm_, shm_->big_pool), mbufs);
  for (uint32_t i = 0; i < kMaxEndpoints; ++i) {
    const EndpointSlot& s = shm_->slots[i];
    if (s.state.load(std::memory_order_acquire) != SlotState::kOpen) continue;
    std::fprintf(f, "  endpoint '%s' -> node %" PRIu64 " (pid %d): sent %" PRIu64 " received %" PRIu64
                 " [inline %" PRIu64 " pool %" PRIu64 " mbuf %" PRIu64 "] held %u rx_ring_full %" PRIu64
                 " peer %s\n",
                 s.name, s.peer, s.pid, s.c.msgs_sent.get(), s.c.msgs_received.get(), s.c.rx_inline.get(),
                 s.c.rx_pool.get(), s.c.rx_mbuf.get(), s.rx_loans.outstanding(), s.c.rx_ring_full.get(),
                 s.peer_ready.load() ? "ready" : "not ready");
  }
  std::fflush(f);
}

}  // namespace imago::api
