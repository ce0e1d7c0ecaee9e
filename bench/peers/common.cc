// SPDX-License-Identifier: BSD-3-Clause
#include "common.h"

#include <arpa/inet.h>
#include <endian.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "dataplane/option_table.h"
#include "reliability/crc32c.h"

namespace imago::peers {

// ------------------------------------------------------------------ options
namespace {

using Opt = dp::OptionRow<Options>;

const dp::OptionTable<Options>& table() {
  static const dp::OptionTable<Options> t = {
      {"role", "server|client", "server receives (stream) or echoes (pingpong); client sends",
       [](Options& o, const std::string& v) {
         if (v != "server" && v != "client") return false;
         o.role = v == "server" ? Role::kServer : Role::kClient;
         return true;
       },
       [](const Options& o) { return std::string(role_name(o.role)); }},
      {"bind", "EP", "server: where to listen", [](Options& o, const std::string& v) {
         return !v.empty() && (o.endpoint = v, o.bind = true);
       },
       [](const Options&) { return std::string("-"); }},
      {"connect", "EP", "client: where the server listens", [](Options& o, const std::string& v) {
         return !v.empty() && (o.endpoint = v, o.connect = true);
       },
       [](const Options&) { return std::string("-"); }},
      {"mode", "stream|pingpong", "one-way throughput, or one message in flight and round trips",
       [](Options& o, const std::string& v) {
         if (v != "stream" && v != "pingpong") return false;
         o.mode = v == "stream" ? Mode::kStream : Mode::kPingpong;
         return true;
       },
       [](const Options& o) { return std::string(mode_name(o.mode)); }},
      {"msgs", "N", "client: messages (stream) or round trips (pingpong) to run",
       [](Options& o, const std::string& v) { return dp::parse_num<uint64_t>(v, o.msgs, 1, uint64_t{1} << 40); },
       [](const Options& o) { return std::to_string(o.msgs); }},
      {"size", "BYTES", "message size, 16 .. 65536; the server must be given the same",
       [](Options& o, const std::string& v) { return dp::parse_num<size_t>(v, o.size, kMinSize, kMaxSize); },
       [](const Options& o) { return std::to_string(o.size); }},
      {"duration", "S", "client: stop sending after S s; server: give up S + 30 s after start (0: never)",
       [](Options& o, const std::string& v) { return dp::parse_num(v, o.duration_s, 0.0, 1e7); },
       [](const Options& o) { return dp::format_num(o.duration_s); }},
      {"busy-poll", nullptr, "non-blocking calls spun on (RESULT wait=spin) instead of blocking (sleep)",
       [](Options& o, const std::string&) { return o.busy_poll = true, true; },
       [](const Options&) { return std::string("off"); }},
  };
  return t;
}

void print_usage(const ProgramInfo& info) {
  std::printf("Usage: %s --role server|client --bind|--connect %s [options]\n\n%s\nOptions (default in brackets):\n",
              info.name, info.endpoint, info.summary);
  dp::print_option_table(stdout, table(), Options{});
  std::printf(
      "\nEvery message carries a sequence number and a CRC32C; the receiver checks each one.\n"
      "The server prints READY once it listens. The last line of output is RESULT {json}:\n"
      "msgs_sent, msgs_delivered, bytes_delivered, duration_s, msgs_per_s, gbps, lost, duplicated,\n"
      "reordered, corrupted, retransmits, acks_sent, nacks_sent (0: not exposed by the peer),\n"
      "and for pingpong clients rtt_us {p50,p90,p99,p999,max,min,mean}. In stream mode the\n"
      "server's RESULT is the one that counts; in pingpong mode the client's.\n\n"
      "Example:\n  %s --role server %s\n",
      info.name, info.example);
}

// @return 0, 1 for --help, or -EINVAL with @p err set.
int parse_args(int argc, char** argv, Options& opt, std::string& err) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (int rc = dp::parse_option_table(table(), args, opt, &err); rc != 0) return rc;
  if (opt.bind == opt.connect || opt.bind != (opt.role == Role::kServer)) {
    return err = "give --role server with --bind, or --role client with --connect", -EINVAL;
  }
  return 0;
}

}  // namespace

int parse_options(int argc, char** argv, const ProgramInfo& info, Options& opt) {
  std::string err;
  int rc = parse_args(argc, argv, opt, err);
  if (rc == 1) print_usage(info);
  if (rc < 0) std::fprintf(stderr, "%s: %s\n", info.name, err.c_str());
  return rc;
}

const char* mode_name(Mode m) { return m == Mode::kStream ? "stream" : "pingpong"; }
const char* role_name(Role r) { return r == Role::kServer ? "server" : "client"; }

// ------------------------------------------------------------------ time and stopping
namespace {
// Written by the signal handler, read by the loops; relaxed: it only has to show up soon.
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true, std::memory_order_relaxed); }
}  // namespace

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a blocked recv() returns EINTR and the loop sees the flag.
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a vanished peer is an error code, not a death
}

bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }

Deadline::Deadline(double s) : at_ns_(s > 0 ? now_ns() + static_cast<uint64_t>(s * 1e9) : 0) {}

// ------------------------------------------------------------------ messages
namespace {
uint32_t body_crc(const uint8_t* buf, size_t size) {
  return crc32c(0, buf + offsetof(MsgHeader, seq_be), size - offsetof(MsgHeader, seq_be));
}

// The payload pattern, made once: copying it costs what producing a payload in cache costs.
const uint8_t* pattern() {
  static const std::vector<uint8_t> p = [] {
    std::vector<uint8_t> v(kMaxSize);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 7 + 1);
    return v;
  }();
  return p.data();
}

}  // namespace

void fill_message(uint8_t* buf, size_t size, uint64_t seq) {
  std::memcpy(buf + sizeof(MsgHeader), pattern() + sizeof(MsgHeader), size - sizeof(MsgHeader));
  MsgHeader h{htonl(kMagicData), 0, htobe64(seq)};
  std::memcpy(buf, &h, sizeof h);
  uint32_t crc = htonl(body_crc(buf, size));
  std::memcpy(buf + offsetof(MsgHeader, crc_be), &crc, sizeof crc);
}

void fill_eos(uint8_t* buf, uint64_t msgs_sent) {
  MsgHeader h{htonl(kMagicEos), 0, htobe64(msgs_sent)};
  std::memcpy(buf, &h, sizeof h);
  uint32_t crc = htonl(body_crc(buf, kEosSize));
  std::memcpy(buf + offsetof(MsgHeader, crc_be), &crc, sizeof crc);
}

Checked check_message(const uint8_t* buf, size_t len, size_t size) {
  if (len < sizeof(MsgHeader)) return {Kind::kCorrupt, 0};
  MsgHeader h;
  std::memcpy(&h, buf, sizeof h);
  uint32_t magic = ntohl(h.magic_be);
  bool shape_ok = (magic == kMagicData && len == size) || (magic == kMagicEos && len == kEosSize);
  if (!shape_ok || ntohl(h.crc_be) != body_crc(buf, len)) return {Kind::kCorrupt, 0};
  return {magic == kMagicData ? Kind::kData : Kind::kEos, be64toh(h.seq_be)};
}

// ------------------------------------------------------------------ counting
bool RxTally::seen(uint64_t seq) {
  size_t word = seq / 64;
  if (word >= bitmap_.size()) bitmap_.resize(std::max(word + 1, bitmap_.size() * 2));
  uint64_t bit = uint64_t{1} << (seq % 64);
  bool was = bitmap_[word] & bit;
  bitmap_[word] |= bit;
  return was;
}

bool RxTally::on_message(const uint8_t* buf, size_t len) {
  Checked c = check_message(buf, len, size_);
  if (c.kind == Kind::kEos) {
    r_.msgs_sent = c.value;
    r_.sender_reported = true;
    return true;
  }
  last_ns_ = now_ns();
  if (first_ns_ == 0) first_ns_ = last_ns_;
  if (c.kind == Kind::kCorrupt) {
    ++r_.corrupted;
  } else if (seen(c.value)) {
    ++r_.duplicated;
  } else {
    ++r_.msgs_delivered;
    r_.bytes_delivered += len;
    if (c.value < next_) ++r_.reordered;  // a later one came before it
    next_ = std::max(next_, c.value + 1);
  }
  return false;
}

Report RxTally::report() const {
  Report r = r_;
  if (!r.sender_reported) r.msgs_sent = std::max(next_, r.msgs_delivered);
  r.lost = r.msgs_sent > r.msgs_delivered ? r.msgs_sent - r.msgs_delivered : 0;
  r.duration_s = static_cast<double>(last_ns_ - first_ns_) / 1e9;
  return r;
}

void report_no_echo(uint64_t seq, int neg_errno) {
  std::fprintf(stderr, "round trip %llu got no echo: %s\n", static_cast<unsigned long long>(seq),
               std::strerror(-neg_errno));
}

// ------------------------------------------------------------------ RESULT
namespace {
app::Json rtt_json(const app::Histogram& h) {
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  app::Json j;
  j.num("p50", us(h.percentile(50))).num("p90", us(h.percentile(90))).num("p99", us(h.percentile(99)));
  j.num("p999", us(h.percentile(99.9))).num("max", us(h.max())).num("min", us(h.min()));
  return j.num("mean", h.mean() / 1e3).num("count", h.count());
}
}  // namespace

void print_result(const char* peer, const Options& opt, const Report& r, const app::Json& detail) {
  double secs = r.duration_s > 0 ? r.duration_s : 0;
  double mps = secs > 0 ? static_cast<double>(r.msgs_delivered) / secs : 0;
  double gbps = secs > 0 ? static_cast<double>(r.bytes_delivered) * 8 / secs / 1e9 : 0;
  app::Json j;
  j.str("peer", peer).str("mode", mode_name(opt.mode)).str("role", role_name(opt.role)).num("size", uint64_t{opt.size});
  j.str("wait", opt.busy_poll ? "spin" : "sleep").str("endpoint", opt.endpoint);
  j.num("msgs_sent", r.msgs_sent).num("msgs_delivered", r.msgs_delivered).num("bytes_delivered", r.bytes_delivered);
  j.num("duration_s", secs).num("msgs_per_s", mps).num("gbps", gbps).num("lost", r.lost);
  j.num("duplicated", r.duplicated).num("reordered", r.reordered).num("corrupted", r.corrupted);
  // Kernel TCP and ZeroMQ do their retransmits and acks out of the application's sight.
  j.num("retransmits", uint64_t{0}).num("acks_sent", uint64_t{0}).num("nacks_sent", uint64_t{0});
  j.boolean("sender_reported", r.sender_reported).boolean("timed_out", r.timed_out);
  if (r.rtt_ns) j.obj("rtt_us", rtt_json(*r.rtt_ns));
  j.obj("detail", detail);
  std::printf("%s %s %s: %llu sent, %llu delivered, %llu lost, %llu corrupted in %.3f s: %.0f msg/s, %.3f Gbit/s\n",
              peer, mode_name(opt.mode), role_name(opt.role), static_cast<unsigned long long>(r.msgs_sent),
              static_cast<unsigned long long>(r.msgs_delivered), static_cast<unsigned long long>(r.lost),
              static_cast<unsigned long long>(r.corrupted), secs, mps, gbps);
  std::printf("RESULT %s\n", j.text().c_str());
  std::fflush(stdout);
}

}  // namespace imago::peers
