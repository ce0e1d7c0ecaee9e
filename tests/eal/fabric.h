/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A multi-hop fabric in one process, for the EAL suite and the hop benchmark: whole node
 * stacks (engine and CircuitLink, as imagod builds them) for every node of a topology, joined
 * by a net_ring pair per link, polled from the caller's thread. EAL must be up.
 */
#pragma once

#include <rte_cycles.h>
#include <rte_mempool.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/node_engine.h"
#include "dataplane/port.h"
#include "dataplane/ring_pair.h"

namespace imago::test {

class Fabric {
 public:
  struct Options {
    dp::FaultConfig tx_fault;  ///< on every port's transmit side (its seed plus the port id)
    rel::circ::LinkHealth::Config health{.hello_ns = 200'000, .miss = 25};
    uint64_t reopen_ns = 2'000'000;
    uint32_t pool_mbufs = 4095;  ///< per node
    uint32_t send_window = 0;    ///< units each engine has in flight to a peer (0: the preset's)
    uint32_t group_sources = 0, group_streams = 0;  ///< group streams each engine may send, receive
    bool miswire_node1 = false;  ///< node 1's two first ports given the other way round (an operator's slip)
  };

  /** Nodes of @p topo (ids 1..n, in order), node i delivering to @p apps[i]. */
  Fabric(const rel::circ::Topology& topo, std::vector<rel::AppSink*> apps, const Options& o)
      : topo_(topo), apps_(std::move(apps)), o_(o) {
    const size_t n = topo.nodes().size();
    links_.resize(n);
    ends_ = std::vector<dp::NodeEngine>(n);
    for (size_t i = 0; i < n; ++i) {
      pools_.push_back(dp::create_mbuf_pool(name("fabric_pool"), o.pool_mbufs, RTE_MBUF_DEFAULT_BUF_SIZE,
                                            SOCKET_ID_ANY));
      links_[i].resize(topo.ports(i).size());
      for (auto& l : links_[i]) l = std::make_unique<Link>();
    }
    rings_.resize(topo.links().size());
    for (size_t k = 0; k < topo.links().size(); ++k) {
      const rel::circ::Link& l = topo.links()[k];
      ok_ = ok_ && dp::create_ring_pair(name("fabric_ring"), 1024, rings_[k]) == 0;
      ok_ = ok_ && open_port(l.a, l.pa, rings_[k].port_a) && open_port(l.b, l.pb, rings_[k].port_b);
    }
    for (size_t i = 0; i < n && ok_; ++i) ok_ = open_node(i);
  }
  ~Fabric() {
    for (auto& e : ends_) e.engine.reset(), e.circ.reset();
    for (auto& node : links_)
      for (auto& l : node) l->faulty.release(), l->port.close();
    for (dp::RingPair& r : rings_) dp::destroy_ring_pair(r);
    for (rte_mempool* p : pools_) rte_mempool_free(p);
  }
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  /** @return whether every ring, port and node opened. */
  bool ok() const { return ok_; }
  dp::NodeEngine& node(rel::NodeId id) { return ends_[id - 1]; }
  /** The net_ring pair of link @p k of the topology (port_a: its node a's end). */
  const dp::RingPair& ring(size_t k) const { return rings_[k]; }
  rte_mempool* pool(rel::NodeId id) const { return pools_[id - 1]; }

  /** Poll every node once, but @p dead. */
  void poll_all(rel::NodeId dead = 0) {
    for (size_t i = 0; i < ends_.size(); ++i)
      if (i + 1 != dead) dp::node_engine_poll(ends_[i], rte_rdtsc());
  }
  /** Poll every node but @p dead until @p done or @p seconds. @return done. */
  template <typename Done>
  bool run(Done done, double seconds = 30, rel::NodeId dead = 0) {
    const uint64_t end = rte_rdtsc() + static_cast<uint64_t>(seconds * rte_get_tsc_hz());
    while (!done()) {
      if (rte_rdtsc() > end) return false;
      poll_all(dead);
    }
    return true;
  }
  unsigned mbufs_in_use() const {
    unsigned n = 0;
    for (rte_mempool* p : pools_) n += rte_mempool_in_use_count(p);
    return n;
  }

 private:
  struct Link {
    dp::Port port;
    dp::FaultyPort faulty;
  };
  static std::string name(const char* what) {
    static std::atomic<unsigned> n{0};
    return "f" + std::to_string(n.fetch_add(1)) + "_" + what;
  }
  bool open_port(rel::NodeId node, rel::circ::PortId p, uint16_t ring_port) {
    Link& l = *links_[node - 1][p];
    rte_mempool* pool = pools_[node - 1];
    dp::FaultConfig t = o_.tx_fault;
    t.seed += ring_port;
    return pool != nullptr && l.port.open(ring_port, dp::PortConfig{}, pool) == 0 && l.port.start() == 0 &&
           l.faulty.init(ring_port, 0, t, dp::FaultConfig{}, pool, 18, 1024) == 0;
  }
  bool open_node(size_t i) {
    dp::CircuitSetup s;
    s.topology = topo_;
    s.health = o_.health;
    s.sink.reopen_ns = o_.reopen_ns;
    for (auto& l : links_[i]) s.ports.push_back({&l->faulty, pools_[i], l->port.mac()});
    if (i == 0 && o_.miswire_node1 && s.ports.size() >= 2) std::swap(s.ports[0], s.ports[1]);
    dp::NodeEngineConfig c;
    c.id = topo_.nodes()[i];
    c.engine = rel::fast_link_preset();
    c.engine.send_buffer_bytes = 2u << 20;
    c.engine.max_message_size = 64u << 10;
    c.engine.dead_after_ns = 10'000'000'000;  // a re-route must cost no peer its session
    if (o_.send_window != 0) c.engine.send_window = c.engine.recv_window = o_.send_window;
    c.engine.group_sources = o_.group_sources, c.engine.group_streams = o_.group_streams;
    c.circuits = &s;
    return dp::node_engine_open(ends_[i], links_[i][0]->faulty, pools_[i], c, apps_[i]) == 0;
  }

  rel::circ::Topology topo_;
  std::vector<rel::AppSink*> apps_;
  Options o_;
  bool ok_ = true;
  std::vector<rte_mempool*> pools_;
  std::vector<std::vector<std::unique_ptr<Link>>> links_;
  std::vector<dp::RingPair> rings_;
  std::vector<dp::NodeEngine> ends_;
};

}  // namespace imago::test
