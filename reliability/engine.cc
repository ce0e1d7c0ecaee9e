// SPDX-License-Identifier: BSD-3-Clause
// Engine set-up, the application send path, frame dispatch and read-only accessors.
#include "reliability/engine.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "reliability/parity.h"
#include "reliability/peer.h"

namespace imago::rel {

namespace {

constexpr bool pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// splitmix64 finaliser: a bijective mix, so distinct inputs stay distinct.
constexpr uint64_t seed_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

const char* config_problem(const Config& c) {
  if (c.max_sack > kMaxSackRanges) return "max_sack above the most SACK ranges a frame carries";
  if (c.mtu > 65535) return "mtu above 65535";
  if (c.mtu < sizeof(FrameHeader) + 8 * c.max_sack + kMaxRecordHeader + 64)
    return "mtu too small for a header, its SACK ranges and 64 bytes of records";
  // Power-of-two rings keep slot = seq % size continuous across the 2^32 wrap.
  if (!pow2(c.send_window) || !pow2(c.recv_window)) return "send or receive window not a power of two";
  if (c.send_window > (1u << 30) || c.recv_window > (1u << 30)) return "send or receive window above 2^30 units";
  const uint32_t cap = unit_capacity(c);
  if (c.max_message_size < cap) return "largest message smaller than a frame's payload";
  if (c.send_buffer_bytes < c.max_message_size + cap) return "send buffer smaller than the largest message and a frame";
  if ((c.max_message_size + cap - 1) / cap > c.send_window) return "largest message needs more units than the send window holds";
  if (c.ack_req_low_pct > c.ack_req_high_pct || c.ack_req_high_pct > 100) return "ACK request water marks out of order";
  if (c.credit_high_pct > 100) return "credit water mark above 100 %";
  if (c.max_peers == 0) return "no peers allowed";
  if (c.rto_min_ns == 0 || c.rto_min_ns > c.rto_max_ns || c.rto_initial_ns == 0) return "RTO bounds zero or out of order";
  if (c.dead_after_ns == 0 || c.ack_refresh_ns == 0) return "zero dead-after or ACK refresh time";
  if ((c.group_sources != 0 || c.group_streams != 0) &&
      (!pow2(c.group_window) || c.group_window > (1u << 20) || c.group_status_ns == 0 ||
       c.group_expire_ns == 0 || c.group_sources > 1024 || c.group_streams > 1024))
    return "group window not a power of two up to 2^20, zero group timers, or over 1024 group sources or streams";
  if (c.group_parity_frames != 0 &&
      (c.group_parity_frames < kParityMinFrames || c.group_parity_frames > kParityMaxFrames || c.max_sack < 2))
    return "group parity frames out of range (or max_sack below 2)";
  return nullptr;
}

int validate(const Config& c) { return config_problem(c) == nullptr ? 0 : -EINVAL; }

int Engine::create(const Config& cfg, FrameSink* frames, AppSink* app,
                   std::unique_ptr<Engine>* out) {
  if (frames == nullptr || app == nullptr || out == nullptr) return -EINVAL;
  if (int rc = validate(cfg); rc != 0) return rc;
  out->reset(new Engine(cfg, frames, app));
  return 0;
}

Engine::Engine(const Config& cfg, FrameSink* frames, AppSink* app)
    : cfg_(cfg),
      frames_(frames),
      app_(app),
      // Node id and epoch hashed into the seed: engines given the same seed, or a restart
      // given seed+1 and epoch+1, still draw different tokens (a plain xor would collide).
      rng_(seed_mix(seed_mix(seed_mix(cfg.seed) + cfg.node_id) + cfg.epoch)),
      unit_cap_(unit_capacity(cfg)),
      ack_sack_max_(std::min<uint32_t>(kMaxSackRanges,
                                       (cfg.mtu - sizeof(FrameHeader)) / sizeof(SackRange))),
      // Go-back-N asks in every frame, as Pupa: its receiver keeps nothing beyond a gap, and
      // ACKs are how the sender finds out early.
      ack_req_spacing_(cfg.selective_repeat ? std::max(1u, cfg.send_window / 256) : 1),
      rebuild_above_(app->rebuild_above()) {
  do token_ = rng_.next();
  while (token_ == 0);  // 0 means "unknown" on the wire
  txbuf_ = std::make_unique<uint8_t[]>(cfg.mtu);
  ctlbuf_ = std::make_unique<uint8_t[]>(cfg.mtu);
  recs_ = std::make_unique<Record[]>(kRecordCache);
  room_ = frames->frame_room();
  frames_per_peer_ = SendWindow::frames_for(cfg);
  peers_.reserve(cfg.max_peers);
  index_.reserve(cfg.max_peers);
  init_groups();
}

Engine::~Engine() {
  for (auto& p : peers_) {  // lent buffers, held frames and messages by reference go back
    drop_reassembly(*p);
    release_held(*p);
    p->tx.reset(0);  // a slot the sink still uses keeps its message: never handed back under it
    settle_ext(*p);
  }
}

void Engine::release_frames() {
  for (auto& p : peers_) release_held(*p);
}

Peer* Engine::find(NodeId id) {
  // Streams come in runs to one peer: remember the last one (peers are never removed).
  if (last_found_ != nullptr && last_found_->id == id) return last_found_;
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  return last_found_ = peers_[it->second].get();
}

const Peer* Engine::find(NodeId id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : peers_[it->second].get();
}

int Engine::add_peer(NodeId id, uint64_t now_ns) {
  if (id == cfg_.node_id) return -EINVAL;
  if (find(id) != nullptr) return -EEXIST;
  if (peers_.size() >= cfg_.max_peers) return -ENOSPC;
  auto p = std::make_unique<Peer>();
  p->id = id;
  p->tx.init(cfg_.send_window, frames_per_peer_, cfg_.mtu, cfg_.max_sack, room_, frames_);
  p->rx.init(cfg_.recv_window, unit_cap_);
  p->reasm.init(cfg_.max_message_size);
  p->peer_max_message = cfg_.max_message_size;  // until its HELLO states its own
  p->rto = RtoEstimator(cfg_.rto_initial_ns, cfg_.rto_min_ns, cfg_.rto_max_ns, cfg_.ack_delay_ns);
  p->credit_in = CreditGrant(cfg_.flow_control, static_cast<uint32_t>(uint64_t{cfg_.recv_window} *
                                                                      cfg_.credit_high_pct / 100));
  now_ = now_ns;
  index_.emplace(id, static_cast<uint32_t>(peers_.size()));
  peers_.push_back(std::move(p));
  reset_session(*peers_.back(), false, new_isn());
  peers_.back()->last_heard = now_ns;
  peers_.back()->last_sent = now_ns;
  return 0;
}

Peer* Engine::sendable(NodeId id, size_t len, int* rc) {
  Peer* p = find(id);
  *rc = p == nullptr                                                           ? -EINVAL
        : p->s.state == PeerState::kDead                                      ? -ENOTCONN
        : len > std::min<uint64_t>(cfg_.max_message_size, p->peer_max_message) ? -EMSGSIZE
                                                                               : 0;
  return *rc == 0 ? p : nullptr;
}

uint32_t Engine::units_of(size_t len) const {
  return static_cast<uint32_t>(len <= unit_cap_ ? 1 : (len + unit_cap_ - 1) / unit_cap_);  // no division for one unit
}

/** Unit @p i of @p units of a message: its record flags. */
static uint8_t unit_flags(uint32_t i, uint32_t units, bool fast) {
  return static_cast<uint8_t>((i + 1 < units ? rec_flag::kMore : 0) | (i > 0 ? rec_flag::kCont : 0) |
                              (fast ? rec_flag::kFast : 0));
}

int Engine::send(NodeId id, std::span<const uint8_t> msg, uint32_t flags, uint64_t now_ns) {
  int rc;
  Peer* p = sendable(id, msg.size(), &rc);
  if (p == nullptr) return rc;
  const uint32_t units = units_of(msg.size());
  if (!p->tx.fits(units, msg.size())) return -EAGAIN;
  queue(*p, msg, units, flags, now_ns, [&](std::span<const uint8_t> part, uint8_t rf) { p->tx.push(part, rf, now_ns); });
  return 0;
}

int Engine::send_ref(NodeId id, std::span<const uint8_t> msg, uint32_t flags, uint64_t now_ns, uint64_t cookie) {
  if (!by_ref(msg.size())) {
    const int rc = send(id, msg, flags, now_ns);
    return rc < 0 ? rc : 1;
  }
  int rc;
  Peer* p = sendable(id, msg.size(), &rc);
  if (p == nullptr) return rc;
  const uint32_t units = units_of(msg.size());
  if (!p->tx.fits_ext(units)) return settle_ext(*p), -EAGAIN;  // fits_ext() may free parked slots
  p->tx.begin_ext(cookie);
  p->c.msgs_by_ref++;
  queue(*p, msg, units, flags, now_ns, [&](std::span<const uint8_t> part, uint8_t rf) { p->tx.push_ext(part, rf, now_ns); });
  settle_ext(*p);
  return 0;
}

// Queue @p msg as @p units units, each through @p push(part, record flags), then account for
// it and flush when a frame's worth (or a FASTPATH one) waits.
template <typename Push>
void Engine::queue(Peer& p, std::span<const uint8_t> msg, uint32_t units, uint32_t flags, uint64_t now_ns, Push&& push) {
  now_ = now_ns;
  const bool fast = flags & send_flag::kFastpath;
  for (uint32_t i = 0; i < units; ++i) {
    const size_t off = size_t{i} * unit_cap_;
    auto part = msg.subspan(off, std::min<size_t>(unit_cap_, msg.size() - off));
    push(part, unit_flags(i, units, fast));
    p.unsent_bytes += part.size() + record_header_size(part.size(), false);
  }
  if (fast) p.fast_pending += units;
  if (flags & send_flag::kAckReq) p.probe_now = true;
  p.c.msgs_sent++;
  p.c.bytes_sent += msg.size();
  if (p.s.state != PeerState::kEstablished) p.early_max = std::max<uint64_t>(p.early_max, msg.size());
  update_ack_required(p);
  if (fast || p.unsent_bytes >= cfg_.mtu) flush(p, now_ns, false);
}

void Engine::settle_ext(Peer& p) {
  p.tx.take_done([&](uint64_t cookie) { app_->ext_done(cookie); });
}

void Engine::on_frame(std::span<const uint8_t> frame, uint64_t now_ns) {
  now_ = now_ns;
  Header h;
  std::span<const uint8_t> body;
  Reject r = decode_header(frame, cfg_.crc, &h, &body);
  if (r == Reject::kNone && h.type == FrameType::kGroupData) return on_group_data(h, frame, body, now_ns);
  if (r == Reject::kNone && h.type == FrameType::kGroupParity) return on_group_parity(h, body, now_ns);
  if (r == Reject::kNone && h.dst_node != cfg_.node_id) r = Reject::kWrongDst;
  Peer* p = r == Reject::kNone ? find(h.src_node) : nullptr;
  if (r == Reject::kNone && p == nullptr) r = Reject::kUnknownPeer;
  if (r != Reject::kNone) {
    orphan_.reject[static_cast<size_t>(r)]++;
    return;
  }
  if (h.type == FrameType::kHello || h.type == FrameType::kHelloAck) {
    if (!settings_agree(*p, h)) return;
    on_hello(*p, h, now_ns);
  } else if (h.type == FrameType::kGroupCtl) {
    if (!session_ok(*p, h)) return;
    const uint64_t session = p->s.token ^ ((uint64_t{p->s.epoch} << 32) | p->s.my_isn);
    if (!p->ctl_rx.fresh(session, h.seq)) return void(p->c.reject[static_cast<size_t>(Reject::kReplayedCtl)]++);
    p->last_heard = now_ns;
    p->c.pkts_received++;
    return on_group_ctl(*p, body, now_ns);
  } else if (session_ok(*p, h)) {
    if (h.type == FrameType::kData && !records_ok(body, h.seq)) {
      p->c.reject[static_cast<size_t>(Reject::kBadRecord)]++;
      return;
    }
    p->last_heard = now_ns;
    p->c.pkts_received++;
    on_ack_info(*p, h, frame, now_ns);
    if (h.type == FrameType::kData) on_records(*p, h, body, now_ns);
    if (h.flags & frame_flag::kAckReq) p->ack_now = true;  // Pupa: answer at once
  }
  flush(*p, now_ns, false);
}

bool Engine::records_ok(std::span<const uint8_t> body, Seq first, uint8_t allowed) {
  RecordReader rd(body, first, allowed);
  Record rec;
  int rc;
  recs_n_ = 0;
  while ((rc = rd.next(&rec)) == 1) {
    if (rec.payload.size() > unit_cap_) return false;
    if ((rec.flags & rec_flag::kView) && rec.payload.size() != sizeof(GroupViewRecord)) return false;
    if (recs_n_ < kRecordCache) recs_[recs_n_] = rec;
    ++recs_n_;
  }
  recs_whole_ = recs_n_ <= kRecordCache;
  return rc == 0;
}

PeerState Engine::state(NodeId id) const {
  const Peer* p = find(id);
  return p ? p->s.state : PeerState::kDead;
}

uint64_t Engine::peer_max_message(NodeId id) const {
  const Peer* p = find(id);
  return p ? std::min<uint64_t>(cfg_.max_message_size, p->peer_max_message) : 0;
}

const PeerCounters* Engine::counters(NodeId id) const {
  const Peer* p = find(id);
  return p ? &p->c : nullptr;
}

PeerCounters Engine::total_counters() const {
  PeerCounters t = orphan_;
  for (const auto& p : peers_) t.add(p->c);
  return t;
}

uint64_t Engine::unconfirmed_messages(NodeId id) const {
  const Peer* p = find(id);
  return p ? p->tx.messages_held() : 0;
}

bool Engine::view(NodeId id, PeerView* out) const {
  const Peer* p = find(id);
  if (p == nullptr || out == nullptr) return false;
  PeerView v;
  v.id = id;
  v.state = p->s.state, v.known = p->s.known, v.confirmed = p->s.confirmed, v.epoch = p->s.epoch;
  if (p->rto.has_sample()) v.srtt_ns = p->rto.srtt(), v.rttvar_ns = p->rto.rttvar();
  if (p->rto.min_rtt() != ~uint64_t{0}) v.min_rtt_ns = p->rto.min_rtt();
  v.rto_ns = p->rto.rto();
  v.tx_in_flight = p->tx.nxt() - p->tx.una();
  v.tx_queued = p->tx.end() - p->tx.nxt();
  v.tx_unconfirmed_msgs = p->tx.messages_held();
  v.rx_held = p->rx.high() - p->rx.dlv();
  v.credit_allowed = p->credit_out.unlimited() ? UINT32_MAX : p->credit_out.limit() - p->tx.una();
  v.credit_granted = p->credit_sent;
  v.last_heard_ns = p->last_heard;
  *out = v;
  return true;
}

size_t Engine::peer_ids(NodeId* out, size_t max) const {
  size_t n = 0;
  for (const auto& p : peers_) {
    if (n == max) break;
    out[n++] = p->id;
  }
  return n;
}

std::string Engine::debug_state(NodeId id) const {
  const Peer* p = find(id);
  if (p == nullptr) return "unknown peer";
  // The frame holding the oldest unacknowledged unit (none when nothing is outstanding).
  const TxFrame* una = p->tx.has_outstanding() ? &p->tx.frame(p->tx.fpos(p->tx.una())) : nullptr;
  char b[512];
  std::snprintf(b, sizeof b,
                "state %d known %d confirmed %d tx una %u nxt %u end %u retx %u cursor %u "
                "ackreq %d credit %s rto %lu rto_dl %lu | rx dlv %u nxt %u high %u limited %d "
                "credit_sent %u blocked %d reasm %d | una tx %u retx %d sacked %d flight %d",
                static_cast<int>(p->s.state), p->s.known, p->s.confirmed, p->tx.una(), p->tx.nxt(),
                p->tx.end(), p->tx.retx_frames(), p->retx_cursor, p->ack_required,
                p->credit_out.unlimited() ? "unl" : "lim", p->rto.rto(), p->rto_deadline,
                p->rx.dlv(), p->rx.nxt(), p->rx.high(), p->credit_in.limited(), p->credit_sent,
                p->deliver_blocked, p->reasm.in_message(), una ? una->tx_count : 0,
                una && una->retx, p->tx.sacked(p->tx.una()), una && una->in_flight);
  return b;
}

size_t Engine::memory_bytes() const {
  size_t n = cfg_.mtu;
  for (const auto& p : peers_)
    n += sizeof(Peer) + p->tx.memory_bytes() + p->rx.memory_bytes() + p->reasm.memory_bytes();
  for (uint32_t i = 0; i < cfg_.group_sources; ++i)
    n += sizeof(GroupTx) + gtx_[i].tx.memory_bytes() + gtx_[i].members.capacity() * sizeof(GroupMember);
  for (uint32_t i = 0; i < cfg_.group_streams; ++i)
    n += sizeof(GroupRx) + grx_[i].rx.memory_bytes() + grx_[i].reasm.memory_bytes();
  return n;
}

}  // namespace imago::rel
