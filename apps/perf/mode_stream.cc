// SPDX-License-Identifier: BSD-3-Clause
// Stream mode: a one-way reliable stream A -> B through the reliability engine. Every message
// carries an application sequence number and a CRC32C that the receiving application checks,
// so loss, duplication, reordering and corruption are counted above the engine, not by it.
#include <rte_cycles.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "apps/perf/engine_node.h"
#include "dataplane/raw_traffic.h"

namespace imago::perf {
namespace {

// The receiving application: checks each message as it is delivered.
struct StreamReceiver final : rel::AppSink {
  uint64_t expected = 0, delivered = 0, bytes = 0;
  uint64_t duplicated = 0, reordered = 0, corrupted = 0, gaps = 0;
  uint64_t first_tsc = 0, last_tsc = 0;
  bool dead = false;

  bool deliver(rel::NodeId, std::span<const uint8_t> msg) override {
    auto len = static_cast<uint16_t>(msg.size());
    if (msg.size() > UINT16_MAX || !dp::raw_verify(msg.data(), len)) {
      ++corrupted;
      return true;
    }
    dp::RawHdr h;
    std::memcpy(&h, msg.data(), sizeof h);
    uint64_t seq = h.seq.get();
    if (seq < expected) {
      ++duplicated;
      return true;
    }
    if (seq > expected) {
      ++reordered;  // arrived ahead of messages not yet delivered: the engine broke order
      gaps += seq - expected;
    }
    expected = seq + 1;
    ++delivered;
    bytes += len;
    last_tsc = rte_rdtsc();
    if (!first_tsc) first_tsc = last_tsc;
    return true;
  }
  void on_peer_dead(rel::NodeId, uint64_t) override { dead = true; }
};

// The sending side's application sink: a one-way stream receives nothing; it learns deaths.
struct SenderEvents final : rel::AppSink {
  bool dead = false;
  bool deliver(rel::NodeId, std::span<const uint8_t>) override { return true; }
  void on_peer_dead(rel::NodeId, uint64_t) override { dead = true; }
};

struct StreamState {
  EngineNode tx, rx;  // a node is unused (node == nullptr) when this process has only the other
  SenderEvents tx_events;
  StreamReceiver rx_app;
  std::vector<uint8_t> msg;
  uint64_t sent = 0, send_errors = 0, first_tsc = 0;
  uint64_t total = 0;
  uint16_t size = 0, burst = 32;
  ActivityWatch rx_frames;  // a receiver alone lingers until the sender falls silent
};

StreamState& state(Context& ctx) { return *static_cast<StreamState*>(ctx.mode_state); }

// Sender lcore task: queue up to a burst of messages, then move frames.
unsigned sender_task(void* arg, uint64_t now) {
  auto* st = static_cast<StreamState*>(arg);
  EngineNode& en = st->tx;
  en.link.set_now(now);
  uint64_t now_ns = en.link.now_ns(now);
  unsigned work = 0;
  for (uint16_t i = 0; i < st->burst && st->sent < st->total && !st->tx_events.dead; ++i) {
    dp::raw_fill(st->msg.data(), st->size, st->sent, 0);
    int rc = en.engine->send(en.peer, st->msg, 0, now_ns);
    if (rc == -EAGAIN) break;  // window or credit full: back-pressure, try next round
    if (rc < 0) {
      ++st->send_errors;
      break;
    }
    if (!st->first_tsc) st->first_tsc = now;
    ++st->sent;
    ++work;
  }
  return work + en.link.poll(now);
}

unsigned receiver_task(void* arg, uint64_t now) {
  return static_cast<EngineNode*>(arg)->link.poll(now);
}

int stream_setup(Context& ctx) {
  auto* st = new StreamState;
  ctx.mode_state = st;
  const Options& o = ctx.opt;
  st->total = o.msgs;
  st->size = o.size;
  st->burst = o.burst;
  st->msg.assign(o.size, 0);
  return open_engine_sides(ctx, {&st->tx, &st->tx_events, "stream-sender", sender_task, st},
                           {&st->rx, &st->rx_app, "stream-receiver", receiver_task, &st->rx});
}

bool stream_finished(Context& ctx, uint64_t now) {
  StreamState& st = state(ctx);
  if (st.tx_events.dead || st.rx_app.dead || st.send_errors) return true;
  bool tx_done = !st.tx.node ||
                 (st.sent == st.total && st.tx.engine->unconfirmed_messages(st.tx.peer) == 0);
  if (!st.rx.node || st.tx.node) return tx_done && (!st.rx.node || st.rx_app.delivered >= st.total);
  // A receiver in its own process cannot know that its last ACK arrived; like TCP's
  // TIME_WAIT it lingers until the sender has been quiet a while (no retransmission came).
  uint64_t frames = st.rx.link.counters().frames_in;
  uint64_t linger = ctx.tsc_hz / 5, idle = ctx.tsc_hz * ctx.opt.idle_timeout_ms / 1000;
  bool all = st.rx_app.delivered >= st.total;
  return st.rx_frames.quiet(now, frames, all ? linger : idle);
}

std::string stream_stats_line(Context& ctx, uint64_t) {
  StreamState& st = state(ctx);
  const rel::PeerCounters* c = st.tx.engine ? st.tx.engine->counters(st.tx.peer) : nullptr;
  char b[256];
  std::snprintf(b, sizeof b, "stream: sent %" PRIu64 "  delivered %" PRIu64 "  retransmitted %" PRIu64
                "  lost-detected %" PRIu64, st.sent, st.rx_app.delivered,
                c ? c->msgs_retransmitted : 0, c ? c->pkts_lost : 0);
  return b;
}

void print_summary(Context& ctx, StreamState& st, double secs) {
  const StreamReceiver& r = st.rx_app;
  std::printf("Node A sent %" PRIu64 " messages of %u bytes to node B through the reliability engine "
              "(fault spec tx: %s, rx: %s).\n", st.sent, ctx.opt.size,
              dp::format_fault_spec(ctx.opt.fault_tx).c_str(), dp::format_fault_spec(ctx.opt.fault_rx).c_str());
  if (st.rx.node) {
    std::printf("Node B's application received %" PRIu64 " messages: %" PRIu64 " missing, %" PRIu64
                " duplicated, %" PRIu64 " out of order, %" PRIu64 " corrupted.\n",
                r.delivered, st.sent > r.delivered ? st.sent - r.delivered : 0, r.duplicated, r.reordered,
                r.corrupted);
    std::printf("Rate: %.2f million messages/s, %.3f Gbit/s of payload, over %.3f s.\n",
                secs > 0 ? r.delivered / secs / 1e6 : 0.0, secs > 0 ? r.bytes * 8 / secs / 1e9 : 0.0, secs);
  }
  if (st.tx_events.dead || st.rx_app.dead) std::printf("The peer was declared dead.\n");
}

void stream_report(Context& ctx, app::Json& r) {
  StreamState& st = state(ctx);
  const StreamReceiver& a = st.rx_app;
  uint64_t first = st.tx.node ? st.first_tsc : a.first_tsc;
  double secs = a.last_tsc > first ? static_cast<double>(a.last_tsc - first) / ctx.tsc_hz : 0;
  if (!st.rx.node && st.tx.node) secs = static_cast<double>(rte_rdtsc() - first) / ctx.tsc_hz;
  if (ctx.opt.verbose_summary) print_summary(ctx, st, secs);
  const rel::PeerCounters* tc = st.tx.engine ? st.tx.engine->counters(st.tx.peer) : nullptr;
  const rel::PeerCounters* rc = st.rx.engine ? st.rx.engine->counters(st.rx.peer) : nullptr;
  uint64_t sent = st.tx.node ? st.sent : st.total;
  r.num("msgs_sent", sent).num("msgs_delivered", a.delivered).num("bytes_delivered", a.bytes)
      .num("duration_s", secs).num("msgs_per_s", secs > 0 ? a.delivered / secs : 0.0)
      .num("gbps", secs > 0 ? a.bytes * 8 / secs / 1e9 : 0.0)
      .num("lost", st.rx.node && sent > a.delivered ? sent - a.delivered : 0)
      .num("duplicated", a.duplicated).num("reordered", a.reordered).num("corrupted", a.corrupted)
      .num("retransmits", tc ? tc->msgs_retransmitted : 0)
      .num("acks_sent", rc ? rc->ack_only_sent : 0).num("nacks_sent", rc ? rc->nacks_sent : 0)
      .num("send_errors", st.send_errors).boolean("peer_dead", st.tx_events.dead || st.rx_app.dead);
  uint64_t rejected = 0;
  for (const EngineNode* en : {&st.tx, &st.rx}) {
    if (!en->node) continue;
    engine_counters_json(*en, r);
    rejected += en->link.counters().decode.total_rejected();
  }
  r.num("decode_rejected", rejected);
}

}  // namespace

extern const Mode kStreamMode = {
    "stream", "reliable one-way stream A -> B: every message checked for order and integrity", false,
    stream_setup, stream_finished, stream_stats_line, stream_report, delete_state<StreamState>,
};

}  // namespace imago::perf
