// SPDX-License-Identifier: BSD-3-Clause
// Raw ping-pong mode: one frame outstanding A -> B -> A, no reliability: the link's latency.
#include <rte_lcore.h>

#include <cinttypes>
#include <cstdio>

#include "apps/perf/perf.h"
#include "apps/perf/raw_pingpong.h"

namespace imago::perf {
namespace {

struct PingState {
  RawPinger pinger;
  RawEchoer echoer;
  NodePort* ping_node = nullptr;  // null when this process only echoes
  NodePort* echo_node = nullptr;  // null when this process only pings
};

PingState& state(Context& ctx) { return *static_cast<PingState*>(ctx.mode_state); }

unsigned ping_task(void* p, uint64_t now) { return static_cast<RawPinger*>(p)->poll(now); }
unsigned echo_task(void* p, uint64_t now) { return static_cast<RawEchoer*>(p)->poll(now); }

int pp_setup(Context& ctx) {
  auto* st = new PingState;
  ctx.mode_state = st;
  const Options& o = ctx.opt;
  st->ping_node = o.role == "rx" ? nullptr : ctx.nodes.front();
  st->echo_node = o.role == "tx" ? nullptr : ctx.nodes.back();
  unsigned ping_lcore, echo_lcore;
  pick_lcores(ctx, ping_lcore, echo_lcore);
  if (!o.pair) ping_lcore = echo_lcore = single_lcore(ctx);
  if (st->ping_node) {
    PingerConfig pc{.pings = o.msgs, .size = o.size, .timeout_us = o.ping_timeout_us,
                        .encap = o.encap};
    pc.encap.src_mac = st->ping_node->port.mac();
    if (int rc = st->pinger.init(pc, st->ping_node->faulty, st->ping_node->pool); rc < 0) {
      std::fprintf(stderr, "imago-perf: --size %u does not fit a frame of this port's mbufs\n", o.size);
      return rc;
    }
    ctx.runner.add_poll(ping_lcore, "raw-pinger", ping_task, &st->pinger);
  }
  if (st->echo_node) {
    dp::EncapConfig e = o.encap;
    e.src_mac = st->echo_node->port.mac();
    if (int rc = st->echoer.init(o.burst > 64 ? 64 : o.burst, e, st->echo_node->faulty); rc < 0) return rc;
    ctx.runner.add_poll(echo_lcore, "raw-echoer", echo_task, &st->echoer);
  }
  return 0;
}

bool pp_finished(Context& ctx, uint64_t now) {
  PingState& st = state(ctx);
  if (st.ping_node) return st.pinger.done();
  // An echoer alone stops at the pinger's FIN, or after silence once pings began.
  uint64_t idle = ctx.tsc_hz * ctx.opt.idle_timeout_ms / 1000;
  const auto& es = st.echoer.stats();
  return st.echoer.done() || (es.last_frame_tsc && silent_for(now, es.last_frame_tsc, idle));
}

std::string pp_stats_line(Context& ctx, uint64_t) {
  const auto& s = state(ctx).pinger.stats();
  return "raw-pingpong: " + std::to_string(s.replies) + " round trips  " + rtt_percentiles(s.rtt_ns) +
         "  lost " + std::to_string(s.lost);
}

void pp_report(Context& ctx, app::Json& r) {
  PingState& st = state(ctx);
  const auto& s = st.pinger.stats();
  double secs = s.last_tsc > s.first_tsc ? static_cast<double>(s.last_tsc - s.first_tsc) / ctx.tsc_hz : 0;
  const app::Histogram& h = s.rtt_ns;
  if (ctx.opt.verbose_summary && st.ping_node) {
    std::printf("Node A sent %" PRIu64 " pings of %u bytes, one at a time; node B echoed each back "
                "(raw mode: no reliability). Both sides busy-poll.\n", s.sent, ctx.opt.size);
    std::printf("Round trip over %" PRIu64 " replies: p50 %.2f us, p99 %.2f us, p99.9 %.2f us, max "
                "%.2f us; %" PRIu64 " pings lost (no reply within %" PRIu64 " us).\n",
                s.replies, h.percentile(50) / 1e3, h.percentile(99) / 1e3, h.percentile(99.9) / 1e3,
                h.max() / 1e3, s.lost, ctx.opt.ping_timeout_us);
  }
  uint64_t echoed = st.echo_node ? st.echoer.stats().echoed : 0;
  uint64_t sent = st.ping_node ? s.sent : echoed, delivered = st.ping_node ? s.replies : echoed;
  r.num("msgs_sent", sent).num("msgs_delivered", delivered)
      .num("bytes_delivered", delivered * ctx.opt.size).num("duration_s", secs)
      .num("msgs_per_s", secs > 0 ? delivered / secs : 0.0)
      .num("gbps", secs > 0 ? delivered * ctx.opt.size * 8 / secs / 1e9 : 0.0)
      .num("lost", st.ping_node ? s.lost : 0).num("duplicated", uint64_t{0})
      .num("reordered", uint64_t{0}).num("corrupted", s.corrupted).num("late", s.late)
      .num("retransmits", uint64_t{0}).num("acks_sent", uint64_t{0}).num("nacks_sent", uint64_t{0})
      .num("echoed", echoed)
      .num("decode_rejected", (st.ping_node ? s.decode : st.echoer.stats().decode).total_rejected());
  r.obj("rtt_us", rtt_json(h));
  if (st.ping_node && !write_hist_csv(ctx.opt, h)) ctx.output_failed = true;
}

}  // namespace

extern const Mode kRawPingPongMode = {
    "raw-pingpong", "one frame outstanding A -> B -> A, no reliability: the link's round trip", true,
    pp_setup, pp_finished, pp_stats_line, pp_report, delete_state<PingState>,
};

}  // namespace imago::perf
