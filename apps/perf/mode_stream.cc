// SPDX-License-Identifier: BSD-3-Clause
// Stream modes through the reliability engine: stream (one-way, as fast as it goes), rate (one
// way at --rate messages/s, as in the NASA tests: end-to-end delay) and echo (B sends every
// message back: round trips with many messages in flight). Every message carries an
// application sequence number and a CRC32C that the receiving application checks, so loss,
// duplication, reordering and corruption are counted above the engine, not by it; rate and
// echo messages also carry their send time (TSC: one host, so one clock).
#include <rte_cycles.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <vector>

#include "apps/perf/engine_end.h"
#include "apps/common/histogram.h"
#include "apps/common/output_file.h"
#include "apps/common/pacer.h"
#include "apps/perf/raw_traffic.h"
#include "apps/perf/stream_check.h"

namespace imago::perf {
namespace {

enum class Variant { kStream, kRate, kEcho };

// The receiving application: checks each message as it is delivered; in rate mode it times
// the one-way delay, in echo mode it queues the message to go back.
struct StreamReceiver final : PeerLife {
  StreamCheck check;
  uint64_t tsc_hz = 1;
  Variant variant = Variant::kStream;
  app::Histogram delay_ns;
  EchoQueue* echo = nullptr;
  uint64_t poll_tsc = 0;  ///< when the poll delivering now began (a stream's first/last time)
  // --arrivals: each message's arrival (wall clock, read then: the TSC's rate as DPDK
  // measured it drifts from it by parts per thousand) and delay, in room reserved at set-up
  // (a message beyond it is not recorded: no allocation while delivering).
  std::vector<uint64_t> arrive_unix_ns;
  std::vector<uint32_t> arrive_delay_ns;

  bool deliver(rel::NodeId, std::span<const uint8_t> msg) override {
    if (variant == Variant::kEcho && echo->full()) return false;  // back-pressure via credits
    // Only a one-way delay needs each message's own time: a clock read per message would
    // cost a stream of small ones a sixth of its rate.
    uint64_t now = variant == Variant::kRate ? rte_rdtsc() : poll_tsc;
    if (!check.accept(msg, now)) return true;
    if (variant == Variant::kRate) {
      uint64_t stamp = raw_stamp(msg.data(), static_cast<uint16_t>(msg.size()));
      const uint64_t d = stamp && stamp < now ? (now - stamp) * 1'000'000'000 / tsc_hz : 0;
      if (d != 0) delay_ns.record(d);
      if (arrive_unix_ns.size() < arrive_unix_ns.capacity()) {
        timespec ts{};
        clock_gettime(CLOCK_REALTIME, &ts);  // vDSO: no system call
        arrive_unix_ns.push_back(static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec));
        arrive_delay_ns.push_back(static_cast<uint32_t>(std::min<uint64_t>(d, UINT32_MAX)));
      }
    } else if (variant == Variant::kEcho) {
      echo->push(msg);
    }
    return true;
  }
};

// Buffers for messages sent by reference (Engine::send_ref()): each is the engine's from its
// sending until ext_done() gives it back, acknowledged.
struct RefBuffers {
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<uint32_t> free;
  void init(size_t n, size_t size) {
    bufs.assign(n, std::vector<uint8_t>(size));
    for (size_t i = n; i-- > 0;) free.push_back(static_cast<uint32_t>(i));
  }
};

// The sending side's application: learns deaths; in echo mode it times the returning messages.
struct SenderEvents final : PeerLife {
  EchoTimer timer;
  RefBuffers refs;

  void ext_done(uint64_t cookie) override { refs.free.push_back(static_cast<uint32_t>(cookie)); }

  bool deliver(rel::NodeId, std::span<const uint8_t> msg) override {
    timer.on_echo(msg, rte_rdtsc());
    return true;
  }
};

struct StreamState {
  // The engines' sinks first: the engines, destroyed before them, hand back what they still
  // hold (ext_done() of messages by reference a run cut short left unacknowledged).
  SenderEvents tx_events;
  StreamReceiver rx_app;
  EngineEnd tx, rx;  // a node is unused (node == nullptr) when this process has only the other
  EchoQueue echo_q;
  app::Pacer pacer;
  Variant variant = Variant::kStream;
  std::vector<uint8_t> msg[2];  ///< by sequence number's parity: the next one is filled ahead
  uint64_t sent = 0, send_errors = 0, first_tsc = 0, echoed = 0;
  uint64_t filled[2] = {UINT64_MAX, UINT64_MAX};  ///< the sequence number each msg holds
  uint64_t total = 0;
  uint16_t size = 0, burst = 32;
  ActivityWatch rx_frames;  // a receiver alone lingers until the sender falls silent
};

StreamState& state(Context& ctx) { return *static_cast<StreamState*>(ctx.mode_state); }

// The message numbered @p seq, filled unless it already is (refused by a full window, or
// filled ahead; one carrying a time is filled when it goes). A message is filled one send
// ahead: a copy reading bytes whose stores have not yet drained stalls for the store buffer
// (a 64 B sender lost a quarter of its rate to it), as an application that writes each
// message just before sending it would make the transport wait.
const std::vector<uint8_t>& fill(StreamState& st, uint64_t seq, uint64_t stamp) {
  std::vector<uint8_t>& m = st.msg[seq & 1];
  if (stamp != 0 || st.filled[seq & 1] != seq) raw_fill(m.data(), st.size, seq, 0, stamp);
  st.filled[seq & 1] = seq;
  return m;
}

// Send message @p seq from a free buffer of @p st's, by reference. @return as send().
int send_by_ref(StreamState& st, uint64_t seq, uint64_t stamp, uint64_t now_ns) {
  RefBuffers& r = st.tx_events.refs;
  if (r.free.empty()) return -EAGAIN;  // all in flight: the window's back-pressure, in buffers
  const uint32_t k = r.free.back();
  raw_fill(r.bufs[k].data(), st.size, seq, 0, stamp);
  const int rc = st.tx.engine->send_ref(st.tx.peer, {r.bufs[k].data(), st.size}, 0, now_ns, k);
  if (rc == 0) r.free.pop_back();  // 1: copied after all, the buffer is free again
  return rc < 0 ? rc : 0;
}

// Sender lcore task: queue up to a burst of messages, then move frames.
unsigned sender_task(void* arg, uint64_t now) {
  auto* st = static_cast<StreamState*>(arg);
  EngineEnd& en = st->tx;
  dp::node_engine_set_now(en, now);
  uint64_t now_ns = en.link.now_ns(now);
  unsigned work = 0;
  uint16_t allowed = st->pacer.due(now, st->burst);
  uint64_t stamp = st->variant == Variant::kStream ? 0 : now;
  for (uint16_t i = 0; i < allowed && st->sent < st->total && !st->tx_events.dead; ++i) {
    int rc;
    if (!st->tx_events.refs.bufs.empty()) {
      rc = send_by_ref(*st, st->sent, stamp, now_ns);
    } else {
      const std::vector<uint8_t>& msg = fill(*st, st->sent, stamp);
      rc = en.engine->send(en.peer, msg, 0, now_ns);
    }
    if (rc == -EAGAIN) break;  // window or credit full: back-pressure, try next round
    if (rc < 0) {
      ++st->send_errors;
      break;
    }
    if (!st->first_tsc) st->first_tsc = now;
    ++st->sent;
    ++work;
    if (stamp == 0 && st->tx_events.refs.bufs.empty()) fill(*st, st->sent, 0);  // ahead (see fill())
  }
  return work + dp::node_engine_poll(en, now);
}

unsigned receiver_task(void* arg, uint64_t now) {
  auto* st = static_cast<StreamState*>(arg);
  EngineEnd& en = st->rx;
  st->rx_app.poll_tsc = now;
  unsigned work = dp::node_engine_poll(en, now);
  if (st->variant != Variant::kEcho || st->echo_q.empty()) return work;
  dp::node_engine_set_now(en, now);
  uint64_t now_ns = en.link.now_ns(now);
  for (; !st->echo_q.empty(); st->echo_q.pop(), ++st->echoed, ++work) {
    if (en.engine->send(en.peer, st->echo_q.front(), 0, now_ns) != 0) break;  // -EAGAIN: later
  }
  return work + dp::node_engine_flush(en, now);
}

int setup_variant(Context& ctx, Variant v) {
  auto* st = new StreamState;
  ctx.mode_state = st;
  const Options& o = ctx.opt;
  if (v != Variant::kStream && o.size < kRawStampedSize) {
    std::fprintf(stderr, "imago-perf: %s mode needs --size %u or more (room for a timestamp)\n",
                 o.mode.c_str(), kRawStampedSize);
    return -EINVAL;
  }
  if (v == Variant::kRate && o.rate_pps == 0) {
    std::fprintf(stderr, "imago-perf: rate mode needs --rate PPS (messages per second)\n");
    return -EINVAL;
  }
  st->variant = v;
  st->total = o.msgs;
  st->size = o.size;
  st->burst = o.burst;
  for (auto& m : st->msg) m.assign(o.size, 0);
  st->pacer = app::Pacer(o.rate_pps ? ctx.tsc_hz / o.rate_pps : 0);
  st->rx_app.variant = v;
  st->rx_app.tsc_hz = st->tx_events.timer.tsc_hz = ctx.tsc_hz;
  st->rx_app.echo = &st->echo_q;
  if (v == Variant::kEcho) st->echo_q.init(4096, o.size);
  if (v == Variant::kRate && !o.arrivals_csv.empty()) {
    const size_t n = std::min<uint64_t>(o.msgs, 50'000'000);
    st->rx_app.arrive_unix_ns.reserve(n);
    st->rx_app.arrive_delay_ns.reserve(n);
  }
  const int rc = open_engine_sides(ctx, {&st->tx, &st->tx_events, "stream-sender", sender_task, st},
                                  {&st->rx, &st->rx_app, "stream-receiver", receiver_task, st});
  // By reference where the link allows it (--send-copy: never): buffers for 64 MiB of
  // messages in flight, 64 to 65,536 of them.
  if (rc == 0 && v != Variant::kEcho && !o.send_copy && st->tx.engine && st->tx.engine->by_ref(o.size))
    st->tx_events.refs.init(std::clamp<size_t>((size_t{64} << 20) / o.size, 64, 65536), o.size);
  return rc;
}

// --arrivals FILE: "unix_us,delay_us" per message delivered, in delivery order.
// @return false when it could not be written (said on stderr, with why).
bool write_arrivals(const Context& ctx, const StreamReceiver& r) {
  if (ctx.opt.arrivals_csv.empty()) return true;
  const std::string why = app::write_output(ctx.opt.arrivals_csv, [&](FILE* f) {
    std::fprintf(f, "unix_us,delay_us\n");
    for (size_t i = 0; i < r.arrive_unix_ns.size() && !std::ferror(f); ++i)
      std::fprintf(f, "%.1f,%.2f\n", static_cast<double>(r.arrive_unix_ns[i]) / 1e3, r.arrive_delay_ns[i] / 1e3);
  });
  if (!why.empty())
    std::fprintf(stderr, "imago-perf: --arrivals %s: not written: %s\n", ctx.opt.arrivals_csv.c_str(), why.c_str());
  return why.empty();
}

int stream_setup(Context& ctx) { return setup_variant(ctx, Variant::kStream); }
int rate_setup(Context& ctx) { return setup_variant(ctx, Variant::kRate); }
int echo_setup(Context& ctx) { return setup_variant(ctx, Variant::kEcho); }

bool stream_finished(Context& ctx, uint64_t now) {
  StreamState& st = state(ctx);
  bool all = st.rx_app.check.delivered >= st.total && (st.variant != Variant::kEcho || st.echoed >= st.total);
  if (st.rx_app.left_after_all(!st.tx.node && all)) return true;
  if (st.tx_events.dead || st.rx_app.dead || st.send_errors) return true;
  bool tx_done = !st.tx.node ||
                 (st.sent == st.total && st.tx.engine->unconfirmed_messages(st.tx.peer) == 0 &&
                  (st.variant != Variant::kEcho || st.tx_events.timer.echoes >= st.total));
  if (!st.rx.node || st.tx.node) return tx_done && (!st.rx.node || st.rx_app.check.delivered >= st.total);
  // A receiver in its own process cannot know that its last ACK arrived; like TCP's
  // TIME_WAIT it lingers until the sender has been quiet a while (no retransmission came).
  uint64_t frames = st.rx.link.counters().frames_in + st.rx.link_b.counters().frames_in;
  uint64_t linger = ctx.tsc_hz / 5, idle = ctx.tsc_hz * ctx.opt.idle_timeout_ms / 1000;
  return st.rx_frames.quiet(now, frames, all ? linger : idle);
}

std::string stream_stats_line(Context& ctx, uint64_t) {
  StreamState& st = state(ctx);
  const rel::PeerCounters* c = st.tx.engine ? st.tx.engine->counters(st.tx.peer) : nullptr;
  char b[256];
  std::snprintf(b, sizeof b, "%s: sent %" PRIu64 "  delivered %" PRIu64 "  retransmitted %" PRIu64
                "  lost-detected %" PRIu64, ctx.opt.mode.c_str(), st.sent, st.rx_app.check.delivered,
                c ? c->msgs_retransmitted : 0, c ? c->pkts_lost : 0);
  if (st.variant == Variant::kRate) return b + ("  delay " + rtt_percentiles(st.rx_app.delay_ns));
  if (st.variant == Variant::kEcho) return b + ("  rtt " + rtt_percentiles(st.tx_events.timer.rtt_ns));
  return b;
}

void stream_report(Context& ctx, app::Json& r) {
  StreamState& st = state(ctx);
  const StreamCheck& a = st.rx_app.check;
  uint64_t first = st.tx.node ? st.first_tsc : a.first_tsc;
  double secs = a.last_tsc > first ? static_cast<double>(a.last_tsc - first) / ctx.tsc_hz : 0;
  if (!st.rx.node && st.tx.node) secs = static_cast<double>(rte_rdtsc() - first) / ctx.tsc_hz;
  uint64_t sent = st.tx.node ? st.sent : st.total;
  bool dead = st.tx_events.dead || st.rx_app.dead;
  ctx.peer_dead = dead;
  ctx.fell_silent = st.rx.node && !st.tx.node && !dead && a.delivered < st.total;
  if (ctx.opt.verbose_summary) {
    const std::string tx = dp::format_fault_spec(ctx.opt.fault_tx), rx = dp::format_fault_spec(ctx.opt.fault_rx);
    if (st.tx.node)
      std::printf("Node A sent %" PRIu64 " messages of %u bytes to node B through the reliability engine "
                  "(fault spec tx: %s, rx: %s).\n", st.sent, ctx.opt.size, tx.c_str(), rx.c_str());
    else  // --role rx: node A is another process, its count is not known here
      std::printf("Node B took node A's messages through the reliability engine (fault spec tx: %s, "
                  "rx: %s).\n", tx.c_str(), rx.c_str());  // of the sender's --size, not its own
    if (st.rx.node) print_delivery(a, sent, secs);
    if (dead) std::printf("The peer was declared dead.\n");
  }
  stream_json(a, sent, secs, st.rx.node != nullptr, r, ctx.tsc_hz);
  r.num("send_errors", st.send_errors).boolean("peer_dead", dead);
  engine_sides_json(st.tx, st.rx, r);
  if (st.variant == Variant::kRate) r.obj("delay_us", rtt_json(st.rx_app.delay_ns));
  if (st.variant == Variant::kEcho) {
    r.obj("rtt_us", rtt_json(st.tx_events.timer.rtt_ns));
    r.num("echoes", st.tx.node ? st.tx_events.timer.echoes : st.echoed).num("echo_bad", st.tx_events.timer.bad);
    if (st.tx.node && !write_hist_csv(ctx.opt, st.tx_events.timer.rtt_ns)) ctx.output_failed = true;
  }
  if (st.variant == Variant::kRate && st.rx.node && !write_hist_csv(ctx.opt, st.rx_app.delay_ns))
    ctx.output_failed = true;
  if (st.variant == Variant::kRate && st.rx.node && !write_arrivals(ctx, st.rx_app)) ctx.output_failed = true;
}

}  // namespace

extern const Mode kRateMode = {
    "rate", "reliable stream at --rate messages/s (NASA style): end-to-end delay histogram", false,
    rate_setup, stream_finished, stream_stats_line, stream_report, delete_state<StreamState>,
};

extern const Mode kEchoMode = {
    "echo", "reliable stream A -> B, B sends each message back: round trips under load", false,
    echo_setup, stream_finished, stream_stats_line, stream_report, delete_state<StreamState>,
};

extern const Mode kStreamMode = {
    "stream", "reliable one-way stream A -> B: every message checked for order and integrity", false,
    stream_setup, stream_finished, stream_stats_line, stream_report, delete_state<StreamState>,
};

}  // namespace imago::perf
