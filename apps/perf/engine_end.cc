// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/engine_end.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <vector>

namespace imago::perf {

rel::Config engine_config(const Options& o) {
  rel::Config c = o.protocol.engine;  // the fast-link preset and the protocol options
  c.mtu = static_cast<uint32_t>(dp::max_payload(o.encap, o.protocol.mtu));  // less the tag, with a key
  // imago-perf sends messages of --size bytes only: the largest message is what the window
  // and send buffer hold (16 MiB at most), so a small --mtu or --send-window is taken as the
  // engine takes it, never refused for a message size no run sends. Not below --size: a
  // window too small for that is refused, with the reason.
  const uint64_t cap = rel::unit_capacity(c);
  const uint64_t fits = std::min<uint64_t>(uint64_t{c.send_window} * cap, c.send_buffer_bytes - std::min(cap, c.send_buffer_bytes));
  c.max_message_size = std::max<uint64_t>({std::min(c.max_message_size, fits), o.size, cap});
  return c;
}

int engine_end_open(Context& ctx, EngineEnd& en, NodePort* node, rel::NodeId self, rel::NodeId peer,
                    PeerLife* app) {
  app->self = self;
  en.node = node;
  en.self = self;
  en.peer = peer;
  dp::NodeEngineConfig c{.id = self, .encap = ctx.opt.encap, .burst = std::min<uint16_t>(ctx.opt.burst, 64),
                         .engine = engine_config(ctx.opt)};
  c.encap.src_mac = node->port.mac();
  if (node->net_b != nullptr) {
    c.port_b = &node->net_b->faulty;
    c.pool_b = node->net_b->pool;
    c.encap_b = c.encap;
    c.encap_b.src_mac = node->net_b->port.mac();
    c.encap_b.src_ip = ctx.opt.src_ip_b;
    c.encap_b.dst_mac = ctx.opt.peer_mac_b;
    c.encap_b.dst_ip = ctx.opt.dst_ip_b;
    c.redundancy = ctx.opt.redundancy.cfg;
  }
  if (int rc = dp::node_engine_open(en, node->faulty, node->pool, c, app); rc < 0) {
    if (rc == -EINVAL) std::fprintf(stderr, "imago-perf: engine configuration refused (mtu %u)\n", c.engine.mtu);
    return rc;
  }
  if (en.set) en.set->set_listener(&en.net_events);
  dp::node_engine_publish_to(en, &en.board, self);
  ctx.tel.boards.push_back(&en.board);
  dp::telemetry_set(ctx.tel);
  // The peer's addresses: --peer-mac / --dst-ip, or broadcast on a private link.
  return dp::node_engine_add_peer(en, peer, ctx.opt.encap.dst_mac, ctx.opt.encap.dst_ip, ctx.opt.peer_mac_b,
                                  ctx.opt.dst_ip_b);
}

int open_engine_sides(Context& ctx, const EngineSide& a, const EngineSide& b) {
  unsigned a_lcore, b_lcore;
  pick_lcores(ctx, a_lcore, b_lcore);
  if (!ctx.opt.pair) a_lcore = b_lcore = single_lcore(ctx);
  if (ctx.opt.role != "rx") {
    if (int rc = engine_end_open(ctx, *a.node, ctx.nodes.front(), kNodeA, kNodeB, a.app); rc < 0) return rc;
    ctx.runner.add_poll(a_lcore, a.task_name, a.task, a.task_arg);
  }
  if (ctx.opt.role != "tx") {
    if (int rc = engine_end_open(ctx, *b.node, ctx.nodes.back(), kNodeB, kNodeA, b.app); rc < 0) return rc;
    ctx.runner.add_poll(b_lcore, b.task_name, b.task, b.task_arg);
  }
  return 0;
}

void engine_counters_json(const EngineEnd& en, app::Json& r) {
  if (!en.engine || !en.engine->counters(en.peer)) return;
  // Every counter the engine and its link keep: a new one shows here without an edit. The
  // node has one peer; the total adds the frames rejected before a peer was known (bad CRC).
  const rel::PeerCounters c = en.engine->total_counters();
  app::Json j, rejects;
  rel::for_each_counter(c, [&](const char* k, uint64_t v) { j.num(k, v); });
  rel::for_each_reject(c, [&](const char* k, uint64_t v) { rejects.num(k, v); });
  j.obj("reject", rejects);
  dp::for_each_counter(en.link.counters(), [&](const char* k, uint64_t v) { j.num(std::string("link_") + k, v); });
  if (en.set) {  // each network's counters and state, network B's link
    for (uint8_t n = 0; n < rel::red::kMaxNets; ++n) {
      app::Json net;
      rel::red::for_each_counter(en.set->counters(n), [&](const char* k, uint64_t v) { net.num(k, v); });
      net.str("state_name", rel::red::net_state_name(en.set->counters(n).state));
      j.obj(n == 0 ? "net_a" : "net_b", net);
    }
    j.str("redundancy", rel::red::mode_name(en.set->config().mode));
    j.num("net_bad_shim", en.set->bad_shim()).num("net_not_peer", en.set->not_peer());
    // Each change, how long before now (unix_now_us: this report's wall-clock time).
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t now_us = static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
    std::vector<app::Json> ev;
    for (size_t i = 0; i < en.net_events.n; ++i) {
      const rel::red::NetEvent& e = en.net_events.ev[i];
      static const char* kKinds[] = {"", "state", "failover", "failback"};
      ev.emplace_back().num("ago_us", now_us - en.net_events.unix_us[i]).str("kind", kKinds[e.kind])
          .str("net", e.net == 0 ? "a" : "b").str("state", rel::red::net_state_name(e.state));
    }
    j.list("net_events", ev).num("net_events_dropped", en.net_events.dropped);
    j.num("unix_now_us", now_us);
    dp::for_each_counter(en.link_b.counters(), [&](const char* k, uint64_t v) { j.num(std::string("link_b_") + k, v); });
  }
  r.obj(std::string("engine_") + en.node->name, j);
}

void engine_sides_json(const EngineEnd& a, const EngineEnd& b, app::Json& r) {
  uint64_t rejected = 0, retx = 0, acks = 0, nacks = 0;
  for (const EngineEnd* en : {&a, &b}) {
    if (!en->node) continue;
    engine_counters_json(*en, r);
    rejected += en->link.counters().decode.total_rejected();
    if (const rel::PeerCounters* c = en->engine ? en->engine->counters(en->peer) : nullptr)
      retx += c->msgs_retransmitted, acks += c->ack_only_sent, nacks += c->nacks_sent;
  }
  // Summed: in echo both ends send (and resend) messages and acknowledge the other's.
  r.num("retransmits", retx).num("acks_sent", acks).num("nacks_sent", nacks).num("decode_rejected", rejected);
}

}  // namespace imago::perf
