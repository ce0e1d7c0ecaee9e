// SPDX-License-Identifier: BSD-3-Clause
// Seed material for the fuzz targets: the frames of a real conversation between two real
// engines, captured at their frame sinks. Handshake, whole messages and fragments, a loss
// (so SACK ranges and a NACK), an application that stops taking messages (so overflow and
// explicit credits), and timers (ACK timer, RTO, keep-alive). Only --write-corpus uses it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "reliability/engine.h"
#include "tests/fuzz/fuzz_common.h"

namespace imago::fuzz {

/** The small engine every target uses: 512-byte frames, so a few KiB already fragment. */
inline rel::Config small_engine_config(rel::NodeId id) {
  rel::Config c;
  c.node_id = id;
  c.seed = id;
  c.mtu = 512;
  c.send_window = 64;
  c.recv_window = 16;
  c.max_message_size = 4096;
  c.send_buffer_bytes = 16 * 1024;
  return c;
}

struct CaptureNode : rel::FrameSink, rel::AppSink {
  std::unique_ptr<rel::Engine> e;
  std::deque<Bytes> out;
  std::vector<Bytes>* log = nullptr;
  bool accept = true;
  bool send_frame(rel::NodeId, std::span<const uint8_t> f) override {
    out.emplace_back(f.begin(), f.end());
    log->emplace_back(f.begin(), f.end());
    return true;
  }
  bool deliver(rel::NodeId, std::span<const uint8_t>) override { return accept; }
};

/** @return every frame nodes 1 and 2 sent each other, in order, as the engine wrote them. */
inline std::vector<Bytes> capture_conversation() {
  std::vector<Bytes> log;
  CaptureNode a, b;
  a.log = b.log = &log;
  uint64_t now = 1'000'000'000;
  // Other seeds than the fuzzed engines': captured tokens are strangers to them.
  rel::Config ca = small_engine_config(1), cb = small_engine_config(2);
  ca.seed = cb.seed = 1000;
  rel::Engine::create(ca, &a, &a, &a.e);
  rel::Engine::create(cb, &b, &b, &b.e);
  a.e->add_peer(2, now);
  b.e->add_peer(1, now);
  // Hand over every frame except those @p drop says to lose.
  auto exchange = [&](auto drop) {
    for (int i = 0; i < 100 && (!a.out.empty() || !b.out.empty()); ++i) {
      for (auto [from, to] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        while (!from->out.empty()) {
          Bytes f = std::move(from->out.front());
          from->out.pop_front();
          if (!drop(f)) to->e->on_frame(f, now);
        }
      }
    }
  };
  auto keep_all = [](const Bytes&) { return false; };
  auto tick = [&](uint64_t ns) {
    now += ns;
    a.e->poll(now);
    b.e->poll(now);
    exchange(keep_all);
  };
  tick(0);  // HELLO, HELLO_ACK
  // Whole messages of every record length encoding, and fragmented ones.
  int n = 0;
  for (size_t len : {1, 8, 100, 254, 255, 300, 424, 425, 1000, 4000}) {
    Bytes m(len, static_cast<uint8_t>(len));
    a.e->send(2, m, rel::send_flag::kFastpath, now);
  }
  // Lose the second data frame: B SACKs what follows and NACKs the gap.
  exchange([&](const Bytes&) { return ++n == 2; });
  tick(a.e->config().nack_interval_ns);
  tick(a.e->config().rto_initial_ns);
  // B's application stops: its window overflows, credits go explicit, then recover.
  b.accept = false;
  for (int i = 0; i < 40; ++i) b.e->send(1, Bytes(64, static_cast<uint8_t>(i)), 0, now), a.e->send(2, Bytes(64, 1), 0, now);
  tick(a.e->config().coalesce_ns);
  tick(a.e->config().ack_delay_ns);
  b.accept = true;
  tick(b.e->config().deliver_retry_ns);
  tick(a.e->config().rto_initial_ns);
  tick(a.e->config().ack_refresh_ns);
  return log;
}

}  // namespace imago::fuzz
