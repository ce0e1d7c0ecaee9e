// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/engine_node.h"

#include <rte_cycles.h>

#include <cstdio>
#include <ctime>


namespace imago::perf {

rel::Config engine_config(const Options& o) {
  rel::Config c = o.protocol.engine;  // the fast-link preset and the protocol options
  c.mtu = static_cast<uint32_t>(dp::max_payload(o.encap, o.protocol.mtu));  // less the tag, with a key
  return c;
}

int engine_node_open(Context& ctx, EngineNode& en, Node* node, rel::NodeId self, rel::NodeId peer,
                     rel::AppSink* app) {
  en.node = node;
  en.self = self;
  en.peer = peer;
  dp::EncapConfig e = ctx.opt.encap;
  e.src_mac = node->port.mac();
  if (int rc = en.link.init(node->faulty, node->pool, e, ctx.opt.burst > 64 ? 64 : ctx.opt.burst); rc < 0) {
    return rc;
  }
  // The peer's addresses: --peer-mac / --dst-ip, or broadcast on a private link.
  if (int rc = en.link.add_peer_addr(peer, ctx.opt.encap.dst_mac, ctx.opt.encap.dst_ip); rc < 0) return rc;
  rel::Config c = engine_config(ctx.opt);
  dp::stamp_incarnation(c, self);
  if (int rc = rel::Engine::create(c, &en.link, app, &en.engine); rc < 0) {
    std::fprintf(stderr, "imago-perf: engine configuration refused (mtu %u)\n", c.mtu);
    return rc;
  }
  en.link.attach(en.engine.get());
  return en.engine->add_peer(peer, en.link.now_ns(rte_rdtsc()));
}

int open_engine_sides(Context& ctx, const EngineSide& a, const EngineSide& b) {
  unsigned a_lcore, b_lcore;
  pick_lcores(ctx, a_lcore, b_lcore);
  if (!ctx.opt.pair) a_lcore = b_lcore = single_lcore(ctx);
  if (ctx.opt.role != "rx") {
    if (int rc = engine_node_open(ctx, *a.node, ctx.nodes.front(), kNodeA, kNodeB, a.app); rc < 0) return rc;
    ctx.runner.add_poll(a_lcore, a.task_name, a.task, a.task_arg);
  }
  if (ctx.opt.role != "tx") {
    if (int rc = engine_node_open(ctx, *b.node, ctx.nodes.back(), kNodeB, kNodeA, b.app); rc < 0) return rc;
    ctx.runner.add_poll(b_lcore, b.task_name, b.task, b.task_arg);
  }
  return 0;
}

void engine_counters_json(const EngineNode& en, app::Json& r) {
  if (!en.engine || !en.engine->counters(en.peer)) return;
  // Every counter the engine and its link keep: a new one shows here without an edit. The
  // node has one peer; the total adds the frames rejected before a peer was known (bad CRC).
  const rel::PeerCounters c = en.engine->total_counters();
  app::Json j, rejects;
  rel::for_each_counter(c, [&](const char* k, uint64_t v) { j.num(k, v); });
  rel::for_each_reject(c, [&](const char* k, uint64_t v) { rejects.num(k, v); });
  j.obj("reject", rejects);
  dp::for_each_counter(en.link.counters(), [&](const char* k, uint64_t v) { j.num(std::string("link_") + k, v); });
  r.obj(std::string("engine_") + en.node->name, j);
}

void engine_sides_json(const EngineNode& a, const EngineNode& b, app::Json& r) {
  uint64_t rejected = 0;
  for (const EngineNode* en : {&a, &b}) {
    if (!en->node) continue;
    engine_counters_json(*en, r);
    rejected += en->link.counters().decode.total_rejected();
  }
  r.num("decode_rejected", rejected);
}

}  // namespace imago::perf
