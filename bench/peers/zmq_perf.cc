// SPDX-License-Identifier: BSD-3-Clause
// zmq_perf: the ZeroMQ peer of the comparison (issue 5). PUSH/PULL for stream, REQ/REP for
// pingpong, over any endpoint libzmq takes (tcp://A:P, ipc:///path). See --help.
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common.h"

namespace imago::peers {
namespace {

constexpr ProgramInfo kInfo = {
    "zmq_perf",
    "ZeroMQ (libzmq), one zmq message per message. stream: PUSH (client, connects) to PULL\n"
    "(server, binds); libzmq batches small messages on the wire itself. pingpong: REQ (client)\n"
    "to REP (server), which echoes each message. The server always binds.\n",
    "ENDPOINT",
    "--bind tcp://10.0.0.1:5555 --mode stream --size 64\n  zmq_perf --role client --connect tcp://10.0.0.1:5555 --msgs 1000000 --size 64\n"
    "  (or ipc:///tmp/imago-zmq.sock on both sides)",
};

// Blocking calls time out this often so a blocked loop still sees its deadline and SIGTERM.
constexpr int kWakeMs = 200;
// The high-water marks are set from a byte budget: high enough that the sender never waits on
// a full queue while the receiver keeps up (PUSH blocks, it never drops, at the mark), low
// enough that 64 KiB messages cannot queue gigabytes.
constexpr size_t kQueueBudgetBytes = 256 * 1024 * 1024;
constexpr int kMinHwm = 1000;

int hwm_for(size_t size) { return std::max<int>(kMinHwm, static_cast<int>(kQueueBudgetBytes / size)); }

// How long closing waits for queued messages to leave: a PUSH client that has queued a whole
// stream must not drop its tail (and the end-of-stream message) on exit. -1: for ever.
int linger_ms(const Options& opt) {
  return opt.duration_s > 0 ? static_cast<int>((opt.duration_s + kServerGraceS) * 1000) : -1;
}

/** One zmq socket; blocking with a wake-up timeout, or ZMQ_DONTWAIT spun on (--busy-poll). */
class Socket {
 public:
  Socket(void* ctx, int type, const Options& opt) : s_(zmq_socket(ctx, type)), flags_(opt.busy_poll ? ZMQ_DONTWAIT : 0) {
    int hwm = hwm_for(opt.size), linger = linger_ms(opt), wake = kWakeMs;
    zmq_setsockopt(s_, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s_, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s_, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s_, ZMQ_RCVTIMEO, &wake, sizeof wake);
    zmq_setsockopt(s_, ZMQ_SNDTIMEO, &wake, sizeof wake);
  }
  ~Socket() { zmq_close(s_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  /** Bind (server) or connect (client). @return 0 or -errno. */
  int open(const Options& opt) {
    const char* ep = opt.endpoint.c_str();
    int rc = opt.role == Role::kServer ? zmq_bind(s_, ep) : zmq_connect(s_, ep);
    return rc == 0 ? 0 : -zmq_errno();
  }

  /** @return 0, -ETIMEDOUT when @p dl expired first, or the -errno of zmq_send. */
  int send(const uint8_t* p, size_t len, const Deadline& dl) {
    while (zmq_send(s_, p, len, flags_) < 0) {
      if (zmq_errno() != EAGAIN && zmq_errno() != EINTR) return -zmq_errno();
      if (dl.expired()) return -ETIMEDOUT;
    }
    return 0;
  }

  /** @return the message length (clamped to @p cap: longer ones are cut and fail the check),
   *          -ETIMEDOUT, or the -errno of zmq_recv. */
  long recv(uint8_t* p, size_t cap, const Deadline& dl) {
    for (;;) {
      int n = zmq_recv(s_, p, cap, flags_);
      if (n >= 0) return std::min<long>(n, static_cast<long>(cap));
      if (zmq_errno() != EAGAIN && zmq_errno() != EINTR) return -zmq_errno();
      if (dl.expired()) return -ETIMEDOUT;
    }
  }

 private:
  void* s_;
  int flags_;
};

// One byte more than the largest message, so a too-long one shows as a wrong length.
constexpr size_t kBufBytes = kMaxSize + 1;

app::Json detail(const Options& opt, const char* extra_key = nullptr, uint64_t extra = 0) {
  app::Json d;
  d.str("pattern", opt.mode == Mode::kStream ? "PUSH/PULL" : "REQ/REP");
  d.num("hwm", uint64_t(hwm_for(opt.size))).num("io_threads", uint64_t{1});
  if (extra_key) d.num(extra_key, extra);
  return d;
}

// ------------------------------------------------------------------ server
/** Receive (PULL) or echo (REP) until the end-of-stream message; @return the tally. */
Report serve(Socket& s, const Options& opt, const Deadline& dl) {
  std::vector<uint8_t> buf(kBufBytes);
  RxTally tally(opt.size);
  long n;
  bool eos = false;
  while (!eos && (n = s.recv(buf.data(), buf.size(), dl)) >= 0) {
    eos = tally.on_message(buf.data(), static_cast<size_t>(n));
    // REP must answer every request, the end-of-stream one too, or the client waits forever.
    if (opt.mode == Mode::kPingpong && s.send(buf.data(), static_cast<size_t>(n), dl) != 0) break;
  }
  Report r = tally.report();
  r.timed_out = !eos && dl.expired();
  return r;
}

int run_server(void* ctx, const Options& opt) {
  Deadline dl(opt.duration_s > 0 ? opt.duration_s + kServerGraceS : 0);
  Socket s(ctx, opt.mode == Mode::kStream ? ZMQ_PULL : ZMQ_REP, opt);
  if (int rc = s.open(opt); rc != 0) {
    return std::fprintf(stderr, "zmq_perf: bind %s: %s\n", opt.endpoint.c_str(), zmq_strerror(-rc)), 1;
  }
  std::printf("READY zmq %s %s\n", mode_name(opt.mode), opt.endpoint.c_str());
  std::fflush(stdout);
  Report r = serve(s, opt, dl);
  print_result("zmq", opt, r, detail(opt));
  return 0;
}

// ------------------------------------------------------------------ client
/** Stream: PUSH the messages, then the end-of-stream message. */
Report push_stream(Socket& s, const Options& opt, const Deadline& stop_at, const Deadline& io) {
  std::vector<uint8_t> buf(opt.size);
  Report r = send_loop(opt, stop_at, [&](uint64_t seq) {
    fill_message(buf.data(), opt.size, seq);
    return s.send(buf.data(), opt.size, io) == 0;
  });
  fill_eos(buf.data(), r.msgs_sent);  // every size holds kEosSize bytes
  if (s.send(buf.data(), kEosSize, io) != 0) std::fprintf(stderr, "zmq_perf: end of stream not sent\n");
  return r;
}

/** One REQ/REP round trip. @return 1: the reply came back intact with @p seq; 0: a reply
 *  came but fails that check; < 0: no reply (error or time limit). */
int round_trip(Socket& s, std::vector<uint8_t>& buf, size_t len, uint64_t seq, const Deadline& io) {
  if (int rc = s.send(buf.data(), len, io); rc != 0) return rc;
  long n = s.recv(buf.data(), buf.size(), io);
  if (n < 0) return static_cast<int>(n);
  Checked k = check_message(buf.data(), static_cast<size_t>(n), len);
  return k.kind != Kind::kCorrupt && k.value == seq;
}

/** Pingpong: one request in flight; every reply is checked and its round trip recorded. */
Report ping(Socket& s, const Options& opt, const Deadline& stop_at, const Deadline& io, app::Histogram& h) {
  std::vector<uint8_t> buf(kBufBytes);
  Report r = ping_loop(opt, stop_at, h, [&](uint64_t seq) {
    fill_message(buf.data(), opt.size, seq);
    return round_trip(s, buf, opt.size, seq, io);
  });
  // REP answers the end-of-stream request too; REQ must collect that answer.
  fill_eos(buf.data(), r.msgs_sent);
  if (round_trip(s, buf, kEosSize, r.msgs_sent, io) != 1) std::fprintf(stderr, "zmq_perf: end of stream not echoed\n");
  return r;
}

int run_client(void* ctx, const Options& opt) {
  Deadline stop_at(opt.duration_s);
  Deadline io(opt.duration_s > 0 ? opt.duration_s + kServerGraceS : 0);
  Socket s(ctx, opt.mode == Mode::kStream ? ZMQ_PUSH : ZMQ_REQ, opt);
  if (int rc = s.open(opt); rc != 0) {
    return std::fprintf(stderr, "zmq_perf: connect %s: %s\n", opt.endpoint.c_str(), zmq_strerror(-rc)), 1;
  }
  app::Histogram h;
  Report r;
  if (opt.mode == Mode::kStream) {
    r = push_stream(s, opt, stop_at, io);
  } else {
    r = ping(s, opt, stop_at, io, h);
  }
  // A stream client cannot know what arrived: it reports its send rate; the server counts.
  double send_rate = r.duration_s > 0 ? static_cast<double>(r.msgs_sent) / r.duration_s : 0;
  print_result("zmq", opt, r, detail(opt, "send_msgs_per_s", static_cast<uint64_t>(send_rate)));
  return 0;
}

}  // namespace
}  // namespace imago::peers

int main(int argc, char** argv) {
  using namespace imago::peers;
  Options opt;
  int rc = parse_options(argc, argv, kInfo, opt);
  if (rc != 0) return rc > 0 ? 0 : 2;
  install_stop_handlers();
  void* ctx = zmq_ctx_new();
  rc = opt.role == Role::kServer ? run_server(ctx, opt) : run_client(ctx, opt);
  zmq_ctx_term(ctx);  // waits (up to the linger) for queued messages: the end of a stream
  return rc;
}
