// SPDX-License-Identifier: BSD-3-Clause
// What a forwarding hop costs (issue 13, the seed's "routes with and without forwarding"):
// whole node stacks (engine and CircuitLink, as imagod builds them) on net_ring pairs, a
// line of 2, 3 or 4 nodes, every node polled from this one thread.
//
// BM_RoundTrip/H: a 64 B message from node 1 to the far end of a line with H forwarding
// nodes between, and back (kFastpath: sent at once), polling every node in turn until each
// has it. One thread does every node's work, so a hop adds its forwarding and one more
// node's poll per pass, the cost of a hop in CPU time with no waiting across cores.
//
// BM_Frames/MODE: 64 B frames a second through the middle of a line 1 - 2 - 3, frames
// injected at node 1's port and drained at node 3's by this thread (same work in each mode):
// raw_link (injected, received at node 2's port: one link, nothing in between), l2fwd (node
// 2's ports read and written back to back, no look at the frame: DPDK's l2fwd) and forwarder
// (node 2's own poll: decode, VCI look-up, header rewritten in the mbuf, sent on).
//
// BM_Lookup/TABLE/ENTRIES: the forwarding look-up alone, (in-port, VCI) to the next hop, for
// a table of ENTRIES circuits, keys in a random order: our FlatMap (what the forwarder uses),
// DPDK's rte_hash one key at a time (rte_hash_lookup_data, as a per-frame forwarder would),
// and rte_hash in bursts of 32 (rte_hash_lookup_bulk_data, prefetching inside).
#include <benchmark/benchmark.h>
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "dataplane/eal.h"
#include "dataplane/encap.h"
#include "reliability/circuits/flat_map.h"
#include "reliability/circuits/wire.h"
#include "tests/eal/fabric.h"

namespace imago {
namespace {

using test::Fabric;

struct Mailbox final : rel::AppSink {
  bool got = false;
  bool deliver(rel::NodeId, std::span<const uint8_t>) override { return got = true; }
};

/** A line of @p n nodes, node 1 and node n peers over a circuit, established. */
struct Line {
  Mailbox apps[4];
  Fabric f;
  rel::NodeId far;
  explicit Line(uint32_t n, const Fabric::Options& o = {})
      : f(rel::circ::make_line(n), {&apps[0], &apps[1], &apps[2], &apps[3]}, o), far(n) {}
  bool connect() {
    if (!f.ok() || dp::node_engine_add_peer(f.node(1), far, dp::kBroadcastMac, 0) < 0 ||
        dp::node_engine_add_peer(f.node(far), 1, dp::kBroadcastMac, 0) < 0)
      return false;
    return f.run([&] {
      return f.node(1).engine->state(far) == rel::PeerState::kEstablished &&
             f.node(far).engine->state(1) == rel::PeerState::kEstablished;
    }, 10);
  }
  bool send(rel::NodeId from, rel::NodeId to, std::span<const uint8_t> m) {
    dp::NodeEngine& e = f.node(from);
    return e.engine->send(to, m, rel::send_flag::kFastpath, dp::node_engine_now_ns(e, rte_rdtsc())) == 0;
  }
};

void BM_RoundTrip(benchmark::State& st) {
  const auto hops = static_cast<uint32_t>(st.range(0));
  Line line(hops + 2);
  if (!line.connect()) return st.SkipWithError("the fabric did not come up");
  uint8_t msg[64] = {};
  Mailbox& far = line.apps[hops + 1];
  for (auto _ : st) {
    far.got = line.apps[0].got = false;
    while (!line.send(1, line.far, msg)) line.f.poll_all();
    while (!far.got) line.f.poll_all();
    while (!line.send(line.far, 1, msg)) line.f.poll_all();
    while (!line.apps[0].got) line.f.poll_all();
  }
  st.counters["forwarding_hops"] = hops;
  // What a node's circuit tables take, all allocated when it starts (max_circuits of them).
  const rel::circ::CircuitNode& n = line.f.node(1).circ->sink().node();
  st.counters["table_bytes_per_circuit"] =
      static_cast<double>(n.memory_bytes()) / static_cast<double>(rel::circ::CircuitConfig{}.max_circuits);
}
BENCHMARK(BM_RoundTrip)->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

enum Mode { kRawLink, kL2fwd, kForwarder };

/** A 64 B payload circuit DATA frame for @p vci, as node 1 sends it toward node 2. */
std::vector<uint8_t> data_frame(uint32_t vci) {
  dp::EncapConfig enc;
  const size_t hdr = dp::encap_header_len(enc.kind);
  const size_t len = sizeof(rel::circ::CircuitHeader) + 64;
  std::vector<uint8_t> f(hdr + len, 0);
  rel::circ::circ_header(f.data() + hdr, rel::circ::CircKind::kData, vci);
  rel::circ::circ_seal(f.data() + hdr, 0);
  f.resize(dp::encode_frame(enc, f.data(), dp::LinkType::Circuit, static_cast<uint16_t>(len)));
  return f;
}

void BM_Frames(benchmark::State& st) {
  const auto mode = static_cast<Mode>(st.range(0));
  Fabric::Options o;
  o.health.miss = 100000;  // nodes 1 and 3 are not polled while frames go through node 2
  Line line(3, o);
  if (!line.connect()) return st.SkipWithError("the fabric did not come up");
  rel::circ::PortId port;
  uint32_t vci;
  if (!line.f.node(1).circ->sink().route_to(3, &port, &vci)) return st.SkipWithError("no circuit");
  const std::vector<uint8_t> frame = data_frame(vci);
  const uint16_t in = line.f.ring(0).port_a, mid_in = line.f.ring(0).port_b;
  const uint16_t mid_out = line.f.ring(1).port_a, out = line.f.ring(1).port_b;
  rte_mempool* pool = line.f.pool(1);
  constexpr uint16_t kBurst = 32;
  rte_mbuf* m[kBurst];
  uint64_t frames = 0;
  for (auto _ : st) {
    if (rte_pktmbuf_alloc_bulk(pool, m, kBurst) != 0) return st.SkipWithError("pool empty");
    for (rte_mbuf* b : m) {
      std::memcpy(rte_pktmbuf_mtod(b, uint8_t*), frame.data(), frame.size());
      b->data_len = static_cast<uint16_t>(frame.size());
      b->pkt_len = static_cast<uint32_t>(frame.size());
    }
    uint16_t sent = rte_eth_tx_burst(in, 0, m, kBurst);
    rte_pktmbuf_free_bulk(m + sent, kBurst - sent);
    uint16_t got;
    if (mode == kRawLink) {
      got = rte_eth_rx_burst(mid_in, 0, m, kBurst);
    } else {
      if (mode == kL2fwd) {
        const uint16_t n = rte_eth_rx_burst(mid_in, 0, m, kBurst);
        const uint16_t k = rte_eth_tx_burst(mid_out, 0, m, n);
        rte_pktmbuf_free_bulk(m + k, n - k);
      } else {
        dp::node_engine_poll(line.f.node(2), rte_rdtsc());
      }
      got = rte_eth_rx_burst(out, 0, m, kBurst);
    }
    frames += got;
    rte_pktmbuf_free_bulk(m, got);
  }
  st.SetItemsProcessed(static_cast<int64_t>(frames));
  if (mode == kForwarder) {
    const dp::CircuitStats& s = line.f.node(2).circ->stats();
    st.counters["forwarded"] = static_cast<double>(s.node.data_forwarded);
    st.counters["unknown_vci"] = static_cast<double>(s.node.unknown_vci);
  }
}
BENCHMARK(BM_Frames)->ArgName("raw_link_l2fwd_forwarder")->Arg(kRawLink)->Arg(kL2fwd)->Arg(kForwarder);

enum Table : int64_t { kFlatMap = 0, kRteHash = 1, kRteHashBulk = 2 };

void BM_Lookup(benchmark::State& st) {
  const auto table = static_cast<Table>(st.range(0));
  const auto n = static_cast<uint32_t>(st.range(1));
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) k = (rng() % 4) << 32 | ((rng() | 1) & 0xffffffff);  // (port, VCI), never 0
  rel::circ::FlatMap flat(n);
  rte_hash_parameters p{};
  p.name = "bench_lookup";
  p.entries = 2 * n;
  p.key_len = sizeof(uint64_t);
  p.hash_func = rte_hash_crc;
  p.socket_id = static_cast<int>(rte_socket_id());
  rte_hash* h = rte_hash_create(&p);
  if (h == nullptr) return st.SkipWithError("rte_hash_create failed");
  for (uint32_t i = 0; i < n; ++i) {
    flat.put(keys[i], i);
    rte_hash_add_key_data(h, &keys[i], reinterpret_cast<void*>(uintptr_t{i} + 1));
  }
  std::vector<uint64_t> order(keys);
  std::shuffle(order.begin(), order.end(), rng);
  constexpr unsigned kBurst = 32;
  uint64_t found = 0, done = 0;
  size_t at = 0;
  for (auto _ : st) {
    const uint64_t* k = &order[at];
    if (table == kFlatMap) {
      for (unsigned i = 0; i < kBurst; ++i) found += flat.find(k[i]) != nullptr;
    } else if (table == kRteHash) {
      for (unsigned i = 0; i < kBurst; ++i) {
        void* v;
        found += rte_hash_lookup_data(h, &k[i], &v) >= 0;
      }
    } else {
      const void* kp[kBurst];
      void* v[kBurst];
      uint64_t hits = 0;
      for (unsigned i = 0; i < kBurst; ++i) kp[i] = &k[i];
      rte_hash_lookup_bulk_data(h, kp, kBurst, &hits, v);
      found += static_cast<uint64_t>(__builtin_popcountll(hits));
    }
    done += kBurst;
    at = at + 2 * kBurst <= order.size() ? at + kBurst : 0;
  }
  rte_hash_free(h);
  if (found != done) st.SkipWithError("a key was not found");
  st.SetItemsProcessed(static_cast<int64_t>(done));
}
BENCHMARK(BM_Lookup)
    ->ArgNames({"flatmap_rtehash_bulk", "entries"})
    ->ArgsProduct({{kFlatMap, kRteHash, kRteHashBulk}, {1024, 65536}});

}  // namespace
}  // namespace imago

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  imago::dp::EalDefaults d;
  d.memory_mb = 512;
  d.lcores = "0";
  if (imago::dp::eal_start(argv[0], imago::dp::default_eal_args(d, getpid())) < 0) {
    std::fprintf(stderr, "EAL did not start\n");
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  imago::dp::eal_stop();
  return 0;
}
