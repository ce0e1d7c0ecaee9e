// SPDX-License-Identifier: BSD-3-Clause
// Raw mode: numbered frames from A to B with no reliability; the link's own rate and loss.
#include <rte_cycles.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include "apps/perf/perf.h"
#include "apps/perf/raw_traffic.h"

namespace imago::perf {
namespace {

struct RawState {
  RawSender sender;
  RawReceiver receiver;
  NodePort* tx_node = nullptr;  // null when this process only receives
  NodePort* rx_node = nullptr;  // null when this process only sends
  unsigned tx_lcore = 0, rx_lcore = 0;
  uint64_t last_line_tsc = 0, last_sent = 0, last_delivered = 0;
};

RawState& state(Context& ctx) { return *static_cast<RawState*>(ctx.mode_state); }

unsigned sender_task(void* arg, uint64_t now) { return static_cast<RawSender*>(arg)->poll(now); }
unsigned receiver_task(void* arg, uint64_t now) {
  return static_cast<RawReceiver*>(arg)->poll(now);
}

int raw_setup(Context& ctx) {
  auto* st = new RawState;
  ctx.mode_state = st;
  const Options& o = ctx.opt;
  st->tx_node = o.role == "rx" ? nullptr : ctx.nodes.front();
  st->rx_node = o.role == "tx" ? nullptr : ctx.nodes.back();
  pick_lcores(ctx, st->tx_lcore, st->rx_lcore);
  if (!o.pair) st->tx_lcore = st->rx_lcore = single_lcore(ctx);  // one node per process
  if (st->tx_node) {
    RawSenderConfig sc{.msgs = o.msgs, .size = o.size, .burst = o.burst,
                           .rate_pps = o.rate_pps, .encap = o.encap};
    sc.encap.src_mac = st->tx_node->port.mac();
    if (int rc = st->sender.init(sc, st->tx_node->faulty, st->tx_node->pool); rc < 0) {
      std::fprintf(stderr, "imago-perf: --size %u does not fit a frame of this port's mbufs\n",
                   o.size);
      return rc;
    }
    ctx.runner.add_poll(st->tx_lcore, "raw-sender", sender_task, &st->sender);
  }
  if (st->rx_node) {
    if (int rc = st->receiver.init(o.msgs, o.burst, o.encap, st->rx_node->faulty); rc < 0) {
      return rc;
    }
    ctx.runner.add_poll(st->rx_lcore, "raw-receiver", receiver_task, &st->receiver);
  }
  return 0;
}

bool raw_finished(Context& ctx, uint64_t now) {
  RawState& st = state(ctx);
  bool tx_done = !st.tx_node || st.sender.done();
  uint64_t grace = ctx.tsc_hz / 10;  // after a FIN, 100 ms of silence: nothing is in flight
  uint64_t idle = ctx.tsc_hz * ctx.opt.idle_timeout_ms / 1000;
  bool rx_done = !st.rx_node || st.receiver.finished(now, grace, idle);
  return tx_done && rx_done;
}

double rate(uint64_t n, uint64_t tsc, uint64_t hz) {
  return tsc ? static_cast<double>(n) * static_cast<double>(hz) / static_cast<double>(tsc) : 0;
}

// Reads counters that the sender and receiver lcores write; a torn or stale value only
// skews one printed line (testpmd's stats display does the same).
std::string raw_stats_line(Context& ctx, uint64_t now) {
  RawState& st = state(ctx);
  const auto& rs = st.receiver.stats();
  uint64_t sent = st.sender.stats().sent, got = rs.delivered;
  uint64_t dt = st.last_line_tsc ? now - st.last_line_tsc : 0;
  char b[256];
  std::snprintf(b, sizeof b,
                "raw: sent %" PRIu64 " (%.2f M/s)  delivered %" PRIu64 " (%.2f M/s)  dup %" PRIu64
                "  reordered %" PRIu64 "  corrupted %" PRIu64 "  rejected %" PRIu64,
                sent, rate(sent - st.last_sent, dt, ctx.tsc_hz) / 1e6, got,
                rate(got - st.last_delivered, dt, ctx.tsc_hz) / 1e6, rs.duplicated, rs.reordered,
                rs.corrupted, rs.decode.total_rejected());
  st.last_line_tsc = now;
  st.last_sent = sent;
  st.last_delivered = got;
  return b;
}

// The span the figures are measured over: first frame sent (or received) to last delivered.
uint64_t measured_tsc(const RawState& st) {
  const auto& tx = st.sender.stats();
  const auto& rx = st.receiver.stats();
  uint64_t first = st.tx_node ? tx.first_tsc : rx.first_tsc;
  uint64_t last = st.rx_node ? rx.last_tsc : tx.last_tsc;
  return last > first ? last - first : 0;
}

app::Json fault_json(const dp::FaultyPort& p) {
  const auto& t = p.tx_stage().counters().model;
  const auto& r = p.rx_stage().counters().model;
  app::Json j;
  j.num("tx_dropped", t.lost()).num("tx_duplicated", t.duplicated).num("tx_corrupted", t.corrupted)
      .num("tx_reordered", t.reordered).num("tx_delayed", t.delayed);
  j.num("rx_dropped", r.lost()).num("rx_duplicated", r.duplicated).num("rx_corrupted", r.corrupted)
      .num("rx_reordered", r.reordered).num("rx_delayed", r.delayed);
  return j;
}

uint64_t faults_dropped(const RawState& st) {
  uint64_t d = 0;
  if (st.tx_node) d += st.tx_node->faulty.tx_stage().counters().model.lost();
  if (st.rx_node) d += st.rx_node->faulty.rx_stage().counters().model.lost();
  return d;
}

void print_summary(Context& ctx, uint64_t sent, uint64_t delivered, double secs) {
  RawState& st = state(ctx);
  const auto& rs = st.receiver.stats();
  const Options& o = ctx.opt;
  if (st.tx_node) {
    std::printf("Node %s sent %" PRIu64 " messages of %u bytes over %s (raw mode: no "
                "reliability, each message one frame).\n",
                st.tx_node->name, st.sender.stats().sent, o.size, st.tx_node->port.driver().c_str());
  }
  if (!st.rx_node) return;
  std::printf("The fault layer dropped %" PRIu64 " frames on purpose (fault spec tx: %s, rx: %s).\n",
              faults_dropped(st), dp::format_fault_spec(o.fault_tx).c_str(),
              dp::format_fault_spec(o.fault_rx).c_str());
  std::printf("Node %s received %" PRIu64 " of %" PRIu64 " messages intact (%.1f%%): %" PRIu64
              " lost, %" PRIu64 " duplicated, %" PRIu64 " reordered, %" PRIu64
              " corrupted, %" PRIu64 " frames rejected by the decoder.\n",
              st.rx_node->name, delivered, sent, sent ? 100.0 * delivered / sent : 0.0,
              sent > delivered ? sent - delivered : 0, rs.duplicated, rs.reordered, rs.corrupted,
              rs.decode.total_rejected());
  std::printf("Rate: %.2f million messages/s, %.3f Gbit/s of payload, over %.3f s.\n",
              secs > 0 ? delivered / secs / 1e6 : 0.0,
              secs > 0 ? rs.bytes * 8 / secs / 1e9 : 0.0, secs);
}

void raw_report(Context& ctx, app::Json& r) {
  RawState& st = state(ctx);
  const auto& rs = st.receiver.stats();
  double secs = static_cast<double>(measured_tsc(st)) / static_cast<double>(ctx.tsc_hz);
  uint64_t sent = st.rx_node && !st.tx_node ? st.receiver.sent_total() : st.sender.stats().sent;
  uint64_t delivered = rs.delivered;
  if (ctx.opt.verbose_summary) print_summary(ctx, sent, delivered, secs);
  r.num("msgs_sent", sent).num("msgs_delivered", delivered).num("bytes_delivered", rs.bytes);
  r.num("duration_s", secs).num("msgs_per_s", secs > 0 ? delivered / secs : 0.0);
  r.num("gbps", secs > 0 ? rs.bytes * 8 / secs / 1e9 : 0.0);
  r.num("lost", st.rx_node && sent > delivered ? sent - delivered : 0);
  r.num("duplicated", rs.duplicated).num("reordered", rs.reordered).num("corrupted", rs.corrupted);
  r.num("retransmits", uint64_t{0}).num("acks_sent", uint64_t{0}).num("nacks_sent", uint64_t{0});
  r.num("decode_rejected", rs.decode.total_rejected()).num("out_of_range", rs.out_of_range);
  r.boolean("sender_reported", rs.fins > 0);
  r.num("tx_full", st.sender.stats().tx_full).num("faults_dropped", faults_dropped(st));
  app::Json dec;
  for (size_t i = 0; i < dp::kDecodeErrorCount; ++i) {
    if (rs.decode.rejected[i]) dec.num(dp::decode_error_name(static_cast<dp::DecodeError>(i)), rs.decode.rejected[i]);
  }
  r.obj("decode", dec);
  for (NodePort* n : ctx.nodes) r.obj(std::string("fault_") + n->name, fault_json(n->faulty));
}

}  // namespace

extern const Mode kRawMode = {
    "raw", "numbered frames A -> B, no reliability: the link's own rate and loss", true,
    raw_setup, raw_finished, raw_stats_line, raw_report, delete_state<RawState>,
};

}  // namespace imago::perf
