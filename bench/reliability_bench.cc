// SPDX-License-Identifier: BSD-3-Clause
// Google Benchmark for reliability/engine.h.
//
// BM_Engine_SendPath / ReceivePath / AckPath: per-message CPU cost of each half of the
// protocol over an in-memory link (two engines, frames copied into a flat buffer), measured
// per phase over batches of messages with manual timing, at 16 B, 64 B, 1 KiB and 8 KiB.
// BM_Engine_LossyPath: both halves per message delivered under injected loss.
// BM_Engine_GroupSend: a group source's CPU per message to 1, 8 and 64 members.
// BM_Engine_Goodput: delivered bytes per second of *virtual* time over the deterministic
// simulator (10 Gb/s link, 10 us delay, 1 KiB messages) under 0 / 0.1 / 1 / 5 / 10 % loss,
// selective repeat vs go-back-N. Its CPU time is the simulator's, not a speed figure.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "reliability/engine.h"
#include "tests/reliability/sim_cluster.h"

namespace {

using imago::rel::Config;
using imago::rel::Engine;
using imago::rel::NodeId;

/** A received frame in its own buffer, as a NIC's mbuf: the engine may hold it. */
struct FrameBuf {
  uint32_t refs = 0;
  uint32_t len = 0;
  uint8_t data[2040];
};

/** One end of the in-memory link: frames it emitted, messages it received. */
struct End : imago::rel::FrameSink, imago::rel::AppSink {
  std::unique_ptr<Engine> e;
  std::vector<uint8_t> wire;  // emitted frames back to back
  std::vector<std::pair<uint32_t, uint32_t>> frames;
  uint64_t msgs = 0;
  // With bufs set (its size the pool), frames go out in FrameBufs, each handed over with a
  // reference the receiver's hold_frame() adds to (in-place receive).
  std::vector<FrameBuf>* bufs = nullptr;
  std::vector<FrameBuf*>* free_bufs = nullptr;
  std::vector<FrameBuf*> out;
  FrameBuf* current = nullptr;

  bool send_frame(NodeId, std::span<const uint8_t> f) override {
    if (bufs != nullptr) {
      if (free_bufs->empty()) return false;
      FrameBuf* b = free_bufs->back();
      free_bufs->pop_back();
      std::memcpy(b->data, f.data(), f.size());
      b->len = static_cast<uint32_t>(f.size());
      b->refs = 1;
      out.push_back(b);
      return true;
    }
    frames.emplace_back(static_cast<uint32_t>(wire.size()), static_cast<uint32_t>(f.size()));
    wire.insert(wire.end(), f.begin(), f.end());
    return true;
  }
  void* hold_frame() override {
    if (current == nullptr) return nullptr;
    ++current->refs;
    return current;
  }
  void release_frame(void* h) override { unref(static_cast<FrameBuf*>(h)); }
  void unref(FrameBuf* b) {
    if (--b->refs == 0) free_bufs->push_back(b);
  }
  bool deliver(NodeId, std::span<const uint8_t> m) override {
    benchmark::DoNotOptimize(m.data());
    ++msgs;
    return true;
  }
  /** Hand every emitted frame to @p to. */
  void drain_to(End& to, uint64_t now) {
    for (auto [off, len] : frames) to.e->on_frame({wire.data() + off, len}, now);
    frames.clear();
    wire.clear();
  }
};

struct Link {
  End a, b;
  uint64_t now = 1'000'000;

  explicit Link(uint32_t batch_units) {
    Config c;
    c.send_window = 1u << 15;
    c.recv_window = 1u << 14;
    c.max_message_size = 64u << 10;
    c.send_buffer_bytes = 8u << 20;  // small enough to stay warm in the cache hierarchy
    (void)batch_units;
    c.node_id = 1;
    Engine::create(c, &a, &a, &a.e);
    c.node_id = 2;
    Engine::create(c, &b, &b, &b.e);
    a.e->add_peer(2, now);
    b.e->add_peer(1, now);
    for (int i = 0; i < 4; ++i) {
      a.e->poll(now);
      b.e->poll(now);
      a.drain_to(b, now);
      b.drain_to(a, now);
    }
    a.wire.reserve(8u << 20);
    b.wire.reserve(1u << 20);
  }
};

using Clock = std::chrono::steady_clock;
enum Phase { kSend, kReceive, kAck };

constexpr int kBatch = 512;

/** One batch: A queues and frames kBatch messages, B receives them, B's ACK reaches A. */
template <typename Fn>
void batch(Link& l, const std::vector<uint8_t>& msg, Fn&& lap) {
  auto t0 = Clock::now();
  for (int i = 0; i < kBatch; ++i) l.a.e->send(2, msg, 0, l.now);
  l.now += l.a.e->config().coalesce_ns;
  l.a.e->poll(l.now);  // flush the tail of the batch
  auto t1 = Clock::now();
  l.a.drain_to(l.b, l.now);
  auto t2 = Clock::now();
  l.now += l.b.e->config().ack_delay_ns;
  l.b.e->poll(l.now);  // ACK timer: one cumulative ACK for the batch
  l.b.drain_to(l.a, l.now);
  auto t3 = Clock::now();
  lap(t0, t1, t2, t3);
}

void run_phase(benchmark::State& state, Phase which) {
  const auto size = static_cast<size_t>(state.range(0));
  Link l(kBatch);
  std::vector<uint8_t> msg(size, 0x5A);
  // Warm up: cycle the send byte ring and the wire buffer once so no page is first touched
  // inside the timed region.
  for (int i = 0; i < 64 + (16 << 20) / (kBatch * static_cast<int>(size)); ++i)
    batch(l, msg, [](auto, auto, auto, auto) {});
  const uint64_t base = l.b.msgs;
  for (auto _ : state) {
    batch(l, msg, [&](auto t0, auto t1, auto t2, auto t3) {
      std::chrono::duration<double> d = which == kSend      ? t1 - t0
                                        : which == kReceive ? t2 - t1
                                                            : t3 - t2;
      state.SetIterationTime(d.count());
    });
  }
  if (l.b.msgs - base != static_cast<uint64_t>(state.iterations()) * kBatch)
    state.SkipWithError("lost messages");
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.SetBytesProcessed(state.iterations() * kBatch * static_cast<int64_t>(size));
}

void BM_Engine_SendPath(benchmark::State& s) { run_phase(s, kSend); }
void BM_Engine_ReceivePath(benchmark::State& s) { run_phase(s, kReceive); }
void BM_Engine_AckPath(benchmark::State& s) { run_phase(s, kAck); }
BENCHMARK(BM_Engine_SendPath)->Arg(16)->Arg(64)->Arg(1024)->Arg(8192)->UseManualTime();
BENCHMARK(BM_Engine_ReceivePath)->Arg(16)->Arg(64)->Arg(1024)->Arg(8192)->UseManualTime();
// An ACK costs the sender well under a microsecond per batch of 512 while the batch around it
// takes tens: a shorter minimum keeps the run to seconds. The smoke test (IMAGO_BENCH_SMOKE,
// bench/meson.build) only checks that it runs: a minimum of the ACK time alone took it 37 s.
BENCHMARK(BM_Engine_AckPath)->Arg(16)->Arg(64)->Arg(1024)->Arg(8192)->UseManualTime()->MinTime(
    std::getenv("IMAGO_BENCH_SMOKE") != nullptr ? 0.0005 : 0.05);

/** Both halves under loss: args = message size, loss in units of 0.01 %, in-place receive
 *  (1: frames in buffers the receiver may hold, 0: copied into its window). A queues a batch,
 *  the frames reach B with a deterministic share dropped, B's ACKs (never dropped) reach A,
 *  repairs included; the time is per message delivered, all three phases together. */
void BM_Engine_LossyPath(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  const uint64_t drop_below = static_cast<uint64_t>(state.range(1)) * (UINT64_MAX / 10000);
  const bool hold = state.range(2) != 0;
  Link l(kBatch);
  std::vector<FrameBuf> bufs(24576);  // the receive window and a round in flight
  for (FrameBuf& b : bufs) std::memset(b.data, 0, sizeof b.data);  // no first touch timed
  std::vector<FrameBuf*> free_bufs;
  for (FrameBuf& b : bufs) free_bufs.push_back(&b);
  l.a.bufs = &bufs, l.a.free_bufs = &free_bufs;
  l.b.free_bufs = &free_bufs;  // where its holds go back
  std::vector<uint8_t> msg(size, 0x5A);
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto lossy_drain = [&] {
    for (FrameBuf* b : l.a.out) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      if (rng >= drop_below) {
        l.b.current = hold ? b : nullptr;
        l.b.e->on_frame({b->data, b->len}, l.now);
      }
      l.a.unref(b);
    }
    l.b.current = nullptr;
    l.a.out.clear();
  };
  auto round = [&] {
    for (int i = 0; i < kBatch; ++i)
      if (l.a.e->send(2, msg, 0, l.now) != 0) break;  // window full: repairs first
    l.now += l.a.e->config().coalesce_ns;
    l.a.e->poll(l.now);
    lossy_drain();
    l.now += l.b.e->config().ack_delay_ns;
    l.b.e->poll(l.now);
    l.b.drain_to(l.a, l.now);
    l.a.e->poll(l.now);  // repairs the ACKs asked for
  };
  for (int i = 0; i < 64; ++i) round();
  const uint64_t base = l.b.msgs;
  for (auto _ : state) round();
  const uint64_t n = l.b.msgs - base;
  if (n == 0) state.SkipWithError("nothing delivered");
  state.SetItemsProcessed(static_cast<int64_t>(n));
  state.SetBytesProcessed(static_cast<int64_t>(n * size));
  state.counters["ns_per_msg"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  l.a.out.clear();
  l.b.e.reset();  // its holds go back before the buffers do
  l.a.e.reset();
}
BENCHMARK(BM_Engine_LossyPath)
    ->ArgNames({"size", "loss_bp", "hold"})
    ->ArgsProduct({{64, 1024}, {0, 100, 1000}, {0, 1}});

/** One engine of the group bench: frames it emitted (to a node, or to the group). */
struct GroupEnd : imago::rel::FrameSink, imago::rel::AppSink {
  std::unique_ptr<Engine> e;
  struct Out {
    NodeId to;  ///< 0: the group
    std::vector<uint8_t> bytes;
  };
  std::vector<Out> out;
  uint64_t msgs = 0;
  bool send_frame(NodeId to, std::span<const uint8_t> f) override {
    out.push_back({to, {f.begin(), f.end()}});
    return true;
  }
  bool multicast() const override { return true; }
  bool send_group(imago::rel::GroupId, std::span<const uint8_t> f) override {
    out.push_back({0, {f.begin(), f.end()}});
    return true;
  }
  bool deliver(NodeId, std::span<const uint8_t>) override { return true; }
  bool deliver_group(NodeId, imago::rel::GroupId, std::span<const uint8_t> m) override {
    benchmark::DoNotOptimize(m.data());
    ++msgs;
    return true;
  }
};

/** A group source's CPU time per message to N members: args = members, message size. The
 *  link multicasts (one frame for every member); the members' ACKs reach the source each
 *  batch. Timed: the source's group_send(), poll() and on_frame() of their ACKs. Flat in N
 *  is IBRMP's claim; what grows with N is only the ACKs taken. */
void BM_Engine_GroupSend(benchmark::State& state) {
  const auto members = static_cast<uint32_t>(state.range(0));
  const auto size = static_cast<size_t>(state.range(1));
  constexpr imago::rel::GroupId kG = 9;
  std::vector<std::unique_ptr<GroupEnd>> nodes(members + 1);
  uint64_t now = 1'000'000;
  for (uint32_t i = 0; i <= members; ++i) {
    nodes[i] = std::make_unique<GroupEnd>();
    Config c = imago::rel::fast_link_preset();
    c.node_id = i + 1;
    c.send_window = 64;
    c.recv_window = 64;
    c.max_message_size = 64u << 10;
    c.send_buffer_bytes = 1u << 20;
    c.max_peers = members + 1;
    c.group_sources = i == 0 ? 1 : 0;
    c.group_streams = i == 0 ? 0 : 1;
    c.group_window = 4096;
    Engine::create(c, nodes[i].get(), nodes[i].get(), &nodes[i]->e);
  }
  for (uint32_t i = 1; i <= members; ++i) nodes[0]->e->add_peer(i + 1, now), nodes[i]->e->add_peer(1, now);
  // Hand every frame to where it goes; the source's own deliveries are timed by @p lap.
  auto pump = [&](auto&& to_source) {
    for (bool moved = true; moved;) {
      moved = false;
      for (uint32_t i = 0; i <= members; ++i) {
        std::vector<GroupEnd::Out> out;
        out.swap(nodes[i]->out);
        for (auto& f : out) {
          moved = true;
          if (f.to == 1) {
            to_source(f.bytes);
          } else if (f.to == 0) {
            for (uint32_t m = 1; m <= members; ++m) nodes[m]->e->on_frame(f.bytes, now);
          } else {
            nodes[f.to - 1]->e->on_frame(f.bytes, now);
          }
        }
      }
    }
  };
  auto untimed = [&](const std::vector<uint8_t>& f) { nodes[0]->e->on_frame(f, now); };
  auto poll_all = [&] {
    for (auto& n : nodes) n->e->poll(now);
  };
  for (int i = 0; i < 20; ++i, now += 1'000'000) poll_all(), pump(untimed);
  nodes[0]->e->group_open(kG, now);
  for (uint32_t m = 1; m <= members; ++m) nodes[m]->e->group_join(kG, false, now);
  for (int i = 0; i < 20; ++i, now += 1'000'000) poll_all(), pump(untimed);
  std::vector<uint8_t> msg(size, 0x5A);
  uint64_t sent = 0;
  for (auto _ : state) {
    double t = 0;
    auto timed = [&](const std::vector<uint8_t>& f) {
      const auto t0 = Clock::now();
      nodes[0]->e->on_frame(f, now);
      t += std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i) sent += nodes[0]->e->group_send(kG, msg, 0, now) == 0;
    now += nodes[0]->e->config().coalesce_ns;
    nodes[0]->e->poll(now);
    t += std::chrono::duration<double>(Clock::now() - t0).count();
    pump(timed);
    now += nodes[0]->e->config().group_ack_delay_ns;
    for (uint32_t m = 1; m <= members; ++m) nodes[m]->e->poll(now);
    pump(timed);
    state.SetIterationTime(t);
  }
  for (uint32_t m = 1; m <= members; ++m)
    if (nodes[m]->msgs != sent) state.SkipWithError("a member missed messages");
  state.SetItemsProcessed(static_cast<int64_t>(sent));
  state.counters["frames_per_msg"] = static_cast<double>(nodes[0]->e->group_counters().data_frames) /
                                     static_cast<double>(std::max<uint64_t>(sent, 1));
}
BENCHMARK(BM_Engine_GroupSend)
    ->ArgNames({"members", "size"})
    ->ArgsProduct({{1, 8, 64}, {64, 1024}})
    ->UseManualTime();

/** Goodput over the simulator: args = loss in units of 0.01 %, selective repeat (1) or GBN (0),
 *  Pupa's timers and a small window (0) or the fast-link preset DPDK nodes run with (1). */
void BM_Engine_Goodput(benchmark::State& state) {
  const double loss = static_cast<double>(state.range(0)) / 10000.0;
  const bool sr = state.range(1) != 0;
  const bool fast_link = state.range(2) != 0;
  imago::sim::Scenario sc = imago::sim::one_way_stream(20000, 1024);
  sc.cfg.send_window = 2048;
  sc.cfg.recv_window = 1024;
  sc.cfg.max_message_size = 1u << 20;
  sc.cfg.send_buffer_bytes = 4u << 20;
  sc.cfg.selective_repeat = sr;
  if (fast_link) {
    sc.cfg.send_window = 16384;
    sc.cfg.send_buffer_bytes = imago::rel::Config{}.send_buffer_bytes;
    sc.cfg = imago::rel::fast_link_preset(sc.cfg);
  }
  sc.faults.loss = loss;
  sc.faults.delay_ns = 10'000;
  double gbps = 0;
  imago::rel::PeerCounters c;
  for (auto _ : state) {
    imago::sim::Cluster cl(1, sc);
    std::string err = cl.run();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
    gbps = static_cast<double>(cl.delivered_bytes()) * 8 / static_cast<double>(cl.now());
    c = cl.counters();
  }
  state.counters["goodput_Gbps"] = gbps;
  state.counters["retransmits"] = static_cast<double>(c.msgs_retransmitted);
  state.counters["rto"] = static_cast<double>(c.rto_expired);
  state.counters["overflow"] = static_cast<double>(c.overflow);
  state.counters["nacks"] = static_cast<double>(c.valid_nacks);
}
BENCHMARK(BM_Engine_Goodput)
    ->ArgNames({"loss_bp", "sr", "fast"})
    ->ArgsProduct({{0, 10, 100, 500, 1000}, {1, 0}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
