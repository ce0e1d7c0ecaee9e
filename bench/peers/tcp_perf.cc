// SPDX-License-Identifier: BSD-3-Clause
// tcp_perf: the kernel-TCP peer of the comparison (issue 5). One connection, TCP_NODELAY,
// messages framed as a 4-byte big-endian length and the payload. See --help.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

namespace imago::peers {
namespace {

constexpr ProgramInfo kInfo = {
    "tcp_perf",
    "Kernel TCP with TCP_NODELAY, one connection, 4-byte big-endian length + payload per\n"
    "message. stream: the client writes --msgs messages back to back, coalesced into writes\n"
    "of up to 256 KiB as a buffered writer would; the server reads and verifies each.\n"
    "pingpong: the client sends one message, the server echoes it, the client times it.\n",
    "ADDR:PORT",
    "--bind 10.0.0.1:5201 --mode stream --size 64\n  tcp_perf --role client --connect 10.0.0.1:5201 --mode stream --msgs 1000000 --size 64",
};

// The stream client coalesces messages into one send() of up to this many bytes: what an
// application with a user-space buffered writer does (one syscall per batch, not per message).
constexpr size_t kTxBatchBytes = 256 * 1024;
constexpr size_t kLenBytes = 4;
// The reader's buffer: several batches, and always room for one whole largest frame.
constexpr size_t kRxBufBytes = 1024 * 1024;
// Blocking calls time out this often so a blocked loop still sees its deadline and SIGTERM.
constexpr int kWakeMs = 200;

// ------------------------------------------------------------------ one connection
/** A connected socket, blocking (with a wake-up timeout) or non-blocking for --busy-poll. */
class Conn {
 public:
  Conn(int fd, bool spin) : fd_(fd) { configure(spin); }
  ~Conn() { ::close(fd_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  /** @return 0, -ETIMEDOUT when @p dl expired first, or the -errno of send(). */
  int write_all(const uint8_t* p, size_t len, const Deadline& dl) {
    while (len > 0) {
      ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
      if (n > 0) {
        p += n;
        len -= static_cast<size_t>(n);
      } else if (errno != EAGAIN && errno != EINTR) {
        return -errno;
      } else if (dl.expired()) {
        return -ETIMEDOUT;
      }
    }
    return 0;
  }

  /** @return bytes read (> 0), 0 at end of stream, -ETIMEDOUT, or the -errno of recv(). */
  ssize_t read_some(uint8_t* p, size_t len, const Deadline& dl) {
    for (;;) {
      ssize_t n = ::recv(fd_, p, len, 0);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EINTR) return -errno;
      if (dl.expired()) return -ETIMEDOUT;
    }
  }

  /** Half-close, then wait (bounded) for the peer to close: nothing is cut off by a reset. */
  void finish(const Deadline& dl) {
    ::shutdown(fd_, SHUT_WR);
    uint8_t sink[4096];
    while (read_some(sink, sizeof sink, dl) > 0) {
    }
  }

 private:
  void configure(bool spin) {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (spin) {
      int fl = fcntl(fd_, F_GETFL);
      fcntl(fd_, F_SETFL, fl | O_NONBLOCK);
      return;
    }
    timeval tv{0, kWakeMs * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  int fd_;
};

/** Cuts the byte stream into length-prefixed frames. */
class FrameReader {
 public:
  FrameReader() : buf_(kRxBufBytes) {}

  /** @return 1 with the next frame's payload in @p p / @p len, 0 at a clean end of stream,
   *          -EPROTO on a bad length or a stream cut mid-frame, or the error of read_some. */
  int next(Conn& c, const Deadline& dl, const uint8_t*& p, size_t& len) {
    for (;;) {
      if (int r = parse(p, len); r != 0) return r;
      if (tail_ == buf_.size()) compact();
      ssize_t n = c.read_some(buf_.data() + tail_, buf_.size() - tail_, dl);
      if (n <= 0) return n == 0 && head_ == tail_ ? 0 : (n == 0 ? -EPROTO : static_cast<int>(n));
      tail_ += static_cast<size_t>(n);
    }
  }

 private:
  // @return 1 with a whole frame, 0 when more bytes are needed, -EPROTO on a bad length.
  int parse(const uint8_t*& p, size_t& len) {
    if (tail_ - head_ < kLenBytes) return 0;
    uint32_t be;
    std::memcpy(&be, buf_.data() + head_, kLenBytes);
    len = ntohl(be);
    if (len > kMaxSize) return -EPROTO;
    if (tail_ - head_ < kLenBytes + len) return 0;
    p = buf_.data() + head_ + kLenBytes;
    head_ += kLenBytes + len;
    return 1;
  }
  void compact() {
    std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  std::vector<uint8_t> buf_;
  size_t head_ = 0, tail_ = 0;
};

/** Collects frames and sends them in one write when the batch is full or on flush(). */
class FrameWriter {
 public:
  explicit FrameWriter(Conn& c) : conn_(c) { buf_.reserve(kTxBatchBytes + kLenBytes + kMaxSize); }

  /** @return where to write a payload of @p len bytes (its length prefix is already written),
   *          or nullptr if flushing the previous batch failed. */
  uint8_t* append(size_t len, const Deadline& dl) {
    if (buf_.size() + kLenBytes + len > kTxBatchBytes && !buf_.empty() && flush(dl) != 0) return nullptr;
    uint32_t be = htonl(static_cast<uint32_t>(len));
    size_t at = buf_.size();
    buf_.resize(at + kLenBytes + len);
    std::memcpy(buf_.data() + at, &be, kLenBytes);
    return buf_.data() + at + kLenBytes;
  }

  /** @return 0 or the error of Conn::write_all. */
  int flush(const Deadline& dl) {
    int rc = conn_.write_all(buf_.data(), buf_.size(), dl);
    buf_.clear();
    return rc;
  }

 private:
  Conn& conn_;
  std::vector<uint8_t> buf_;
};

// ------------------------------------------------------------------ setting up
int parse_addr(const std::string& ep, sockaddr_in& sa) {
  size_t colon = ep.rfind(':');
  if (colon == std::string::npos) return -EINVAL;
  sa = sockaddr_in{};
  sa.sin_family = AF_INET;
  int port = std::atoi(ep.c_str() + colon + 1);
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, ep.substr(0, colon).c_str(), &sa.sin_addr) != 1) return -EINVAL;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return 0;
}

/** @return a listening socket, or -errno. */
int listen_on(const sockaddr_in& sa) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 1) != 0) {
    int e = errno;
    ::close(fd);
    return -e;
  }
  return fd;
}

/** @return the accepted socket, -ETIMEDOUT, or -errno. */
int accept_one(int lfd, const Deadline& dl) {
  pollfd p{lfd, POLLIN, 0};
  while (!dl.expired()) {
    if (::poll(&p, 1, kWakeMs) <= 0) continue;
    int fd = ::accept(lfd, nullptr, nullptr);
    return fd >= 0 ? fd : -errno;
  }
  return -ETIMEDOUT;
}

/** Connect, retrying while the server is not listening yet. @return the socket or -errno. */
int connect_to(const sockaddr_in& sa, const Deadline& dl) {
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -errno;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) return fd;
    int e = errno;
    ::close(fd);
    if ((e != ECONNREFUSED && e != ENETUNREACH && e != EINTR) || dl.expired()) return -e;
    ::usleep(50'000);
  }
}

// ------------------------------------------------------------------ server
app::Json detail(const char* extra_key = nullptr, uint64_t extra = 0) {
  app::Json d;
  d.num("tx_batch_bytes", uint64_t{kTxBatchBytes}).str("framing", "u32be length + payload");
  if (extra_key) d.num(extra_key, extra);
  return d;
}

/** Receive (stream) or echo (pingpong) until the end-of-stream message; @return the tally. */
Report serve(Conn& c, const Options& opt, const Deadline& dl) {
  FrameReader rd;
  FrameWriter wr(c);
  RxTally tally(opt.size);
  const uint8_t* p;
  size_t len;
  int rc;
  while ((rc = rd.next(c, dl, p, len)) == 1) {
    if (tally.on_message(p, len)) break;
    if (opt.mode == Mode::kPingpong) {
      uint8_t* out = wr.append(len, dl);
      if (!out) break;
      std::memcpy(out, p, len);
      if (wr.flush(dl) != 0) break;
    }
  }
  if (rc < 0 && rc != -ETIMEDOUT) std::fprintf(stderr, "tcp_perf: read: %s\n", std::strerror(-rc));
  Report r = tally.report();
  r.timed_out = rc == -ETIMEDOUT;
  return r;
}

int run_server(const Options& opt, const sockaddr_in& sa) {
  Deadline dl(opt.duration_s > 0 ? opt.duration_s + kServerGraceS : 0);
  int lfd = listen_on(sa);
  if (lfd < 0) return std::fprintf(stderr, "tcp_perf: listen on %s: %s\n", opt.endpoint.c_str(), std::strerror(-lfd)), 1;
  std::printf("READY tcp %s %s\n", mode_name(opt.mode), opt.endpoint.c_str());
  std::fflush(stdout);
  int fd = accept_one(lfd, dl);
  ::close(lfd);
  Report r;
  if (fd < 0) {
    r.timed_out = fd == -ETIMEDOUT;
    std::fprintf(stderr, "tcp_perf: no client: %s\n", r.timed_out ? "time limit or signal" : std::strerror(-fd));
  } else {
    Conn c(fd, opt.busy_poll);
    r = serve(c, opt, dl);
    c.finish(dl);
  }
  print_result("tcp", opt, r, detail());
  return fd < 0 && !r.timed_out ? 1 : 0;  // like zmq_perf: a time limit is in RESULT, not an error
}

// ------------------------------------------------------------------ client
/** Stream: write the messages in batches, then the end-of-stream message. */
Report send_stream(Conn& c, const Options& opt, const Deadline& stop_at, const Deadline& io) {
  FrameWriter wr(c);
  Report r = send_loop(opt, stop_at, [&](uint64_t seq) {
    uint8_t* p = wr.append(opt.size, io);
    if (!p) return false;
    fill_message(p, opt.size, seq);
    return true;
  });
  uint8_t* eos = wr.append(kEosSize, io);
  if (eos) fill_eos(eos, r.msgs_sent);
  if (!eos || wr.flush(io) != 0) std::fprintf(stderr, "tcp_perf: send failed or timed out\n");
  return r;
}

/** One round trip of message @p seq. @return 1: the echo came back intact with @p seq;
 *  0: an echo came but fails that check; < 0: no echo (error, end of stream, time limit). */
int round_trip(Conn& c, FrameReader& rd, FrameWriter& wr, const Options& opt, uint64_t seq, const Deadline& io) {
  uint8_t* out = wr.append(opt.size, io);
  if (!out) return -EIO;
  fill_message(out, opt.size, seq);
  if (int rc = wr.flush(io); rc != 0) return rc;
  const uint8_t* p;
  size_t len;
  if (int rc = rd.next(c, io, p, len); rc != 1) return rc < 0 ? rc : -EPIPE;
  Checked k = check_message(p, len, opt.size);
  return k.kind == Kind::kData && k.value == seq;
}

/** Pingpong: one message in flight; every echo is checked and its round trip recorded. */
Report ping(Conn& c, const Options& opt, const Deadline& stop_at, const Deadline& io, app::Histogram& h) {
  FrameReader rd;
  FrameWriter wr(c);
  Report r = ping_loop(opt, stop_at, h, [&](uint64_t seq) { return round_trip(c, rd, wr, opt, seq, io); });
  // The end-of-stream message lets the server stop at once; it does not answer it.
  if (uint8_t* eos = wr.append(kEosSize, io)) {
    fill_eos(eos, r.msgs_sent);
    wr.flush(io);
  }
  return r;
}

int run_client(const Options& opt, const sockaddr_in& sa) {
  Deadline stop_at(opt.duration_s);
  Deadline io(opt.duration_s > 0 ? opt.duration_s + kServerGraceS : 0);
  int fd = connect_to(sa, io);
  if (fd < 0) return std::fprintf(stderr, "tcp_perf: connect to %s: %s\n", opt.endpoint.c_str(), std::strerror(-fd)), 1;
  Conn c(fd, opt.busy_poll);
  app::Histogram h;
  Report r;
  if (opt.mode == Mode::kStream) {
    r = send_stream(c, opt, stop_at, io);
  } else {
    r = ping(c, opt, stop_at, io, h);
  }
  c.finish(io);
  // A stream client cannot know what arrived: it reports its send rate; the server counts.
  double send_rate = r.duration_s > 0 ? static_cast<double>(r.msgs_sent) / r.duration_s : 0;
  print_result("tcp", opt, r, detail("send_msgs_per_s", static_cast<uint64_t>(send_rate)));
  return 0;
}

}  // namespace
}  // namespace imago::peers

int main(int argc, char** argv) {
  using namespace imago::peers;
  Options opt;
  int rc = parse_options(argc, argv, kInfo, opt);
  if (rc != 0) return rc > 0 ? 0 : 2;
  sockaddr_in sa;
  if (parse_addr(opt.endpoint, sa) != 0) {
    std::fprintf(stderr, "tcp_perf: '%s' is not IPV4:PORT\n", opt.endpoint.c_str());
    return 2;
  }
  install_stop_handlers();
  return opt.role == Role::kServer ? run_server(opt, sa) : run_client(opt, sa);
}
