// SPDX-License-Identifier: BSD-3-Clause
// norm_perf: the NORM peer of the reliable-multicast comparison. One sender, N receivers, one
// IPv4 multicast group, through libnorm's C API (normApi.h). See --help.
//
// Why a NORM stream and not one NORM data object per message: a stream packs messages back to
// back into full segments (NormStreamMarkEom keeps their boundaries), so a 64-byte message costs
// a share of a packet, not a packet, an object id and its per-object state (at 16 KiB the gap
// should be small; data objects were not measured). It is what NORM's own high-rate tool,
// normStreamer, does.
//
// Reliability as a careful NORM application gets it: the receivers are the sender's acking
// nodes (NormAddAckingNode) and the sender never has more than a window of the stream that
// the last watermark (NormSetWatermark) does not cover, so it never overwrites data a receiver
// may still ask to have repaired (ACK-based flow control, as normStreamer does it). The run
// ends when the final watermark, set after the last message, is acknowledged by every receiver.
//
// Rate: NORM paces at a fixed rate (--rate) or by its congestion control (--rate 0). Neither
// wins everywhere: on a 2-core machine a fixed rate the receivers cannot absorb overflows
// their socket buffers (every drop is repaired, slowly), and the congestion control is lossless
// but ramps up slowly on short runs. bench/compare --multicast runs both for each row and keeps
// the fastest run without drops (compare_lib/multicast.py). Segments should fill the MTU: on a
// 9000-byte MTU, 8900-byte segments mean a sixth of the packets of 1400-byte ones (measured
// here, one receiver, 64 B: about 170 ns of sender CPU per message against 450).
#include <normApi.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "dataplane/option_table.h"

namespace imago::peers {
namespace {

constexpr const char* kName = "norm_perf";
// Waits wake up this often so every loop sees its deadline and SIGTERM.
constexpr int kWakeMs = 100;
// Bytes written to the stream between two looks at NORM's events (the instance is suspended
// meanwhile, so NORM's thread is not woken once per small message).
constexpr size_t kWriteBatchBytes = 256 * 1024;
// A receiver that has everything stays this long (at most) for the sender's last ACK request
// and the close of its stream, so the sender's final watermark completes.
constexpr double kLingerS = 5.0;
// The sender's last word to its receivers (a NORM command): done, stop waiting.
constexpr char kDoneCmd[] = "norm_perf done";
// A receiver reads the stream in pieces of up to this many bytes (plus a partial message).
constexpr size_t kReadBytes = 256 * 1024;
// Reads of the stream in a row before the receiver looks at its deadline and events again.
constexpr int kReadsPerTurn = 64;

// ------------------------------------------------------------------ options
enum class NormRole { kSender, kReceiver };

struct NormOptions {
  NormRole role = NormRole::kSender;
  bool role_given = false;
  std::string group = "239.255.60.1:6060";
  std::string iface;       ///< empty: the kernel's choice
  uint32_t node_id = 0;    ///< 0: 1 for the sender, 2 for a receiver
  uint32_t receivers = 1;  ///< sender: acking nodes first_receiver_id .. + receivers - 1
  uint32_t first_receiver_id = 2;
  uint64_t msgs = 100000;
  size_t size = 64;
  double duration_s = 30;
  double rate_mbps = 0;  ///< 0: NORM's congestion control; else a fixed rate
  uint32_t buffer = 16u << 20;
  uint16_t segment = 1400;
  uint16_t block = 64;
  uint32_t socket_buffer = 4u << 20;
  unsigned debug = 1;

  NormNodeId local_id() const { return node_id ? node_id : (role == NormRole::kSender ? 1 : 2); }
};

const char* role_text(NormRole r) { return r == NormRole::kSender ? "sender" : "receiver"; }

bool parse_group(const std::string& v, sockaddr_in& sa) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos) return false;
  uint16_t port = 0;
  sa = sockaddr_in{};
  if (!dp::parse_num<uint16_t>(v.substr(colon + 1), port, 1, 65535)) return false;
  if (inet_pton(AF_INET, v.substr(0, colon).c_str(), &sa.sin_addr) != 1) return false;
  sa.sin_port = htons(port);
  return IN_MULTICAST(ntohl(sa.sin_addr.s_addr));
}

const dp::OptionTable<NormOptions>& table() {
  static const dp::OptionTable<NormOptions> t = {
      {"role", "sender|receiver", "send the stream, or receive, check and acknowledge it",
       [](NormOptions& o, const std::string& v) {
         if (v != "sender" && v != "receiver") return false;
         o.role = v == "sender" ? NormRole::kSender : NormRole::kReceiver;
         return o.role_given = true;
       },
       [](const NormOptions&) { return std::string("-"); }},
      {"group", "ADDR:PORT", "the session: an IPv4 multicast group and UDP port, the same on every side",
       [](NormOptions& o, const std::string& v) {
         sockaddr_in sa;
         return parse_group(v, sa) && (o.group = v, true);
       },
       [](const NormOptions& o) { return o.group; }},
      {"iface", "NAME", "the interface to send and join on (NormSetMulticastInterface)",
       [](NormOptions& o, const std::string& v) { return !v.empty() && v.size() < 16 && (o.iface = v, true); },
       [](const NormOptions&) { return std::string("the kernel's route"); }},
      {"node-id", "ID", "this node's NORM id, unique in the session (receivers: see --first-receiver-id)",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<uint32_t>(v, o.node_id, 1, 0xfffffffeu); },
       [](const NormOptions&) { return std::string("1 sender, 2 receiver"); }},
      {"receivers", "N", "sender: the receivers that must acknowledge everything, 1 .. 1000",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<uint32_t>(v, o.receivers, 1, 1000); },
       [](const NormOptions& o) { return std::to_string(o.receivers); }},
      {"first-receiver-id", "ID", "sender: the receivers' node ids are ID .. ID + N - 1",
       [](NormOptions& o, const std::string& v) {
         return dp::parse_num<uint32_t>(v, o.first_receiver_id, 1, 0xfffffffeu - 1000);
       },
       [](const NormOptions& o) { return std::to_string(o.first_receiver_id); }},
      {"msgs", "N", "messages to send (sender) or to expect (receiver)",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<uint64_t>(v, o.msgs, 1, uint64_t{1} << 40); },
       [](const NormOptions& o) { return std::to_string(o.msgs); }},
      {"size", "BYTES", "message size, 16 .. 65536, the same on every side",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<size_t>(v, o.size, kMinSize, kMaxSize); },
       [](const NormOptions& o) { return std::to_string(o.size); }},
      {"duration", "S", "give up after S s, whatever is left (sender: sending and the final ACK)",
       [](NormOptions& o, const std::string& v) { return dp::parse_num(v, o.duration_s, 0.001, 1e6); },
       [](const NormOptions& o) { return dp::format_num(o.duration_s); }},
      {"rate", "MBIT", "sender: a fixed rate in Mbit/s (NormSetTxRate); 0: NORM's congestion control",
       [](NormOptions& o, const std::string& v) { return dp::parse_num(v, o.rate_mbps, 0.0, 1e6); },
       [](const NormOptions& o) { return o.rate_mbps > 0 ? dp::format_num(o.rate_mbps) : std::string("0"); }},
      {"buffer", "BYTES", "NormStartSender's buffer and the stream's; NormStartReceiver's (the same on every side)",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<uint32_t>(v, o.buffer, 1u << 16, 1u << 30); },
       [](const NormOptions& o) { return std::to_string(o.buffer); }},
      {"segment", "BYTES", "NORM segment (payload per packet), 64 .. 8900; fit the MTU (the same on every side)",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<uint16_t>(v, o.segment, 64, 8900); },
       [](const NormOptions& o) { return std::to_string(o.segment); }},
      {"block", "N", "segments per FEC block, 1 .. 255, no parity sent (the same on every side)",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<uint16_t>(v, o.block, 1, 255); },
       [](const NormOptions& o) { return std::to_string(o.block); }},
      {"socket-buffer", "BYTES", "UDP socket buffer asked for (the kernel caps it at [rw]mem_max)",
       [](NormOptions& o, const std::string& v) {
         return dp::parse_num<uint32_t>(v, o.socket_buffer, 1u << 16, 1u << 30);
       },
       [](const NormOptions& o) { return std::to_string(o.socket_buffer); }},
      {"debug", "LEVEL", "libnorm's debug level (NormSetDebugLevel), 0 .. 12",
       [](NormOptions& o, const std::string& v) { return dp::parse_num<unsigned>(v, o.debug, 0, 12); },
       [](const NormOptions& o) { return std::to_string(o.debug); }},
  };
  return t;
}

void print_usage() {
  std::printf(
      "Usage: %s --role sender|receiver --group ADDR:PORT --iface NAME [options]\n\n"
      "NORM (libnorm) reliable multicast: one sender, N receivers. The sender writes --msgs\n"
      "messages of --size bytes into one NORM stream (message boundaries: NormStreamMarkEom),\n"
      "with the receivers as acking nodes and ACK-based flow control by watermarks; it finishes\n"
      "when its final watermark is acknowledged by all --receivers. Each receiver checks every\n"
      "message (sequence number, CRC32C over the payload pattern); it stops when the sender says\n"
      "it is done (a NORM command, sent after the final acknowledgement), 5 s after it has\n"
      "everything (the sender's end-of-stream message or --msgs messages), or after --duration.\n\n"
      "Options (default in brackets):\n",
      kName);
  dp::print_option_table(stdout, table(), NormOptions{});
  std::printf(
      "\nA receiver prints READY once it listens; start the receivers first. The last line of\n"
      "output is RESULT {json}. The sender's: peer, role, size, msgs, msgs_sent, receivers,\n"
      "acked (every receiver acknowledged the final watermark), seconds (first write to that\n"
      "acknowledgement), msgs_per_s and mib_per_s (goodput per receiver; only when acked),\n"
      "sender_cpu_ns_per_msg (user + system time of the process over the run, NORM's thread\n"
      "included), watermarks, watermark_retries, timed_out, detail. A receiver's: msgs_delivered,\n"
      "bytes_delivered, duration_s (first to last message), msgs_per_s, mib_per_s, lost,\n"
      "duplicated, reordered, corrupted, stream_breaks, cpu_ns_per_msg. libnorm's API does not\n"
      "expose repair counts, so there are none.\n\n"
      "Example (receivers first, node ids 2 and 3):\n"
      "  %s --role receiver --node-id 2 --group 239.255.60.1:6060 --iface eth0 --msgs 200000\n"
      "  %s --role sender --receivers 2 --group 239.255.60.1:6060 --iface eth0 --msgs 200000\n",
      kName, kName);
}

/** @return 0 to run, 1 after --help, -EINVAL after printing the error. */
int parse(int argc, char** argv, NormOptions& o) {
  std::string err;
  int rc = dp::parse_option_table(table(), std::vector<std::string>(argv + 1, argv + argc), o, &err);
  if (rc == 1) return print_usage(), 1;
  if (rc == 0 && !o.role_given) err = "give --role sender or --role receiver", rc = -EINVAL;
  if (rc == 0 && o.size > o.buffer / 4) {
    err = "--buffer must hold at least four messages", rc = -EINVAL;
  }
  if (rc < 0) std::fprintf(stderr, "%s: %s\n", kName, err.c_str());
  return rc;
}

// ------------------------------------------------------------------ shared
uint64_t cpu_ns() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) { return uint64_t(tv.tv_sec) * 1'000'000'000u + uint64_t(tv.tv_usec) * 1000u; };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

/** Hand every pending NORM event to @p on, after waiting up to @p wait_ms for the first. */
template <typename On>
void pump_events(NormInstanceHandle inst, int wait_ms, On&& on) {
  if (wait_ms > 0) {
    pollfd p{NormGetDescriptor(inst), POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return;
  }
  NormEvent ev;
  for (int i = 0; i < 4096 && NormGetNextEvent(inst, &ev, false); ++i) on(ev);
}

/** The instance and its session; destroyed in the right order whatever happens. */
class Session {
 public:
  explicit Session(const NormOptions& o) : inst_(NormCreateInstance(false)) {
    NormSetDebugLevel(o.debug);
    if (inst_ == NORM_INSTANCE_INVALID) return;
    sockaddr_in sa;
    parse_group(o.group, sa);
    char addr[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
    s_ = NormCreateSession(inst_, addr, ntohs(sa.sin_port), o.local_id());
  }
  ~Session() {
    if (s_ != NORM_SESSION_INVALID) NormDestroySession(s_);
    if (inst_ != NORM_INSTANCE_INVALID) NormDestroyInstance(inst_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool ok() const { return s_ != NORM_SESSION_INVALID; }
  NormInstanceHandle inst() const { return inst_; }
  NormSessionHandle s() const { return s_; }

 private:
  NormInstanceHandle inst_;
  NormSessionHandle s_ = NORM_SESSION_INVALID;
};

/** Common set-up of both roles. @return false after saying why. */
bool configure(const Session& ss, const NormOptions& o) {
  if (!ss.ok()) return std::fprintf(stderr, "%s: cannot create the NORM session %s\n", kName, o.group.c_str()), false;
  if (!o.iface.empty() && !NormSetMulticastInterface(ss.s(), o.iface.c_str())) {
    return std::fprintf(stderr, "%s: NormSetMulticastInterface(%s) failed\n", kName, o.iface.c_str()), false;
  }
  NormSetMulticastLoopback(ss.s(), false);
  return true;
}

void print_result_line(const char* words, const app::Json& j) {
  std::printf("%s\nRESULT %s\n", words, j.text().c_str());
  std::fflush(stdout);
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

// ------------------------------------------------------------------ sender
class Sender {
 public:
  Sender(const NormOptions& o, const Session& ss) : o_(o), ss_(ss), msg_(o.size) {}

  int run() {
    if (!start()) return 1;
    Deadline dl(o_.duration_s);
    t0_ = now_ns();
    cpu0_ = cpu_ns();
    while (!done_ && !dl.expired()) {
      pump_events(ss_.inst(), 0, [&](const NormEvent& ev) { on_event(ev); });
      if (can_write()) {
        write_batch();
        continue;
      }
      if (all_written() && !final_set_) set_final_watermark();
      pump_events(ss_.inst(), kWakeMs, [&](const NormEvent& ev) { on_event(ev); });
    }
    uint64_t t1 = done_ ? done_ns_ : now_ns();
    uint64_t cpu = cpu_ns() - cpu0_;
    timed_out_ = !done_;
    close();
    report(static_cast<double>(t1 - t0_) / 1e9, cpu);
    return 0;
  }

 private:
  bool start() {
    NormSessionHandle s = ss_.s();
    if (!configure(ss_, o_)) return false;
    if (o_.rate_mbps > 0) {
      NormSetCongestionControl(s, false);
      NormSetTxRate(s, o_.rate_mbps * 1e6);
    } else {
      NormSetCongestionControl(s, true);
    }
    // The flow control is ours (ACKs of watermarks), not NORM's timer-based one.
    NormSetFlowControl(s, 0.0);
    // A LAN of a few receivers: no NACK back-off (no suppression is needed), GRTT starts at
    // 1 ms and is held under 100 ms so a scheduling hiccup cannot stretch every timer.
    NormSetBackoffFactor(s, 0.0);
    NormSetGrttEstimate(s, 0.001);
    NormSetGrttMax(s, 0.1);
    NormSetGroupSize(s, o_.receivers);
    for (uint32_t i = 0; i < o_.receivers; ++i) {
      if (!NormAddAckingNode(s, o_.first_receiver_id + i)) {
        return std::fprintf(stderr, "%s: NormAddAckingNode(%u) failed\n", kName, o_.first_receiver_id + i), false;
      }
    }
    if (!NormStartSender(s, NormGetRandomSessionId(), o_.buffer, o_.segment, o_.block, 0)) {
      return std::fprintf(stderr, "%s: NormStartSender failed (buffer %u, segment %u, block %u)\n", kName, o_.buffer,
                          o_.segment, o_.block),
             false;
    }
    NormSetTxSocketBuffer(s, o_.socket_buffer);
    stream_ = NormStreamOpen(s, o_.buffer);
    if (stream_ == NORM_OBJECT_INVALID) return std::fprintf(stderr, "%s: NormStreamOpen failed\n", kName), false;
    NormStreamSetAutoFlush(stream_, NORM_FLUSH_NONE);  // full segments; the watermark flushes the tail
    // Half the stream's segments (less a block of margin) may be unacknowledged: the other
    // half is slack for a receiver whose reader lags its NORM thread.
    uint64_t segs = NormGetStreamBufferSegmentCount(o_.buffer, o_.segment, o_.block);
    segs = segs > 2u * o_.block ? segs - o_.block : segs / 2;
    window_ = std::max<uint64_t>(segs / 2 * o_.segment, o_.size + kEosSize);
    step_ = std::max<uint64_t>(window_ / 4, o_.segment);
    return true;
  }

  bool all_written() const { return eos_written_; }
  bool can_write() const { return tx_ready_ && !all_written() && written_ - acked_ < window_; }

  // The message being written: data messages 0 .. msgs-1, then the end-of-stream message.
  size_t cur_len() const { return seq_ < o_.msgs ? o_.size : kEosSize; }

  void write_batch() {
    NormSuspendInstance(ss_.inst());
    size_t batch = 0;
    while (batch < kWriteBatchBytes && can_write()) {
      if (off_ == 0) {
        if (seq_ < o_.msgs) {
          fill_message(msg_.data(), o_.size, seq_);
        } else {
          fill_eos(msg_.data(), o_.msgs);
        }
      }
      size_t len = cur_len();
      uint64_t room = window_ - (written_ - acked_);
      auto want = static_cast<unsigned>(std::min<uint64_t>(len - off_, room));
      unsigned n = NormStreamWrite(stream_, reinterpret_cast<const char*>(msg_.data() + off_), want);
      written_ += n;
      batch += n;
      off_ += n;
      if (off_ == len) {
        NormStreamMarkEom(stream_);
        off_ = 0;
        if (seq_ == o_.msgs) eos_written_ = true;
        else ++seq_;
      }
      if (n < want) tx_ready_ = false;  // the stream is full: wait for NORM_TX_QUEUE_VACANCY
      if (!wm_pending_ && written_ - wm_at_ >= step_) set_watermark(false);
    }
    NormResumeInstance(ss_.inst());
  }

  void set_watermark(bool final) {
    if (final) NormStreamFlush(stream_, true, NORM_FLUSH_PASSIVE);  // the last, short segment too
    NormSetWatermark(ss_.s(), stream_, final);
    wm_pending_ = true;
    wm_at_ = written_;
  }

  void set_final_watermark() {
    final_set_ = true;
    set_watermark(true);
  }

  void on_event(const NormEvent& ev) {
    switch (ev.type) {
      case NORM_TX_QUEUE_VACANCY:
      case NORM_TX_QUEUE_EMPTY:
        tx_ready_ = true;
        break;
      case NORM_TX_WATERMARK_COMPLETED:
        if (NormGetAckingStatus(ss_.s(), NORM_NODE_ANY) == NORM_ACK_SUCCESS) {
          ++watermarks_;
          wm_pending_ = false;
          acked_ = wm_at_;
          if (final_set_ && acked_ == written_) {
            done_ = true;
            done_ns_ = now_ns();
          }
        } else {
          // A receiver did not answer in time: ask again (the data stays held meanwhile).
          ++wm_retries_;
          NormResetWatermark(ss_.s());
        }
        break;
      default:
        break;
    }
  }

  // Close the stream, then tell the receivers the run is over with an application-defined
  // NORM command (they stay until it comes, to answer the final ACK request); wait for it to
  // leave, for a second at most.
  void close() {
    if (stream_ == NORM_OBJECT_INVALID) return;
    NormStreamClose(stream_, true);
    if (NormSendCommand(ss_.s(), kDoneCmd, sizeof kDoneCmd, false)) {
      Deadline grace(1.0);
      bool sent = false;
      while (!sent && !grace.expired()) {
        pump_events(ss_.inst(), kWakeMs, [&](const NormEvent& ev) { sent |= ev.type == NORM_TX_CMD_SENT; });
      }
    }
    NormStopSender(ss_.s());
  }

  void report(double secs, uint64_t cpu) {
    uint64_t sent = std::min(seq_, o_.msgs);
    app::Json d;
    d.str("api", "stream").str("group", o_.group).str("iface", o_.iface);
    d.str("rate_control", o_.rate_mbps > 0 ? "fixed" : "congestion control");
    if (o_.rate_mbps > 0) d.num("rate_mbps", o_.rate_mbps);
    d.num("final_tx_rate_mbps", NormGetTxRate(ss_.s()) / 1e6).num("grtt_ms", NormGetGrttEstimate(ss_.s()) * 1e3);
    d.num("buffer", uint64_t{o_.buffer}).num("segment", uint64_t{o_.segment}).num("block", uint64_t{o_.block});
    d.num("parity", uint64_t{0}).num("window_bytes", window_).num("watermark_step_bytes", step_);
    app::Json j;
    j.str("peer", "norm").str("role", role_text(o_.role)).num("size", uint64_t{o_.size}).num("msgs", o_.msgs);
    j.num("msgs_sent", sent).num("receivers", uint64_t{o_.receivers}).boolean("acked", done_);
    j.num("seconds", secs).num("duration_s", secs);
    if (done_ && secs > 0) {
      // Goodput per receiver: every receiver has every byte once the final watermark is acked.
      double bytes = static_cast<double>(sent) * static_cast<double>(o_.size);
      j.num("msgs_per_s", static_cast<double>(sent) / secs).num("mib_per_s", mib(bytes) / secs);
      j.num("gbps", bytes * 8 / secs / 1e9);
    }
    j.num("sender_cpu_ns_per_msg", sent ? static_cast<double>(cpu) / static_cast<double>(sent) : 0.0);
    j.num("cpu_s", static_cast<double>(cpu) / 1e9);
    j.num("watermarks", watermarks_).num("watermark_retries", wm_retries_).boolean("timed_out", timed_out_);
    j.obj("detail", d);
    char words[256];
    std::snprintf(words, sizeof words, "norm sender: %llu of %llu messages to %u receivers, %s in %.3f s%s",
                  static_cast<unsigned long long>(sent), static_cast<unsigned long long>(o_.msgs), o_.receivers,
                  done_ ? "all acknowledged" : "NOT all acknowledged", secs, timed_out_ ? " (time limit)" : "");
    print_result_line(words, j);
  }

  const NormOptions& o_;
  const Session& ss_;
  NormObjectHandle stream_ = NORM_OBJECT_INVALID;
  std::vector<uint8_t> msg_;
  uint64_t seq_ = 0;    // the data message being written (msgs: the end-of-stream one)
  size_t off_ = 0;      // bytes of it already in the stream
  bool eos_written_ = false;
  bool tx_ready_ = true;
  uint64_t written_ = 0, acked_ = 0, window_ = 0, step_ = 0;
  bool wm_pending_ = false, final_set_ = false, done_ = false, timed_out_ = false;
  uint64_t wm_at_ = 0, watermarks_ = 0, wm_retries_ = 0;
  uint64_t t0_ = 0, cpu0_ = 0, done_ns_ = 0;
};

// ------------------------------------------------------------------ receiver
class Receiver {
 public:
  Receiver(const NormOptions& o, const Session& ss) : o_(o), ss_(ss), tally_(o.size), buf_(kReadBytes + kMaxSize) {}

  int run() {
    if (!start()) return 1;
    std::printf("READY norm receiver %u %s\n", o_.local_id(), o_.group.c_str());
    std::fflush(stdout);
    Deadline dl(o_.duration_s);
    cpu0_ = cpu_ns();
    uint64_t linger_until = 0;
    while (!dl.expired()) {
      pump_events(ss_.inst(), more_ ? 0 : kWakeMs, [&](const NormEvent& ev) { on_event(ev); });
      if (more_ && stream_ != NORM_OBJECT_INVALID) read_stream();
      if (have_all() && linger_until == 0) linger_until = now_ns() + static_cast<uint64_t>(kLingerS * 1e9);
      if (closed_ || (linger_until != 0 && now_ns() >= linger_until)) break;
    }
    uint64_t cpu = cpu_ns() - cpu0_;
    NormStopReceiver(ss_.s());
    report(cpu, !have_all() && !closed_);
    return 0;
  }

 private:
  bool start() {
    NormSessionHandle s = ss_.s();
    if (!configure(ss_, o_)) return false;
    NormSetDefaultSyncPolicy(s, NORM_SYNC_STREAM);  // from the stream's start, not mid-way
    NormSetDefaultUnicastNack(s, true);             // feedback to the sender only
    // The sender's state allocated now, not when its first packets arrive: allocating
    // megabytes then stalls the reader while the socket buffer overflows.
    if (!NormPreallocateRemoteSender(s, o_.buffer, o_.segment, o_.block, 0, o_.buffer)) {
      std::fprintf(stderr, "%s: warning: NormPreallocateRemoteSender failed\n", kName);
    }
    if (!NormStartReceiver(s, o_.buffer)) return std::fprintf(stderr, "%s: NormStartReceiver failed\n", kName), false;
    NormSetRxSocketBuffer(s, o_.socket_buffer);
    return true;
  }

  bool have_all() const { return eos_ || delivered() >= o_.msgs; }
  uint64_t delivered() const { return tally_.report().msgs_delivered; }

  void on_event(const NormEvent& ev) {
    switch (ev.type) {
      case NORM_RX_OBJECT_NEW:
        if (NormObjectGetType(ev.object) == NORM_OBJECT_STREAM && stream_ == NORM_OBJECT_INVALID) {
          stream_ = ev.object;
          synced_ = false;
        }
        break;
      case NORM_RX_OBJECT_UPDATED:
        if (ev.object == stream_) read_stream();
        break;
      case NORM_RX_CMD_NEW:  // the sender's kDoneCmd: it has stopped
        if (stream_ != NORM_OBJECT_INVALID) read_stream();
        closed_ = true;
        break;
      case NORM_RX_OBJECT_COMPLETED:
      case NORM_RX_OBJECT_ABORTED:
        if (ev.object == stream_) {
          read_stream();
          aborted_ |= ev.type == NORM_RX_OBJECT_ABORTED;
          closed_ = true;
          stream_ = NORM_OBJECT_INVALID;
        }
        break;
      default:
        break;
    }
  }

  // The length of the message at @p p (its header is there): by its magic.
  size_t length_at(const uint8_t* p) const {
    uint32_t magic_be;
    std::memcpy(&magic_be, p, sizeof magic_be);
    return ntohl(magic_be) == kMagicEos ? kEosSize : o_.size;
  }

  // Check and count every whole message in the buffer; keep a partial one at its start.
  void take_messages() {
    size_t at = 0;
    while (!eos_ && have_ - at >= sizeof(MsgHeader) && have_ - at >= length_at(buf_.data() + at)) {
      size_t len = length_at(buf_.data() + at);
      eos_ = tally_.on_message(buf_.data() + at, len);
      at += len;
    }
    std::memmove(buf_.data(), buf_.data() + at, have_ - at);
    have_ -= at;
  }

  // Read what the stream holds in large pieces (a read per message would cost a lock each),
  // then cut it into messages: their size is known, the stream's EOM marks only serve to find
  // a message start again after a break.
  void read_stream() {
    more_ = false;
    for (int reads = 0; !eos_; ++reads) {
      if (reads == kReadsPerTurn) {
        more_ = true;  // the run loop calls again after a look at the deadline and the events
        return;
      }
      if (!synced_) {
        if (!NormStreamSeekMsgStart(stream_)) return;  // wait for the next update
        synced_ = true;
        have_ = 0;
      }
      unsigned want = static_cast<unsigned>(buf_.size() - have_);
      unsigned n = want;
      if (!NormStreamRead(stream_, reinterpret_cast<char*>(buf_.data() + have_), &n)) {
        ++breaks_;  // data lost for good: the partial message goes, find the next start
        synced_ = false;
        continue;
      }
      have_ += n;
      take_messages();
      if (n < want) return;  // all there is for now
    }
  }

  void report(uint64_t cpu, bool timed_out) {
    Report r = tally_.report();
    if (!r.sender_reported) r.msgs_sent = std::max(o_.msgs, r.msgs_sent);
    r.lost = r.msgs_sent > r.msgs_delivered ? r.msgs_sent - r.msgs_delivered : 0;
    double secs = r.duration_s;
    double mps = secs > 0 ? static_cast<double>(r.msgs_delivered) / secs : 0;
    double bytes = static_cast<double>(r.bytes_delivered);
    app::Json j;
    j.str("peer", "norm").str("role", role_text(o_.role)).num("node_id", uint64_t{o_.local_id()});
    j.num("size", uint64_t{o_.size}).num("msgs", o_.msgs).num("msgs_sent", r.msgs_sent);
    j.num("msgs_delivered", r.msgs_delivered).num("bytes_delivered", r.bytes_delivered);
    j.num("duration_s", secs).num("msgs_per_s", mps).num("mib_per_s", secs > 0 ? mib(bytes) / secs : 0.0);
    j.num("gbps", secs > 0 ? bytes * 8 / secs / 1e9 : 0.0).num("lost", r.lost).num("duplicated", r.duplicated);
    j.num("reordered", r.reordered).num("corrupted", r.corrupted).num("stream_breaks", breaks_);
    j.boolean("stream_aborted", aborted_).boolean("sender_reported", r.sender_reported);
    j.num("cpu_ns_per_msg", r.msgs_delivered ? static_cast<double>(cpu) / static_cast<double>(r.msgs_delivered) : 0.0);
    j.boolean("timed_out", timed_out);
    char words[256];
    std::snprintf(words, sizeof words,
                  "norm receiver %u: %llu of %llu delivered, %llu lost, %llu corrupted in %.3f s: %.0f msg/s%s",
                  o_.local_id(), static_cast<unsigned long long>(r.msgs_delivered),
                  static_cast<unsigned long long>(r.msgs_sent), static_cast<unsigned long long>(r.lost),
                  static_cast<unsigned long long>(r.corrupted), secs, mps, timed_out ? " (time limit)" : "");
    print_result_line(words, j);
  }

  const NormOptions& o_;
  const Session& ss_;
  RxTally tally_;
  std::vector<uint8_t> buf_;
  NormObjectHandle stream_ = NORM_OBJECT_INVALID;
  size_t have_ = 0;
  bool synced_ = false, eos_ = false, closed_ = false, aborted_ = false, more_ = false;
  uint64_t breaks_ = 0, cpu0_ = 0;
};

}  // namespace
}  // namespace imago::peers

int main(int argc, char** argv) {
  using namespace imago::peers;
  NormOptions opt;
  int rc = parse(argc, argv, opt);
  if (rc != 0) return rc > 0 ? 0 : 2;
  install_stop_handlers();
  // NORM paces its packets with its own thread's timers, one packet per timeout at a fixed
  // rate: the kernel's default 50 us timer slack would cap it near 20,000 packets/s. Set
  // before NormCreateInstance, so NORM's thread inherits it.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  Session ss(opt);
  if (opt.role == NormRole::kSender) return Sender(opt, ss).run();
  return Receiver(opt, ss).run();
}
