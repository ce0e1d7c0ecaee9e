// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/engine_end.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>


namespace imago::perf {

rel::Config engine_config(const Options& o) {
  rel::Config c = o.protocol.engine;  // the fast-link preset and the protocol options
  c.mtu = static_cast<uint32_t>(dp::max_payload(o.encap, o.protocol.mtu));  // less the tag, with a key
  return c;
}

int engine_end_open(Context& ctx, EngineEnd& en, NodePort* node, rel::NodeId self, rel::NodeId peer,
                    rel::AppSink* app) {
  en.node = node;
  en.self = self;
  en.peer = peer;
  dp::NodeEngineConfig c{.id = self, .encap = ctx.opt.encap, .burst = std::min<uint16_t>(ctx.opt.burst, 64),
                         .engine = engine_config(ctx.opt)};
  c.encap.src_mac = node->port.mac();
  if (int rc = dp::node_engine_open(en, node->faulty, node->pool, c, app); rc < 0) {
    if (rc == -EINVAL) std::fprintf(stderr, "imago-perf: engine configuration refused (mtu %u)\n", c.engine.mtu);
    return rc;
  }
  dp::node_engine_publish_to(en, &en.board, self);
  ctx.tel.boards.push_back(&en.board);
  dp::telemetry_set(ctx.tel);
  // The peer's addresses: --peer-mac / --dst-ip, or broadcast on a private link.
  return dp::node_engine_add_peer(en, peer, ctx.opt.encap.dst_mac, ctx.opt.encap.dst_ip);
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
  r.obj(std::string("engine_") + en.node->name, j);
}

void engine_sides_json(const EngineEnd& a, const EngineEnd& b, app::Json& r) {
  uint64_t rejected = 0;
  for (const EngineEnd* en : {&a, &b}) {
    if (!en->node) continue;
    engine_counters_json(*en, r);
    rejected += en->link.counters().decode.total_rejected();
  }
  r.num("decode_rejected", rejected);
}

}  // namespace imago::perf
