// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/api_traffic.h"

#include <rte_cycles.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "dataplane/eal.h"

namespace imago::perf {
namespace {

constexpr unsigned kRecvBurst = 32;
// Receive bursts per send burst: with one, B's rx ring fills now and then and the engine holds
// credit back (bench/pipeline_bench.cc found the same).
constexpr unsigned kDrainBursts = 8;
constexpr unsigned kEchoSlots = 4096;
// Echo: A's messages not yet back. Both ends of a pair share the node's buffer pools: with no
// bound, A's tx ring takes the senders' share of the pool and B cannot send anything back.
constexpr uint64_t kEchoWindow = 1024;
constexpr unsigned kMaxBurst = 512;  // --burst's limit

enum class Kind { kStream, kRate, kEcho, kPingPong };

Kind kind_of(const Options& o) {
  if (o.mode == "rate") return Kind::kRate;
  if (o.mode == "echo") return Kind::kEcho;
  if (o.mode == "pingpong") return Kind::kPingPong;
  return Kind::kStream;
}

bool echoes(Kind k) { return k == Kind::kEcho || k == Kind::kPingPong; }
uint32_t send_flags(Kind k) { return k == Kind::kPingPong ? IMAGO_FASTPATH : 0; }

std::span<const uint8_t> bytes_of(imago_msg& m) { return {static_cast<const uint8_t*>(imago_msg_data(&m)), m.len}; }

void send_failed(ApiRun& r, int rc) {
  if (rc == -ENOTCONN) {
    r.closed = true;  // the endpoint closed under us, or imagod is gone
  } else {
    ++r.send_errors;
    std::fprintf(stderr, "imago-perf: send: %s\n", strerror(-rc));
  }
}

// Node A: up to a burst of new messages (one outstanding ping in pingpong).
void send_some(ApiRun& r, Kind k, uint64_t now) {
  if (!r.a.ep || r.sent >= r.o.msgs || r.outstanding) return;
  uint64_t n = k == Kind::kPingPong ? 1 : r.pacer.due(now, r.o.burst);
  n = std::min(n, r.o.msgs - r.sent);
  if (k == Kind::kEcho) n = std::min(n, kEchoWindow - std::min(kEchoWindow, r.sent - r.echo.echoes - r.echo.bad));
  if (n == 0) return;
  uint64_t stamp = k == Kind::kStream ? 0 : now;
  imago_iov iov[kMaxBurst];
  for (unsigned i = 0; i < n; ++i) {
    raw_fill(r.bufs[i].data(), r.o.size, r.sent + i, 0, stamp);
    iov[i] = {r.bufs[i].data(), r.o.size};
  }
  int taken = imago_send_burst(r.a.ep, iov, static_cast<unsigned>(n), send_flags(k));
  if (taken < 0) return send_failed(r, taken);
  if (taken == 0) return;  // back-pressure: the same sequence numbers go next time
  if (!r.first_tsc) r.first_tsc = now;
  r.sent += static_cast<unsigned>(taken);
  if (k == Kind::kPingPong) r.outstanding = true, r.ping_tsc = now;
}

// Node B: what the echo and pingpong modes send back, as the tx ring takes it.
void send_back(ApiRun& r, Kind k) {
  for (; !r.back.empty(); r.back.pop(), ++r.echoed) {
    std::span<const uint8_t> m = r.back.front();
    int rc = imago_send(r.b.ep, m.data(), static_cast<uint32_t>(m.size()), send_flags(k));
    if (rc == -EAGAIN) return;
    if (rc < 0) return send_failed(r, rc);
  }
}

void take_at_b(ApiRun& r, Kind k, imago_msg& m, uint64_t now) {
  std::span<const uint8_t> msg = bytes_of(m);
  if (!r.check.accept(msg, now)) return;
  if (k == Kind::kRate) {
    uint64_t stamp = raw_stamp(msg.data(), static_cast<uint16_t>(msg.size()));
    if (stamp && stamp < now) r.delay_ns.record((now - stamp) * 1'000'000'000 / r.tsc_hz);
  } else if (echoes(k)) {
    r.back.push(msg);
  }
}

// Node B: drain up to kDrainBursts bursts (echoing modes: as many as can go back).
void receive_b(ApiRun& r, Kind k, uint64_t now) {
  if (!r.b.ep) return;
  imago_msg msgs[kRecvBurst];
  for (unsigned d = 0; d < kDrainBursts; ++d) {
    unsigned want = echoes(k) ? std::min(kRecvBurst, r.back.room()) : kRecvBurst;
    int n = want ? imago_recv_burst(r.b.ep, msgs, want) : 0;
    if (n < 0) r.closed = true;
    if (n <= 0) break;
    r.last_rx_tsc = now;
    for (int i = 0; i < n; ++i) take_at_b(r, k, msgs[i], now);
    imago_release(r.b.ep, msgs, static_cast<unsigned>(n));
    if (static_cast<unsigned>(n) < want) break;
  }
  if (echoes(k)) send_back(r, k);
}

void take_echo(ApiRun& r, Kind k, imago_msg& m, uint64_t now) {
  std::span<const uint8_t> msg = bytes_of(m);
  if (k != Kind::kPingPong) {
    if (r.echo.on_echo(msg, now)) r.last_echo_tsc = now;
    return;
  }
  // A reliable stream never answers twice or out of turn.
  if (!r.outstanding || checked_seq(msg) != r.sent - 1) {
    ++r.echo.bad;
  } else if (r.echo.on_echo(msg, now, r.ping_tsc)) {
    r.outstanding = false;
    r.last_echo_tsc = now;
  }
}

// Node A, echoing modes: the messages B sent back.
void receive_a(ApiRun& r, Kind k, uint64_t now) {
  if (!r.a.ep || !echoes(k)) return;
  imago_msg msgs[kRecvBurst];
  for (unsigned d = 0; d < kDrainBursts; ++d) {
    int n = imago_recv_burst(r.a.ep, msgs, kRecvBurst);
    if (n < 0) r.closed = true;
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) take_echo(r, k, msgs[i], now);
    imago_release(r.a.ep, msgs, static_cast<unsigned>(n));
    if (static_cast<unsigned>(n) < kRecvBurst) break;
  }
}

// A sender alone is done once its peer confirmed everything: the engine took every message
// (the endpoint's msgs_sent) and, in a node snapshot published since, none is in flight.
bool confirmed(ApiRun& r, uint64_t now) {
  imago_ep_stats s{};
  if (imago_stats(r.a.ep, &s) < 0 || s.msgs_sent < r.sent) return false;
  if (!r.took_all_tsc) r.took_all_tsc = now;
  if (now - r.took_all_tsc < r.tsc_hz / 200) return false;  // 5 ms: snapshots are 1 ms apart
  imago_node_stats n{};
  return imago_node_stats_get(r.im, static_cast<unsigned>(r.a.node_index), &n) == 0 && n.msgs_in_flight == 0;
}

// The receiving end has every message (and, echoing, has sent every one back).
bool has_all(const ApiRun& r, Kind k) {
  return (echoes(k) ? r.echoed : r.check.delivered) >= r.o.msgs && r.back.empty();
}

// A receiver alone cannot know that its last ACK arrived; like TCP's TIME_WAIT it lingers
// until its node has heard no frame for 200 ms, or gives up after --idle-timeout-ms of silence.
bool receiver_done(ApiRun& r, Kind k, uint64_t now) {
  // Traffic begins with the sender's endpoint (or its first message), not with the first
  // frame: a receiver started first hears the link's own frames (an IPv6 solicitation on a
  // new veth, say) long before the sender comes.
  if (!r.b.up && r.check.delivered == 0) return false;
  imago_node_stats n{};
  imago_node_stats_get(r.im, static_cast<unsigned>(r.b.node_index), &n);
  uint64_t frames = n.frames_received + n.frames_rejected - r.b.node_before.frames_received -
                    r.b.node_before.frames_rejected;
  uint64_t idle = has_all(r, k) ? r.tsc_hz / 5 : r.tsc_hz * r.o.idle_timeout_ms / 1000;
  return r.frames.quiet(now, frames, idle);
}

bool finished(ApiRun& r, Kind k, uint64_t now) {
  bool a_done = r.sent >= r.o.msgs && (!echoes(k) || r.echo.echoes >= r.o.msgs);
  if (r.a.ep && r.b.ep) return a_done && r.check.delivered >= r.o.msgs;
  if (r.a.ep) return a_done && confirmed(r, now);
  return receiver_done(r, k, now);
}

enum class Death { kNone, kDied, kLeftAfterAll };

// A death of the peer once it was up, or one that dropped messages of ours: one not started
// yet (its end started later than ours, beyond --dead-after-ms) is declared dead by our node,
// which goes on probing: with nothing of ours lost, we wait for it.
// A receiver alone that has everything, none of its own messages lost with the peer, saw its
// sender leave once all was confirmed (before its 200 ms linger was over): that is no death.
Death peer_died(ApiRun& r, Kind k) {
  for (ApiEnd* e : {&r.a, &r.b}) {
    imago_ep_stats s{};
    if (!e->ep || imago_stats(e->ep, &s) != 0) continue;
    if (!e->up && imago_peer_ready(e->ep) == 1) {
      e->up = true, e->deaths_at_up = s.peer_deaths, e->unconfirmed_at_up = s.msgs_unconfirmed;
    }
    if (!e->up && s.msgs_unconfirmed != 0) return Death::kDied;  // a death before up lost ours
    if (!e->up || s.peer_deaths == e->deaths_at_up) continue;
    bool left = !r.a.ep && has_all(r, k) && s.msgs_unconfirmed == e->unconfirmed_at_up;
    return left ? Death::kLeftAfterAll : Death::kDied;
  }
  return Death::kNone;
}

void stats_line(ApiRun& r, uint64_t now) {
  if (r.o.stats_period_s <= 0 || now < r.next_stats) return;
  r.next_stats = tsc_after(now, r.o.stats_period_s, r.tsc_hz);
  std::printf("%s via api: sent %" PRIu64 "  delivered %" PRIu64 "  echoed %" PRIu64 "  back %" PRIu64 "\n",
              r.o.mode.c_str(), r.sent, r.check.delivered, r.echoed, r.echo.echoes);
  std::fflush(stdout);
}

// Every millisecond: is the run over (done, dead, closed, --duration, a signal)?
bool tick(ApiRun& r, Kind k, uint64_t now) {
  r.ended = dp::stop_requested() ? "signal" : r.closed ? "closed" : r.send_errors ? "send_error" : nullptr;
  if (!r.ended) {
    Death d = peer_died(r, k);
    if (d == Death::kLeftAfterAll) r.ended = "done";
    if (d == Death::kDied) r.dead = true, r.ended = "peer_dead";
  }
  // A receiver alone that gave up on silence short of --msgs did not finish: "idle".
  if (!r.ended && finished(r, k, now)) r.ended = r.a.ep || has_all(r, k) ? "done" : "idle";
  if (!r.ended && now >= r.deadline) r.timed_out = true, r.ended = "duration";
  if (!r.ended) stats_line(r, now);
  return r.ended != nullptr;
}

int check_mode(ApiRun& r, Kind k) {
  const Options& o = r.o;
  if (k == Kind::kRate && o.rate_pps == 0) {
    std::fprintf(stderr, "imago-perf: rate mode needs --rate PPS (messages per second)\n");
    return -EINVAL;
  }
  if ((k == Kind::kRate || k == Kind::kEcho) && o.size < kRawStampedSize) {
    std::fprintf(stderr, "imago-perf: %s mode needs --size %u or more (room for a timestamp)\n", o.mode.c_str(),
                 kRawStampedSize);
    return -EINVAL;
  }
  for (const ApiEnd* e : {&r.a, &r.b}) {
    if (e->ep && o.size > imago_max_message(e->ep)) {
      std::fprintf(stderr, "imago-perf: --size %u is above the library's largest message, %u (imagod "
                   "--max-message)\n", o.size, imago_max_message(e->ep));
      return -EMSGSIZE;
    }
  }
  return 0;
}

// The sender waits for its peer's endpoint before the clock starts (bounded by --duration);
// run-to-completion, it polls the nodes meanwhile (nothing else does).
void wait_for_peer(ApiRun& r) {
  while (r.a.ep && imago_peer_ready(r.a.ep) != 1 && !dp::stop_requested()) {
    if (rte_rdtsc() >= r.deadline) {
      r.timed_out = true, r.ended = "duration";
      return;
    }
    if (r.o.run_to_completion) {
      imago_engine_poll(r.im);
    } else {
      rte_delay_us_sleep(1000);
    }
  }
}

}  // namespace

int traffic_run(ApiRun& r) {
  Kind k = kind_of(r.o);
  if (int rc = check_mode(r, k); rc < 0) return rc;
  r.tsc_hz = rte_get_tsc_hz();
  r.bufs.assign(r.o.burst, std::vector<uint8_t>(r.o.size));
  r.pacer = app::Pacer(r.o.rate_pps ? r.tsc_hz / r.o.rate_pps : 0);
  r.echo.tsc_hz = r.tsc_hz;
  if (echoes(k)) r.back.init(kEchoSlots, r.o.size);
  r.deadline = tsc_after(rte_rdtsc(), r.o.duration_s, r.tsc_hz);
  std::printf("READY mode=%s shape=%s via=api attach=%s\n", r.o.mode.c_str(), r.o.pair ? "pair" : r.o.role.c_str(),
              r.o.attach.empty() ? "embedded" : "secondary");
  std::fflush(stdout);
  wait_for_peer(r);
  const bool inline_engines = r.o.run_to_completion;
  for (uint64_t next_tick = 0; !r.timed_out;) {
    if (inline_engines) imago_engine_poll(r.im);
    uint64_t now = rte_rdtsc();
    send_some(r, k, now);
    receive_b(r, k, now);
    receive_a(r, k, now);
    if (now < next_tick) continue;
    next_tick = now + r.tsc_hz / 1000;
    if (tick(r, k, now)) break;
  }
  return 0;
}

// The node's counters once the engine published what the run's end left (boards are 1 ms
// apart, and the last messages reach the application before their board): read until two
// reads 2 ms apart agree, for at most 100 ms. Control path, after the run.
static imago_node_stats settled_node_stats(const ApiRun& r, const ApiEnd& e) {
  imago_node_stats n{}, again{};
  imago_node_stats_get(r.im, static_cast<unsigned>(e.node_index), &n);
  for (int i = 0; i < 50; ++i) {
    rte_delay_us_sleep(2000);
    imago_node_stats_get(r.im, static_cast<unsigned>(e.node_index), &again);
    const bool same = again.msgs_sent == n.msgs_sent && again.msgs_received == n.msgs_received &&
                      again.frames_sent == n.frames_sent && again.frames_received == n.frames_received;
    n = again;
    if (same) break;
  }
  return n;
}

imago_node_stats node_delta(const ApiRun& r, const ApiEnd& e) {
  imago_node_stats n = settled_node_stats(r, e), d{};
  const imago_node_stats& b = e.node_before;
  d.node = n.node;
  d.msgs_sent = n.msgs_sent - b.msgs_sent, d.msgs_received = n.msgs_received - b.msgs_received;
  d.msgs_retransmitted = n.msgs_retransmitted - b.msgs_retransmitted;
  d.frames_sent = n.frames_sent - b.frames_sent, d.frames_received = n.frames_received - b.frames_received;
  d.frames_rejected = n.frames_rejected - b.frames_rejected;
  d.acks_sent = n.acks_sent - b.acks_sent, d.nacks_sent = n.nacks_sent - b.nacks_sent;
  d.losses_detected = n.losses_detected - b.losses_detected, d.rto_expired = n.rto_expired - b.rto_expired;
  d.msgs_by_ref = n.msgs_by_ref - b.msgs_by_ref;
  return d;
}

namespace {

void report_pingpong(ApiRun& r, app::Json& res) {
  // The round trips as a stream A received: what came back, checked.
  StreamCheck c;
  c.delivered = r.a.ep ? r.echo.echoes : r.echoed;
  c.bytes = c.delivered * r.o.size;
  c.corrupted = r.echo.bad + r.check.corrupted;
  c.duplicated = r.check.duplicated, c.reordered = r.check.reordered;
  double secs = r.last_echo_tsc > r.first_tsc ? static_cast<double>(r.last_echo_tsc - r.first_tsc) / r.tsc_hz : 0;
  const app::Histogram& h = r.echo.rtt_ns;
  if (r.o.verbose_summary && r.a.ep) {
    std::printf("Node A sent %" PRIu64 " messages of %u bytes one at a time through imago.h endpoints "
                "(FASTPATH); node B's application sent each back. The application thread busy-polls.\n",
                r.sent, r.o.size);
    std::printf("Round trip over %" PRIu64 " replies: %s.\n", r.echo.echoes, rtt_percentiles(h).c_str());
  }
  stream_json(c, r.a.ep ? r.sent : r.echoed, secs, r.a.ep != nullptr, res);
  res.obj("rtt_us", rtt_json(h)).boolean("peer_dead", r.dead);
  if (r.a.ep && !write_hist_csv(r.o, h)) r.output_failed = true;
}

}  // namespace

void traffic_report(ApiRun& r, app::Json& res) {
  Kind k = kind_of(r.o);
  if (k == Kind::kPingPong) return report_pingpong(r, res);
  uint64_t first = r.a.ep ? r.first_tsc : r.check.first_tsc;
  uint64_t last = r.b.ep ? r.check.last_tsc : rte_rdtsc();
  double secs = last > first && first ? static_cast<double>(last - first) / r.tsc_hz : 0;
  uint64_t sent = r.a.ep ? r.sent : r.o.msgs;
  if (r.o.verbose_summary) {
    std::printf("Node A sent %" PRIu64 " messages of %u bytes to node B through imago.h endpoints (%s).\n", sent,
                r.o.size, r.o.attach.empty() ? "the library embedded" : "a secondary of imagod");
    if (r.b.ep) print_delivery(r.check, sent, secs);
    if (r.dead) std::printf("The peer was declared dead.\n");
  }
  stream_json(r.check, sent, secs, r.b.ep != nullptr, res, r.tsc_hz);
  res.num("send_errors", r.send_errors).boolean("peer_dead", r.dead);
  if (k == Kind::kRate) {
    res.obj("delay_us", rtt_json(r.delay_ns));
    if (r.b.ep && !write_hist_csv(r.o, r.delay_ns)) r.output_failed = true;
  }
  if (k == Kind::kEcho) {
    res.obj("rtt_us", rtt_json(r.echo.rtt_ns));
    res.num("echoes", r.a.ep ? r.echo.echoes : r.echoed).num("echo_bad", r.echo.bad);
    if (r.a.ep && !write_hist_csv(r.o, r.echo.rtt_ns)) r.output_failed = true;
  }
}

}  // namespace imago::perf
