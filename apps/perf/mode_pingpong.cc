// SPDX-License-Identifier: BSD-3-Clause
// Ping-pong mode: one message outstanding A -> B -> A through the reliability engine, each
// sent FASTPATH (no coalescing wait). Round trips go to a histogram; nothing may be lost.
#include <rte_cycles.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "apps/perf/engine_end.h"
#include "apps/common/histogram.h"
#include "apps/perf/raw_traffic.h"

namespace imago::perf {
namespace {

// A's application: times each reply of the one outstanding ping.
struct Pinger final : PeerLife {
  uint64_t sent = 0, replies = 0, bad = 0, ping_tsc = 0, first_tsc = 0, last_tsc = 0, tsc_hz = 1;
  bool outstanding = false;
  app::Histogram rtt_ns;

  bool deliver(rel::NodeId, std::span<const uint8_t> msg) override {
    uint64_t now = rte_rdtsc();
    RawHdr h;
    bool ok = msg.size() >= sizeof h && raw_verify(msg.data(), static_cast<uint16_t>(msg.size()));
    if (ok) std::memcpy(&h, msg.data(), sizeof h);
    if (!ok || !outstanding || h.seq.get() != sent - 1) {
      ++bad;  // a reliable stream never answers twice or out of turn
      return true;
    }
    rtt_ns.record((now - ping_tsc) * 1'000'000'000 / tsc_hz);
    ++replies;
    last_tsc = now;
    outstanding = false;
    return true;
  }
};

// B's application: keeps the latest ping to send back from its own lcore task (the engine
// is not re-entered from its own delivery callback).
struct Echoer final : PeerLife {
  std::vector<uint8_t> pending;
  bool has_pending = false;
  uint64_t echoed = 0;

  bool deliver(rel::NodeId, std::span<const uint8_t> msg) override {
    if (has_pending) return false;  // refuse: the engine keeps it until we have sent the last
    pending.assign(msg.begin(), msg.end());
    has_pending = true;
    return true;
  }
};

struct PingState {
  Pinger pinger;  // the sinks outlive the engines, which hand back what they hold as they go
  Echoer echoer;
  EngineEnd a, b;
  std::vector<uint8_t> msg;
  uint64_t total = 0;
  ActivityWatch echo_frames;  // an echoer alone ends when the pinger falls silent
};

PingState& state(Context& ctx) { return *static_cast<PingState*>(ctx.mode_state); }

unsigned pinger_task(void* arg, uint64_t now) {
  auto* st = static_cast<PingState*>(arg);
  Pinger& p = st->pinger;
  dp::node_engine_set_now(st->a, now);
  unsigned work = 0;
  if (!p.outstanding && p.sent < st->total && !p.dead) {
    raw_fill(st->msg.data(), static_cast<uint16_t>(st->msg.size()), p.sent, 0);
    if (st->a.engine->send(st->a.peer, st->msg, rel::send_flag::kFastpath, st->a.link.now_ns(now)) == 0) {
      p.ping_tsc = now;
      if (!p.first_tsc) p.first_tsc = now;
      p.outstanding = true;
      ++p.sent;
      ++work;
    }
  }
  return work + dp::node_engine_poll(st->a, now);
}

unsigned echoer_task(void* arg, uint64_t now) {
  auto* st = static_cast<PingState*>(arg);
  Echoer& e = st->echoer;
  dp::node_engine_set_now(st->b, now);
  unsigned work = dp::node_engine_poll(st->b, now);
  if (e.has_pending &&
      st->b.engine->send(st->b.peer, e.pending, rel::send_flag::kFastpath, st->b.link.now_ns(now)) == 0) {
    e.has_pending = false;
    ++e.echoed;
    work += 1 + dp::node_engine_flush(st->b, now);
  }
  return work;
}

int pp_setup(Context& ctx) {
  auto* st = new PingState;
  ctx.mode_state = st;
  const Options& o = ctx.opt;
  st->total = o.msgs;
  st->msg.assign(o.size, 0);
  st->pinger.tsc_hz = ctx.tsc_hz;
  return open_engine_sides(ctx, {&st->a, &st->pinger, "pingpong-pinger", pinger_task, st},
                           {&st->b, &st->echoer, "pingpong-echoer", echoer_task, st});
}

bool pp_finished(Context& ctx, uint64_t now) {
  PingState& st = state(ctx);
  if (st.echoer.left_after_all(!st.a.node && st.echoer.echoed >= st.total)) return true;
  if (st.pinger.dead || st.echoer.dead) return true;
  if (st.a.node) return st.pinger.replies >= st.total && st.a.engine->unconfirmed_messages(st.a.peer) == 0;
  // An echoer alone lingers after the last echo until the pinger falls silent (its last
  // ACK may be lost), or gives up after the idle timeout.
  uint64_t span = st.echoer.echoed >= st.total ? ctx.tsc_hz / 5 : ctx.tsc_hz * ctx.opt.idle_timeout_ms / 1000;
  return st.echo_frames.quiet(now, st.b.link.counters().frames_in + st.b.link_b.counters().frames_in, span);
}

std::string pp_stats_line(Context& ctx, uint64_t) {
  const Pinger& p = state(ctx).pinger;
  return "pingpong: " + std::to_string(p.replies) + " round trips  " + rtt_percentiles(p.rtt_ns);
}

void pp_report(Context& ctx, app::Json& r) {
  PingState& st = state(ctx);
  const Pinger& p = st.pinger;
  const app::Histogram& h = p.rtt_ns;
  double secs = p.last_tsc > p.first_tsc ? static_cast<double>(p.last_tsc - p.first_tsc) / ctx.tsc_hz : 0;
  if (ctx.opt.verbose_summary && st.a.node) {
    std::printf("Node A sent %" PRIu64 " messages of %u bytes one at a time through the reliability "
                "engine (FASTPATH); node B's application sent each back. Both sides busy-poll.\n",
                p.sent, ctx.opt.size);
    std::printf("Round trip over %" PRIu64 " replies: p50 %.2f us, p99 %.2f us, p99.9 %.2f us, max %.2f us; "
                "%" PRIu64 " retransmissions.\n", p.replies, h.percentile(50) / 1e3, h.percentile(99) / 1e3,
                h.percentile(99.9) / 1e3, h.max() / 1e3,
                st.a.engine->counters(st.a.peer)->msgs_retransmitted);
  }
  uint64_t delivered = st.a.node ? p.replies : st.echoer.echoed;
  ctx.peer_dead = p.dead || st.echoer.dead;
  ctx.fell_silent = !st.a.node && !ctx.peer_dead && st.echoer.echoed < st.total;
  r.num("msgs_sent", st.a.node ? p.sent : st.echoer.echoed).num("msgs_delivered", delivered)
      .num("bytes_delivered", delivered * ctx.opt.size).num("duration_s", secs)
      .num("msgs_per_s", secs > 0 ? delivered / secs : 0.0)
      .num("gbps", secs > 0 ? delivered * ctx.opt.size * 8 / secs / 1e9 : 0.0)
      .num("lost", st.a.node && p.sent > p.replies ? p.sent - p.replies : 0)
      .num("duplicated", uint64_t{0}).num("reordered", uint64_t{0}).num("corrupted", p.bad)
      .boolean("peer_dead", p.dead || st.echoer.dead);
  r.obj("rtt_us", rtt_json(h));
  engine_sides_json(st.a, st.b, r);
  if (st.a.node && !write_hist_csv(ctx.opt, h)) ctx.output_failed = true;
}

}  // namespace

extern const Mode kPingPongMode = {
    "pingpong", "reliable round trips A -> B -> A, one outstanding, FASTPATH", false,
    pp_setup, pp_finished, pp_stats_line, pp_report, delete_state<PingState>,
};

}  // namespace imago::perf
