/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What the peer programs (tcp_perf, zmq_perf) share: the option table, the message format
 * and its check, the receiver's tally, deadlines and stop flag, and the RESULT line.
 *
 * The peers are the baselines imago is compared against (issue 5), so they do what a careful
 * application on that transport would do and no more: every message carries a sequence number
 * and a CRC32C, the receiver verifies each one, and both sides print the same RESULT keys as
 * imago-perf (DESIGN.md "Machine-readable results").
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/common/json.h"
#include "apps/common/histogram.h"

namespace imago::peers {

// ------------------------------------------------------------------ options
enum class Role { kServer, kClient };
enum class Mode { kStream, kPingpong };

/** Smallest message: it must hold the header. */
constexpr size_t kMinSize = 16;
/** Largest message of the comparison (issue 5: 16 B .. 64 KiB). */
constexpr size_t kMaxSize = 64 * 1024;

struct Options {
  Role role = Role::kServer;
  Mode mode = Mode::kStream;
  std::string endpoint;  ///< --bind (server) or --connect (client)
  bool bind = false;     ///< --bind was given
  bool connect = false;  ///< --connect was given
  uint64_t msgs = 100000;
  size_t size = 64;
  double duration_s = 30;  ///< client: stop sending; server: give up (see --help)
  bool busy_poll = false;
};

/** How a program describes itself in --help. */
struct ProgramInfo {
  const char* name;      ///< "tcp_perf"
  const char* summary;   ///< one paragraph, newline-terminated
  const char* endpoint;  ///< "ADDR:PORT" or "ENDPOINT"
  const char* example;   ///< one example command line, without the program name
};

/**
 * Parse the command line shared by the peers.
 *
 * @return 0 to run; 1 when --help was printed (exit 0); -EINVAL after printing the error.
 */
int parse_options(int argc, char** argv, const ProgramInfo& info, Options& opt);

// ------------------------------------------------------------------ time and stopping
/** @return CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns();

/** Make SIGINT/SIGTERM set the stop flag instead of killing, so RESULT is still printed. */
void install_stop_handlers();
/** @return true once SIGINT or SIGTERM arrived. */
bool stop_requested();

/** A point in time after which a loop gives up; 0 s means never. */
class Deadline {
 public:
  explicit Deadline(double seconds_from_now);
  /** @return true when the limit passed or a stop was requested. */
  bool expired() const { return stop_requested() || (at_ns_ != 0 && now_ns() >= at_ns_); }

 private:
  uint64_t at_ns_;
};

/**
 * The server's own limit: the client's --duration plus this much for the client to start,
 * connect and drain, so a server never outlives a dead client by much.
 */
constexpr double kServerGraceS = 30;

// ------------------------------------------------------------------ messages
/** Magic of a data message and of the end-of-stream message. */
constexpr uint32_t kMagicData = 0x494d5044;  // "IMPD"
constexpr uint32_t kMagicEos = 0x494d5045;   // "IMPE"

/**
 * The first 16 bytes of every message, big-endian on the wire. The CRC32C covers everything
 * after itself (seq and payload), so any flipped bit past the magic is caught.
 */
struct MsgHeader {
  uint32_t magic_be;
  uint32_t crc_be;
  uint64_t seq_be;  ///< data: sequence number from 0; end of stream: messages sent
} __attribute__((packed));
static_assert(sizeof(MsgHeader) == kMinSize);
static_assert(offsetof(MsgHeader, crc_be) == 4 && offsetof(MsgHeader, seq_be) == 8);

/** Bytes of the end-of-stream message. */
constexpr size_t kEosSize = sizeof(MsgHeader);

/**
 * Write data message @p seq of @p size bytes into @p buf: header, then a fixed pattern.
 * The pattern is written in full each time, so a sender pays for touching every byte as an
 * application that produces its payload would.
 */
void fill_message(uint8_t* buf, size_t size, uint64_t seq);
/** Write the end-of-stream message (kEosSize bytes) announcing @p msgs_sent. */
void fill_eos(uint8_t* buf, uint64_t msgs_sent);

enum class Kind { kData, kEos, kCorrupt };
struct Checked {
  Kind kind;
  uint64_t value;  ///< kData: seq; kEos: messages sent
};
/** Check one received message against the size every data message must have. */
Checked check_message(const uint8_t* buf, size_t len, size_t size);

// ------------------------------------------------------------------ counting
/** What a run measured; the RESULT line is made from it. */
struct Report {
  uint64_t msgs_sent = 0;
  uint64_t msgs_delivered = 0;
  uint64_t bytes_delivered = 0;
  double duration_s = 0;
  uint64_t lost = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t corrupted = 0;
  bool sender_reported = false;  ///< msgs_sent came from the sender's end-of-stream message
  bool timed_out = false;        ///< stopped on the time limit or a signal, not on its own
  const app::Histogram* rtt_ns = nullptr;  ///< round trips, when measured
};

/**
 * The receiver's tally: unique, duplicated, out-of-order and corrupted messages, and the
 * time from the first to the last message. Sequence numbers are 64-bit and never wrap.
 */
class RxTally {
 public:
  explicit RxTally(size_t size) : size_(size) {}
  /** Count one received message; @return true if it was the end-of-stream message. */
  bool on_message(const uint8_t* buf, size_t len);
  /** @return the counts; msgs_sent is the sender's word if it came, else what arrived. */
  Report report() const;

 private:
  bool seen(uint64_t seq);  // marks it, @return whether it was marked before
  size_t size_;
  std::vector<uint64_t> bitmap_;
  uint64_t next_ = 0;  // one past the highest sequence number seen
  uint64_t first_ns_ = 0, last_ns_ = 0;
  Report r_;
};

// ------------------------------------------------------------------ client loops
/** Say on stderr that round trip @p seq got no echo (error @p neg_errno). */
void report_no_echo(uint64_t seq, int neg_errno);

/**
 * The stream client's loop: @p send(seq) queues data message seq and returns false on a
 * failure. Stops after opt.msgs messages, at @p stop_at (timed_out), or on a failure.
 * @return msgs_sent and the time taken; the caller sends the end-of-stream message.
 */
template <typename Send>
Report send_loop(const Options& opt, const Deadline& stop_at, Send&& send) {
  Report r;
  uint64_t t0 = now_ns();
  for (; r.msgs_sent < opt.msgs && !(r.timed_out = stop_at.expired()); ++r.msgs_sent) {
    if (!send(r.msgs_sent)) break;
  }
  r.duration_s = static_cast<double>(now_ns() - t0) / 1e9;
  return r;
}

/**
 * The pingpong client's loop: @p round_trip(seq) sends message seq and waits for its echo,
 * returning 1 (echo intact, same seq), 0 (an echo that fails the check) or a negative errno
 * (no echo: the loop stops and counts that message lost). Every answered round trip goes into
 * @p h in nanoseconds. @return the counts; the caller sends the end-of-stream message.
 */
template <typename RoundTrip>
Report ping_loop(const Options& opt, const Deadline& stop_at, app::Histogram& h, RoundTrip&& round_trip) {
  Report r;
  uint64_t t0 = now_ns();
  for (; r.msgs_sent < opt.msgs && !(r.timed_out = stop_at.expired()); ++r.msgs_sent) {
    uint64_t t = now_ns();
    int rt = round_trip(r.msgs_sent);
    if (rt < 0) {
      report_no_echo(r.msgs_sent, rt);
      ++r.msgs_sent;  // sent (or tried), never answered: lost
      break;
    }
    h.record(now_ns() - t);
    r.msgs_delivered += rt == 1;
    r.bytes_delivered += rt == 1 ? opt.size : 0;
    r.corrupted += rt == 0;
  }
  r.duration_s = static_cast<double>(now_ns() - t0) / 1e9;
  r.lost = r.msgs_sent - r.msgs_delivered - r.corrupted;
  r.rtt_ns = &h;
  return r;
}

/**
 * Print a plain-words line, then `RESULT {json}` as the very last line, and flush.
 * @p detail holds what only this peer knows (socket options, batching); it goes under "detail".
 */
void print_result(const char* peer, const Options& opt, const Report& r, const app::Json& detail);

/** @return the name of a mode / role / wait style as RESULT spells it. */
const char* mode_name(Mode m);
const char* role_name(Role r);

}  // namespace imago::peers
