// SPDX-License-Identifier: BSD-3-Clause
// The C API: attachments and endpoints over the shared table, the rings and the pools.
#include "api/imago.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_memzone.h>
#include <rte_pause.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "api/big_ledger.h"
#include "api/buffers.h"
#include "api/control.h"
#include "api/group_order.h"
#include "api/handles.h"
#include "api/handoff.h"
#include "api/runtime.h"
#include "api/rx_arena.h"
#include "api/tiers.h"
#include "dataplane/eal.h"

using namespace imago::api;
namespace dp = imago::dp;

namespace {

// What a handle stands for. imago_t and imago_ep_t stay incomplete types: the application
// holds handles (handles.h), never pointers to these.
struct Attachment {
  std::unique_ptr<Runtime> rt;  // embedded; null for a secondary process
  ShmRoot* shm = nullptr;
  // A secondary's view of imagod: checked at most every kPrimaryCheck on the paths where
  // nothing moves (ring full or empty), so a dead imagod is an error, not a silent hang.
  // Relaxed: any thread may check; a stale read only delays the verdict by one check.
  std::atomic<uint64_t> next_check{0};
  std::atomic<bool> primary_gone{false};

  Attachment& operator=(Attachment&& o) noexcept {
    rt = std::move(o.rt);
    shm = o.shm;
    next_check.store(0, std::memory_order_relaxed);
    primary_gone.store(false, std::memory_order_relaxed);
    return *this;
  }
};

struct Endpoint;

// An ordered group endpoint's ordering and its way to the rings (group_order.h); on the heap,
// so the ordering's pointer to its Io stays put.
struct Ordered final : GroupOrder::Io {
  Endpoint* ep = nullptr;
  GroupOrder order;
  int send(std::span<const uint8_t> head, std::span<const uint8_t> body, bool fast) override;
  void drop(imago_msg& m) override;
};

// Set while a thread is inside a data-path call on the endpoint (InCall). Moved or assigned
// (a new endpoint in a reused slot), it starts clear.
struct BusyFlag {
  std::atomic<bool> v{false};
  BusyFlag() = default;
  BusyFlag(BusyFlag&&) noexcept {}
  BusyFlag& operator=(BusyFlag&&) noexcept { return v.store(false, std::memory_order_relaxed), *this; }
};

static_assert(IMAGO_BUF_HELD_MAX < LoanTable::kSlots, "a loan stays for sends by copy");

struct Endpoint {
  Attachment* att;
  EndpointSlot* slot;
  uint32_t index;
  rte_ring* rx;
  rte_ring* tx;
  bool recv_only;  ///< a group endpoint without IMAGO_GROUP_SEND: sends are refused
  std::unique_ptr<Ordered> ord;  ///< IMAGO_GROUP_CAUSAL or IMAGO_GROUP_TOTAL; else null
  std::unique_ptr<RxArena> arena;  ///< the receive area (IMAGO_TIER_COPY; none for an ordered group)
  uint64_t rx_got = 0;             ///< messages and events taken from the rx ring
  uint32_t bufs_held = 0;          ///< from imago_buf_alloc(), not yet sent or freed
  BusyFlag busy;                   ///< a thread is inside a data-path call (InCall)
};

// One thread at a time on an endpoint (its rings are single-producer, single-consumer, its
// buffer caches unlocked): a call that finds another thread inside is refused (-EBUSY,
// counted in calls_busy) instead of racing it, which lost and corrupted messages and left
// buffers out of imagod's pools for good. One uncontended exchange per call.
// imago_close() takes the flag too (waiting for the call inside to end) and keeps it: calls
// after it are refused, and one that found the endpoint before the close and its entry
// opened anew since sees its handle retired (-EINVAL).
class InCall {
 public:
  InCall(Endpoint* ep, const imago_ep_t* h);
  ~InCall() {
    if (in_) ep_->busy.v.store(false, std::memory_order_release);
  }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;
  /** @return 0 to go on, -EBUSY (another thread inside, or the endpoint closing), -EINVAL
   *  (the handle was closed meanwhile). */
  int error() const { return !in_ ? -EBUSY : stale_ ? -EINVAL : 0; }

 private:
  Endpoint* ep_;
  bool in_;
  bool stale_ = false;
};

HandleTable<Attachment, 1> g_atts;  // one attachment per process
HandleTable<Endpoint, kMaxEndpoints> g_eps;
std::mutex g_ctl;  // attach, detach, open and close: the handle tables' control path

Attachment* att_of(const imago_t* h) { return g_atts.get(reinterpret_cast<uintptr_t>(h)); }
Endpoint* ep_of(const imago_ep_t* h) { return g_eps.get(reinterpret_cast<uintptr_t>(h)); }

InCall::InCall(Endpoint* ep, const imago_ep_t* h) : ep_(ep), in_(!ep->busy.v.exchange(true, std::memory_order_acquire)) {
  if (!in_) ep->slot->calls_busy.add();
  stale_ = in_ && ep_of(h) != ep;
}

// imago_close(): wait (the data-path calls are short; up to a second) for a call another
// thread is inside on @p ep, then hold its flag for good: no call on it runs during or after
// the close (they freed its caches under a zero-copy loop: buffers lost for good). @return
// false when the other thread did not come out.
bool claim_for_close(Endpoint* ep) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (ep->busy.v.exchange(true, std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  return true;
}

// @return true when this process already knows its imagod is gone or stopping: two loads of
// lines nobody writes while it runs, cheap enough for every send.
bool known_lost(const Attachment* a) {
  return a->primary_gone.load(std::memory_order_relaxed) ||
         (a->rt == nullptr && a->shm->primary_stopping.load(std::memory_order_relaxed) != 0);
}

// @return true when this is a secondary whose imagod died (a control-path check, at most
// once every 10 ms per attachment; the data path never calls it while messages move).
bool primary_lost(Attachment* a) {
  if (a->rt) return false;
  if (a->primary_gone.load(std::memory_order_relaxed)) return true;
  if (a->shm->primary_stopping.load(std::memory_order_acquire) != 0) {
    a->primary_gone.store(true, std::memory_order_relaxed);
    return true;
  }
  const uint64_t now = rte_rdtsc();
  if (now < a->next_check.load(std::memory_order_relaxed)) return false;
  a->next_check.store(now + rte_get_tsc_hz() / 100, std::memory_order_relaxed);
  if (!process_gone(a->shm->primary_pid)) return false;
  a->primary_gone.store(true, std::memory_order_relaxed);
  return true;
}

int control(Attachment* im, CtlMsg& m) {
  if (!im->rt) {
    if (primary_lost(im)) return -ENOTCONN;
    const int rc = ctl_request(m);
    // Unanswered for kCtlGiveUpMs by an imagod that still runs: it is overloaded, not gone.
    return rc == -ENOTCONN && !primary_lost(im) ? -ETIMEDOUT : rc;
  }
  im->rt->housekeeping();  // finish closes that timed out (no daemon loop here)
  m.version = kShmVersion;
  m.pid = getpid();
  switch (m.op) {
    case CtlOp::kOpen: return im->rt->open_endpoint(m);
    case CtlOp::kClose: return im->rt->close_endpoint(m.slot);
    default: return 0;
  }
}

bool is_open(const Endpoint* ep) { return ep->slot->state.load(std::memory_order_acquire) == SlotState::kOpen; }

constexpr uint32_t kKnownFlags = IMAGO_FASTPATH | IMAGO_ACK_REQ;

TierSide side(Endpoint* ep) {
  return {ep->att->shm, ep->slot, &ep->slot->app_caches, ep->arena.get(), ep->ord == nullptr};
}

// A buffer that is not the application's to send or free: refused and counted.
int bad_buffer(Endpoint* ep) {
  ep->slot->buffer_invalid.add();
  return -EINVAL;
}

// Copy the kTierRing message at slot @p at of @p z (and the slots after it) into the receive
// area, described in @p m. @return false when the area is all held.
bool copy_out(Endpoint* ep, const rte_ring_zc_data& z, unsigned at, imago_msg& m) {
  const imago_msg& h = zc_slot(z, at);
  uint32_t id;
  uint8_t* to = ep->arena ? ep->arena->take(&id) : nullptr;
  if (to == nullptr) return false;
  ring_gather(z, at, to);
  m.src = h.src;
  m.len = h.len;
  m.flags = h.flags;
  m.tier = IMAGO_TIER_COPY;
  m.reserved = 0;
  m.u.ext = {to, ep->arena->base(), id};
  return true;
}

// Up to @p n messages from the rx ring into @p msgs: descriptors as they are, kTierRing ones
// copied into the receive area (IMAGO_TIER_COPY). @return how many.
unsigned receive(Endpoint* ep, imago_msg* msgs, unsigned n) {
  rte_ring_zc_data z{};
  // No more than a ring holds: n times the slots a message may take must not wrap to 0.
  const unsigned slots = std::min(n, kRingMax) * tx_slots(IMAGO_SEND_INLINE_MAX);
  const unsigned avail = rte_ring_dequeue_zc_burst_elem_start(ep->rx, sizeof(imago_msg), slots, &z, nullptr);
  if (avail == 0) return 0;
  unsigned at = 0, out = 0;
  while (out < n && at < avail) {
    const imago_msg& h = zc_slot(z, at);
    const unsigned k = ring_spill_of(h);
    if (k == 0) {
      msgs[out++] = h;
      ++at;
      continue;
    }
    if (at + 1 + k > avail) break;  // the engine puts a message's slots together: never
    if (!copy_out(ep, z, at, msgs[out])) {
      ep->slot->rx_copy_full.add();  // the application holds the whole area: later
      break;
    }
    ++out;
    at += 1 + k;
  }
  rte_ring_dequeue_zc_elem_finish(ep->rx, at);
  ep->rx_got += out;
  return out;
}

int put_parts(Endpoint* ep, std::span<const uint8_t> head, std::span<const uint8_t> body, uint32_t flags) {
  // We are the ring's only producer: room seen now is room when we put.
  if (rte_ring_free_count(ep->tx) == 0) return -EAGAIN;
  imago_msg d;
  if (int rc = describe_send_parts(side(ep), ep->slot->peer, head, body, static_cast<uint16_t>(flags), d); rc < 0)
    return rc;
  handoff_put(ep->tx, &d, 1);
  return 0;
}

int Ordered::send(std::span<const uint8_t> head, std::span<const uint8_t> body, bool fast) {
  return is_open(ep) ? put_parts(ep, head, body, fast ? IMAGO_FASTPATH : 0) : -ENOTCONN;
}

void Ordered::drop(imago_msg& m) {
  if (release_received(side(ep), &m, 1) != 0) ep->slot->release_invalid.add();
}

// An ordered group's send (group_order.h): each message behind its ordering header.
int ordered_send(Endpoint* ep, const imago_iov* msgs, unsigned n, uint32_t flags) {
  GroupOrder& o = ep->ord->order;
  const uint32_t hl = o.head_len();
  const uint32_t max = ep->slot->max_message.load(std::memory_order_relaxed) - hl;
  uint8_t head[order::kMaxRecord];
  unsigned done = 0;
  int rc = 0;
  for (; done < n; ++done) {
    const imago_iov& m = msgs[done];
    const bool big = ep->att->shm->pool_for(hl + m.len) == ep->att->shm->big_pool;
    rc = (m.data == nullptr && m.len > 0) ? -EINVAL : m.len > max ? -EMSGSIZE : o.prepare(head, big);
    if (rc < 0) break;
    rc = put_parts(ep, {head, hl}, {static_cast<const uint8_t*>(m.data), m.len}, flags);
    o.sent(rc == 0);
    if (rc < 0) break;
  }
  o.flush(flags & IMAGO_FASTPATH);  // the records this made, as the application's messages go
  if (rc == -EAGAIN) ep->slot->tx_ring_full.add();
  return done > 0 || rc == -EAGAIN ? static_cast<int>(done) : rc;
}

constexpr uint32_t kOrderFlags = IMAGO_GROUP_CAUSAL | IMAGO_GROUP_TOTAL;
constexpr uint32_t kDefaultOrderWindow = 256;
constexpr uint32_t kMaxOrderWindow = 4096;

// Check an ordered group's options. @return 0 (and the members in @p ids), or -EINVAL.
int order_options(const imago_group_opts* o, std::vector<imago::rel::NodeId>& ids) {
  const uint32_t f = o ? o->flags : 0;
  if (!(f & kOrderFlags))
    return o && (o->members || o->n_members || o->order_window) ? -EINVAL : 0;
  const uint32_t both = IMAGO_GROUP_SEND | IMAGO_GROUP_RECV;
  if ((f & kOrderFlags) == kOrderFlags || (f & both) != both || (f & (IMAGO_GROUP_NACK | IMAGO_GROUP_FROM_OLDEST)))
    return -EINVAL;
  if (o->members == nullptr || o->n_members < 2 || o->n_members > IMAGO_GROUP_ORDER_MAX_MEMBERS ||
      o->order_window > kMaxOrderWindow)
    return -EINVAL;
  for (uint32_t i = 0; i < o->n_members; ++i) {
    if (o->members[i] == 0 || o->members[i] > UINT32_MAX) return -EINVAL;
    ids.push_back(static_cast<imago::rel::NodeId>(o->members[i]));
  }
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) == ids.end() ? 0 : -EINVAL;
}

// Not attached, or EAL already used by an earlier attachment of this process.
// Open the slot @p m asks for (its peer or group, name) on @p node and hand out its endpoint.
int open_slot(imago_t* h, CtlMsg& m, uint64_t node, uint32_t ring_size, imago_ep_t** out) {
  std::lock_guard<std::mutex> lock(g_ctl);
  Attachment* im = att_of(h);
  if (im == nullptr) return -EINVAL;
  m.op = CtlOp::kOpen;
  m.node = node;
  m.ring_size = ring_size;
  // Messages of 49 to IMAGO_SEND_INLINE_MAX bytes come inline in the rx ring and are copied
  // here (m.rx_inline): room for twice the ring's worth held at once.
  // (A ring size out of range is refused by the open itself.)
  const uint32_t ring = ring_size >= kRingMin && ring_size <= kRingMax ? ring_size : kRingDefault;
  auto arena = m.rx_inline ? std::make_unique<RxArena>() : nullptr;
  if (arena && !arena->init(2 * ring)) return -ENOMEM;
  if (int rc = control(im, m); rc < 0) return rc;
  EndpointSlot* s = &im->shm->slots[m.slot];
  // This thread's buffer caches; without them (no memory) every buffer goes to the pool ring.
  if (pool_caches_create(s->app_caches, im->shm->msg_pool, im->shm->frame_pool) < 0)
    s->app_caches = PoolCaches{};
  const bool recv_only = s->group != 0 && !(s->group_flags & IMAGO_GROUP_SEND);
  uintptr_t e = g_eps.add([&](Endpoint& ep) { ep = Endpoint{im, s, m.slot, s->rx, s->tx, recv_only, nullptr, std::move(arena)}; });
  *out = reinterpret_cast<imago_ep_t*>(e);
  return 0;
}

// An application that returns from main() (or calls exit()) attached is detached first, by
// a handler registered after every static the teardown uses was built, so it runs before
// their destructors (which would otherwise free them under a detach run by ours).
void detach_at_exit() {
  std::vector<imago_t*> live;
  {
    std::lock_guard<std::mutex> lock(g_ctl);
    g_atts.for_each([&](uintptr_t h) { live.push_back(reinterpret_cast<imago_t*>(h)); });
  }
  for (imago_t* im : live) imago_detach(im);
}

void detach_at_exit_once() {
  static const bool registered = std::atexit(detach_at_exit) == 0;
  (void)registered;
}

int attach_refused() {
  bool live = false;
  g_atts.for_each([&](uintptr_t) { live = true; });
  if (live) return -EALREADY;
  if (dp::eal_was_started()) {
    std::fprintf(stderr, "imago: EAL starts once per process: a process that detached cannot attach again\n");
    return -ENOTSUP;
  }
  return 0;
}

}  // namespace


extern "C" {

namespace {
// An imagod option given to an embedded node, which would ignore it; nullptr: none.
const char* daemon_only_option(const imago::api::RuntimeOptions& o) {
  const imago::api::RuntimeOptions fresh;
  if (o.duration_s != fresh.duration_s) return "duration";
  if (o.stats_period_s != fresh.stats_period_s) return "stats-period";
  return o.file_prefix != fresh.file_prefix ? "file-prefix" : nullptr;
}
}  // namespace

int imago_attach_embedded(int argc, char** argv, imago_t** out) {
  if (out == nullptr) return -EINVAL;
  std::lock_guard<std::mutex> lock(g_ctl);
  if (int rc = attach_refused(); rc < 0) return rc;
  dp::ArgSplit args;
  if (argc <= 1 || argv == nullptr) {
    args.prog = "imago";
    args.app = {"--pair"};
  } else {
    args = dp::split_args(argc, argv);
  }
  RuntimeOptions o;
  std::string err;
  if (int rc = parse_runtime_options(args.app, o, &err); rc != 0) {
    std::fprintf(stderr, "imago: %s\n", rc == 1 ? "options are imagod's: see imagod --help" : err.c_str());
    return -EINVAL;
  }
  if (const char* d = daemon_only_option(o)) {
    std::fprintf(stderr, "imago: --%s is imagod's alone: an embedded node ends with its application, prints no "
                 "counters (imago_node_stats_get() reads them) and runs EAL on a prefix of its own\n", d);
    return -EINVAL;
  }
  auto rt = std::make_unique<Runtime>();
  if (int rc = rt->start(o, args, false); rc < 0) {
    rt->stop();
    return rc;
  }
  ShmRoot* shm = rt->shm();
  uintptr_t h = g_atts.add([&](Attachment& a) { a = Attachment{std::move(rt), shm}; });
  *out = reinterpret_cast<imago_t*>(h);
  detach_at_exit_once();
  return 0;
}

int imago_attach_secondary(const char* file_prefix, imago_t** out) {
  if (out == nullptr) return -EINVAL;
  std::lock_guard<std::mutex> lock(g_ctl);
  if (int rc = attach_refused(); rc < 0) return rc;
  std::string prefix = file_prefix ? file_prefix : "imago";
  // Before EAL: once it started it cannot start again in this process, and with no imagod
  // there the application could never attach without a restart.
  if (prefix.find('/') != std::string::npos || !primary_runs(prefix)) return -EIO;
  // The application's thread is lcore 0 but may run on any CPU: several applications and
  // imagod's control thread share the machine, and pinning them all to one CPU starves them.
  unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  std::string lcores = "0@(0-" + std::to_string(ncpu - 1) + ")";
  if (int rc = dp::eal_start("imago-app", {"--proc-type=secondary", "--file-prefix", prefix, "--no-pci",
                                           "--no-telemetry", "--lcores", lcores, "--log-level=lib.*:warning"});
      rc < 0) {
    // EAL made the prefix's runtime directory before it found no primary there: if it is
    // empty, it is ours to remove (rmdir leaves one a primary is using alone).
    std::error_code ec;
    if (rc != -EALREADY) std::filesystem::remove(dpdk_runtime_dir(prefix), ec);
    return rc == -EALREADY ? -ENOTSUP : -EIO;  // EALREADY: an attach of this process failed after EAL began
  }
  CtlMsg m{};
  m.op = CtlOp::kHello;
  int rc = ctl_request(m);
  const rte_memzone* mz = rc == 0 ? rte_memzone_lookup(kShmName) : nullptr;
  auto* shm = mz ? static_cast<ShmRoot*>(mz->addr) : nullptr;
  if (rc == 0 && (shm == nullptr || shm->magic != kShmMagic || shm->version != kShmVersion)) rc = -EPROTO;
  if (rc < 0) {
    rte_eal_cleanup();
    return rc;
  }
  uintptr_t h = g_atts.add([&](Attachment& a) { a = Attachment{nullptr, shm}; });
  *out = reinterpret_cast<imago_t*>(h);
  detach_at_exit_once();
  return 0;
}

namespace {
int close_endpoint(imago_ep_t* h, bool force);
}  // namespace

int imago_detach(imago_t* h) {
  std::vector<imago_ep_t*> open;
  {
    std::lock_guard<std::mutex> lock(g_ctl);
    Attachment* im = att_of(h);
    if (im == nullptr) return -EINVAL;
    g_eps.for_each([&](uintptr_t e) {
      if (g_eps.get(e)->att == im) open.push_back(reinterpret_cast<imago_ep_t*>(e));
    });
  }
  for (imago_ep_t* e : open) close_endpoint(e, true);
  std::lock_guard<std::mutex> lock(g_ctl);
  Attachment* im = att_of(h);
  if (im == nullptr) return -EINVAL;  // another thread detached meanwhile
  if (im->rt) {
    im->rt->stop();
  } else if (!im->primary_gone.load(std::memory_order_relaxed) && !process_gone(im->shm->primary_pid)) {
    rte_eal_cleanup();  // not after imagod died: a lock it held in shared memory would hang us
  }
  *im = Attachment{};
  g_atts.remove(reinterpret_cast<uintptr_t>(h));
  return 0;
}

unsigned imago_node_count(const imago_t* h) {
  const Attachment* im = att_of(h);
  return im ? im->shm->n_nodes : 0;
}

uint64_t imago_node_id(const imago_t* h, unsigned index) {
  const Attachment* im = att_of(h);
  return im && index < im->shm->n_nodes ? im->shm->node_ids[index] : 0;
}

int imago_engine_poll(imago_t* h) {
  Attachment* im = att_of(h);
  if (im == nullptr) return -EINVAL;
  if (!im->rt || !im->rt->inline_engines()) return -ENOTSUP;
  return im->rt->poll_inline();
}

namespace {

namespace red = imago::rel::red;
static_assert(static_cast<int>(red::Mode::kActiveStandby) == IMAGO_NET_ACTIVE_STANDBY &&
              static_cast<int>(red::Mode::kDuplicate) == IMAGO_NET_DUPLICATE &&
              static_cast<int>(red::Mode::kPingPong) == IMAGO_NET_PING_PONG);
static_assert(static_cast<int>(red::NetState::kUp) == IMAGO_NET_UP &&
              static_cast<int>(red::NetState::kSuspect) == IMAGO_NET_SUSPECT &&
              static_cast<int>(red::NetState::kDown) == IMAGO_NET_DOWN);

// The networks of a node on two (imago_node_stats.net_*); zeros for one network.
void net_stats(const dp::NodeSnapshot& s, imago_node_stats* st) {
  st->net_mode = s.redundant ? static_cast<uint32_t>(s.mode) : IMAGO_NET_ONE;
  if (!s.redundant) return;
  for (int n = 0; n < 2; ++n) {
    const imago::rel::red::NetCounters& c = s.nets[n];
    st->net_state[n] = static_cast<uint32_t>(c.state);
    st->net_frames_sent[n] = c.frames_sent, st->net_frames_received[n] = c.frames_received;
    st->net_heartbeats_lost[n] = c.heartbeats_lost, st->net_resent[n] = c.resent;
    st->net_failovers[n] = c.failovers;
    st->net_duplicates_dropped += c.duplicates_dropped;
  }
  st->net_failbacks = s.nets[0].failbacks;
}

void fabric_stats(const dp::NodeSnapshot& s, imago_node_stats* st) {
  if (!s.fabric) return;
  const dp::CircuitStats& c = s.circ;
  st->circ_in_use = c.in_use, st->circ_ports_up = c.ports_up;
  st->circ_up = c.link.circuits_up, st->circ_down = c.link.circuits_down;
  st->circ_links_down = c.link.links_down;
  st->circ_forwarded = c.node.data_forwarded, st->circ_pushbacks = c.link.pushbacks;
  st->circ_rejected = c.node.bad_frame + c.node.unknown_vci + c.node.bad_setup + c.sink.wrong_peer +
                      c.sink.setups_unproven;
}

}  // namespace

int imago_node_stats_get(const imago_t* h, unsigned index, struct imago_node_stats* st) {
  const Attachment* im = att_of(h);
  if (im == nullptr || st == nullptr || index >= im->shm->n_nodes || index >= kMaxNodes) return -EINVAL;
  thread_local dp::NodeSnapshot snap_buf;  // 16 KiB: not on an application's stack, no malloc
  dp::NodeSnapshot* snap = &snap_buf;
  if (!im->shm->boards[index].read(snap)) return -EAGAIN;
  const imago::rel::PeerCounters& c = snap->total;
  uint64_t in_flight = 0;
  for (uint32_t i = 0; i < snap->n_peers; ++i) in_flight += snap->peers[i].view.tx_unconfirmed_msgs;
  *st = imago_node_stats{im->shm->node_ids[index], c.msgs_sent, c.msgs_received, c.msgs_retransmitted,
                         c.pkts_sent, c.pkts_received, c.rejects() + snap->link.decode.total_rejected(),
                         c.ack_only_sent, c.nacks_sent, c.pkts_lost, c.rto_expired, c.resets, c.deaths,
                         c.discarded_msgs, in_flight};
  const imago::rel::GroupCounters& g = snap->group;
  st->group_msgs_sent = g.msgs_sent, st->group_data_frames = g.data_frames;
  st->group_unicast_copies = g.unicast_copies, st->group_repair_frames = g.repair_frames;
  st->group_expiries = g.expiries, st->group_msgs_received = g.msgs_received, st->group_nacks_sent = g.nacks_sent;
  st->group_nack_freed = g.nack_freed, st->group_units_lost = g.units_lost;
  st->msgs_by_ref = c.msgs_by_ref;
  st->msgs_no_endpoint = im->shm->no_endpoint[index].get();
  st->msgs_closed_unsent = im->shm->closed_unsent[index].get();
  st->msgs_closed_unreceived = im->shm->closed_unreceived[index].get();
  st->group_parity_sent = g.parity_sent, st->group_parity_rebuilt = g.parity_rebuilt;
  st->group_flight_cuts = g.flight_cuts;
  st->frames_not_allowed = snap->link.not_allowed + snap->link.spoofed;
  net_stats(*snap, st);
  fabric_stats(*snap, st);
  return 0;
}

int imago_open(imago_t* h, const char* name, uint64_t peer, const struct imago_ep_opts* opts,
               imago_ep_t** out) {
  if (name == nullptr || out == nullptr) return -EINVAL;
  size_t len = strnlen(name, IMAGO_NAME_MAX + 1);
  if (len == 0 || len > IMAGO_NAME_MAX) return -EINVAL;
  CtlMsg m{};
  m.peer = peer;
  m.group_flags = opts ? opts->flags : 0;  // IMAGO_EP_*: checked by the primary
  m.rx_inline = 1;
  std::memcpy(m.name, name, len);
  return open_slot(h, m, opts ? opts->local_node : 0, opts ? opts->ring_size : 0, out);
}

namespace {
/** @return true when @p h's node is a node of a multi-hop fabric (--topology), as its board says. */
bool on_fabric(imago_ep_t* h) {
  std::lock_guard<std::mutex> lock(g_ctl);
  const Endpoint* ep = ep_of(h);
  if (ep == nullptr) return false;
  thread_local dp::NodeSnapshot snap;  // 16 KiB: not on an application's stack
  return ep->att->shm->boards[ep->slot->node_index].read(&snap) && snap.fabric;
}
}  // namespace

int imago_group_open(imago_t* h, uint32_t group, const struct imago_group_opts* opts, imago_ep_t** out) {
  if (out == nullptr || group == 0) return -EINVAL;
  std::vector<imago::rel::NodeId> members;
  if (order_options(opts, members) < 0) return -EINVAL;
  const uint32_t flags = opts && opts->flags ? opts->flags : IMAGO_GROUP_SEND | IMAGO_GROUP_RECV;
  CtlMsg m{};
  m.group = group;
  m.group_flags = flags & ~kOrderFlags;  // the ordering is ours, above the engine's streams
  m.rx_inline = members.empty();  // an ordering holds what it receives: in pool buffers
  std::snprintf(m.name, sizeof m.name, "group-%u", group);
  int rc = open_slot(h, m, opts ? opts->local_node : 0, opts ? opts->ring_size : 0, out);
  if (rc < 0 || members.empty()) return rc;
  if (on_fabric(*out)) {  // its members reach one another over circuits: no ordering there yet
    imago_close(*out), *out = nullptr;
    return -ENOTSUP;
  }
  auto ord = std::make_unique<Ordered>();
  {
    std::lock_guard<std::mutex> lock(g_ctl);
    Endpoint* ep = ep_of(*out);
    ord->ep = ep;
    const auto mode = flags & IMAGO_GROUP_CAUSAL ? order::Mode::kCausal : order::Mode::kTotal;
    const uint32_t window = opts->order_window ? opts->order_window : kDefaultOrderWindow;
    const auto self = static_cast<imago::rel::NodeId>(ep->att->shm->node_ids[ep->slot->node_index]);
    rc = ord->order.init(mode, members, self, window, 256, ord.get());
    if (rc == 0) {
      const ShmRoot* shm = ep->att->shm;
      const uint32_t share = BigLedger::share(shm->big_pool->size, send_reserve(shm->big_pool), shm->n_nodes);
      ord->order.limit_big(GroupOrder::big_window(mode, static_cast<uint32_t>(members.size()), share));
      ep->ord = std::move(ord);
    }
  }
  if (rc < 0) imago_close(*out), *out = nullptr;  // this node is not among the members
  return rc < 0 ? -EINVAL : 0;
}

uint32_t imago_ep_group(const imago_ep_t* h) {
  const Endpoint* ep = ep_of(h);
  return ep ? ep->slot->group : 0;
}

namespace {

// imago_close(); @p force (the detach): close even if another thread stays inside a call.
int close_endpoint(imago_ep_t* h, bool force) {
  std::lock_guard<std::mutex> lock(g_ctl);
  Endpoint* ep = ep_of(h);
  if (ep == nullptr) return -EINVAL;
  if (!claim_for_close(ep) && !force) return -EBUSY;
  if (ep->ord && is_open(ep)) ep->ord->order.clear();  // give back what the ordering held
  pool_caches_free(ep->slot->app_caches);  // before the slot can pass to anyone else
  CtlMsg m{};
  m.op = CtlOp::kClose;
  m.slot = ep->index;
  int rc = control(ep->att, m);
  ep->ord.reset();  // what it held was loaned from the slot, which the close reclaims
  g_eps.remove(reinterpret_cast<uintptr_t>(h));
  return rc == -ETIMEDOUT ? rc : 0;
}

}  // namespace

int imago_close(imago_ep_t* h) { return close_endpoint(h, false); }

int imago_send(imago_ep_t* ep, const void* data, uint32_t len, uint32_t flags) {
  imago_iov one{data, len};
  int rc = imago_send_burst(ep, &one, 1, flags);
  return rc == 1 ? 0 : rc == 0 ? -EAGAIN : rc;
}

int imago_send_burst(imago_ep_t* h, const struct imago_iov* msgs, unsigned n, uint32_t flags) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr || (msgs == nullptr && n > 0) || (flags & ~kKnownFlags) || ep->recv_only) return -EINVAL;
  const InCall in(ep, h);
  if (int rc = in.error()) return rc;
  if (!is_open(ep) || known_lost(ep->att)) return -ENOTCONN;  // never taken, once told it is gone
  if (n == 0) return 0;
  if (ep->ord) return ordered_send(ep, msgs, n, flags);
  // Reserve room on the tx ring (we are its only producer) and describe the messages straight
  // into it: no local batch, no second copy. The ring may wrap: two spans. A message of up to
  // IMAGO_SEND_INLINE_MAX bytes goes on in the slots after its descriptor: no pool buffer.
  unsigned want = 0;
  for (unsigned i = 0; i < n; ++i) want += tx_slots(msgs[i].len);
  rte_ring_zc_data zcd{};
  const unsigned room = rte_ring_enqueue_zc_burst_elem_start(ep->tx, sizeof(imago_msg), want, &zcd, nullptr);
  if (room < want) ep->slot->tx_ring_full.add();
  const uint64_t peer = ep->slot->peer;
  const uint32_t max = ep->slot->max_message.load(std::memory_order_relaxed);
  const TierSide t = side(ep);
  unsigned done = 0, used = 0;
  int rc = 0;
  for (; done < n; ++done) {
    const imago_iov& m = msgs[done];
    const unsigned k = tx_slots(m.len);
    if (used + k > room) break;  // back-pressure: the rest later
    imago_msg& d = zc_slot(zcd, used);
    rc = (m.data == nullptr && m.len > 0) ? -EINVAL
         : m.len > max                    ? -EMSGSIZE
         : k > 1 ? (describe_ring_zc(zcd, used, peer, m.data, m.len, static_cast<uint16_t>(flags)), 0)
                 : describe_send_copy(t, peer, m.data, m.len, static_cast<uint16_t>(flags), d);
    if (rc < 0) [[unlikely]]
      break;
    used += k;
  }
  if (room > 0) rte_ring_enqueue_zc_elem_finish(ep->tx, used);  // fewer than reserved: the rest is unreserved
  if (rc == -EAGAIN && room >= want) ep->slot->tx_ring_full.add();  // room on the ring, no pool buffer
  const bool pushed_back = rc == 0 || rc == -EAGAIN;  // no room on the ring, or no pool buffer
  // Nothing taken: nothing moves (a dead imagod frees no ring slot, nor the buffers its
  // engine held).
  if (done == 0 && pushed_back && primary_lost(ep->att)) return -ENOTCONN;
  return done > 0 || pushed_back ? static_cast<int>(done) : rc;
}

int imago_buf_alloc(imago_ep_t* h, uint32_t len, void** buf) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr || buf == nullptr || ep->recv_only) return -EINVAL;
  if (ep->ord) return -ENOTSUP;  // the ordering header goes in front: imago_send() copies
  const InCall in(ep, h);
  if (int rc = in.error()) return rc;
  if (known_lost(ep->att)) return -ENOTCONN;  // as the sends say, once told imagod is gone
  if (len > ep->slot->max_message.load(std::memory_order_relaxed)) return -EMSGSIZE;
  // The loans past IMAGO_BUF_HELD_MAX stay for sends by copy: buffers held for good would take
  // them all, and a copy refused -EAGAIN for want of a loan waits for ever.
  if (ep->bufs_held >= IMAGO_BUF_HELD_MAX) return -ENOSPC;
  int err;
  void* b = alloc_send_buffer(side(ep), len, &err);
  if (b == nullptr && err == -EAGAIN) {
    if (primary_lost(ep->att)) return -ENOTCONN;
    ep->slot->tx_ring_full.add();  // back-pressure on a send, as imago_send() counts it
  }
  if (b == nullptr) return err;
  ++ep->bufs_held;
  *buf = b;
  return 0;
}

int imago_send_zc(imago_ep_t* h, void* buf, uint32_t len, uint32_t flags) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr || (flags & ~kKnownFlags) || ep->recv_only) return -EINVAL;
  if (ep->ord) return -ENOTSUP;
  const InCall in(ep, h);
  if (int rc = in.error()) return rc;
  if (known_lost(ep->att)) return -ENOTCONN;
  // As imago_send(): a buffer allocated before the peer was ready may be larger than its
  // node takes (an outside tester: 0, then discarded in tx_invalid).
  if (len > ep->slot->max_message.load(std::memory_order_relaxed)) return -EMSGSIZE;
  const TierSide t = side(ep);
  imago_msg d;
  if (const int rc = describe_send_zc(t, buf, len, static_cast<uint16_t>(flags), d); rc < 0)
    return rc == -EMSGSIZE ? -EINVAL : bad_buffer(ep);  // a length too large is not counted
  if (!is_open(ep)) return undo_send_zc(t, d), -ENOTCONN;
  if (handoff_put(ep->tx, &d, 1) == 1) return --ep->bufs_held, 0;
  undo_send_zc(t, d);  // not taken: still the application's
  ep->slot->tx_ring_full.add();
  return primary_lost(ep->att) ? -ENOTCONN : -EAGAIN;
}

int imago_buf_free(imago_ep_t* h, void* buf) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr) return -EINVAL;
  const InCall in(ep, h);
  if (int rc = in.error()) return rc;
  if (free_send_buffer(side(ep), buf) != 0) return bad_buffer(ep);
  --ep->bufs_held;
  return 0;
}

int imago_recv_burst(imago_ep_t* h, struct imago_msg* msgs, unsigned n) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr || (msgs == nullptr && n > 0)) return -EINVAL;
  const InCall in(ep, h);
  if (int rc = in.error()) return rc;
  if (!is_open(ep)) return -ENOTCONN;
  if (ep->ord) {
    const int r = ep->ord->order.receive(msgs, n, [ep](imago_msg* in, unsigned k) { return handoff_get(ep->rx, in, k); });
    return r == 0 && n > 0 && primary_lost(ep->att) ? -ENOTCONN : r;
  }
  const unsigned got = receive(ep, msgs, n);
  return got == 0 && n > 0 && primary_lost(ep->att) ? -ENOTCONN : static_cast<int>(got);
}

int imago_release(imago_ep_t* h, struct imago_msg* msgs, unsigned n) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr || (msgs == nullptr && n > 0)) return -EINVAL;
  const InCall in(ep, h);
  if (int rc = in.error()) return rc;
  const unsigned refused = release_received(side(ep), msgs, n);
  if (refused > 0) ep->slot->release_invalid.add(refused);
  return static_cast<int>(refused);
}

int imago_poll(imago_ep_t* h) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr) return -EINVAL;
  if (ep->ord) return static_cast<int>(rte_ring_count(ep->rx) + ep->ord->order.ready());
  // Messages, not ring slots (a medium one takes several): what the engine put, less what
  // this application took.
  return static_cast<int>(ep->slot->c.rx_put.v.load(std::memory_order_acquire) - ep->rx_got);
}

int imago_wait(imago_ep_t* h, int64_t timeout_us) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr) return -EINVAL;
  using clock = std::chrono::steady_clock;
  const auto end = timeout_us < 0 ? clock::time_point::max() : clock::now() + std::chrono::microseconds(timeout_us);
  // Run-to-completion: nothing moves unless this thread polls the engines.
  Runtime* const rtc = ep->att->rt && ep->att->rt->inline_engines() ? ep->att->rt.get() : nullptr;
  for (unsigned spins = 0;; ++spins) {
    if (rtc != nullptr) rtc->poll_inline();
    if (rte_ring_count(ep->rx) > 0 || (ep->ord && ep->ord->order.ready() > 0)) return 1;
    if (!is_open(ep) || primary_lost(ep->att)) return -ENOTCONN;
    if (clock::now() >= end) return 0;
    if (spins < 2000) {
      rte_pause();  // a message due within microseconds is caught without a wake-up
    } else {
      // Quiet: an ordered endpoint tells its sources how far it is (no receive call will,
      // and a source may wait for that to send on or to close).
      if (spins == 2000 && ep->ord) {
        const InCall in(ep, h);
        if (in.error() == 0) ep->ord->order.idle();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

int imago_peer_ready(imago_ep_t* h) {
  Endpoint* ep = ep_of(h);
  if (ep == nullptr) return -EINVAL;
  if (primary_lost(ep->att)) return -ENOTCONN;
  return ep->slot->peer_ready.load(std::memory_order_acquire) ? 1 : 0;
}

uint32_t imago_max_message(const imago_ep_t* h) {
  const Endpoint* ep = ep_of(h);
  if (ep == nullptr) return 0;
  return ep->slot->max_message.load(std::memory_order_relaxed) - (ep->ord ? ep->ord->order.head_len() : 0);
}

int imago_stats(const imago_ep_t* h, struct imago_ep_stats* st) {
  const Endpoint* ep = ep_of(h);
  if (ep == nullptr || st == nullptr) return -EINVAL;
  const EndpointSlot& s = *ep->slot;
  const EngineSideCounters& c = s.c;
  // msgs_sent first: what the engine published before it (group_pending) is then as new.
  const uint64_t sent = c.msgs_sent.get();
  std::atomic_thread_fence(std::memory_order_acquire);
  *st = imago_ep_stats{
      sent,                 c.bytes_sent.get(), c.msgs_received.get(), c.bytes_received.get(),
      c.tx_inline.get(),    c.tx_pool.get(),    c.tx_zero_copy.get(),  c.rx_inline.get(),
      c.rx_pool.get(),      c.rx_mbuf.get(),    s.tx_ring_full.get(),  c.rx_ring_full.get(),
      c.rx_no_buffer.get(), c.tx_invalid.get(), rte_ring_count(ep->tx), rte_ring_count(ep->rx),
      s.peer_ready.load(std::memory_order_acquire), 0, s.release_invalid.get(), s.buffer_invalid.get(),
      c.peer_resets.get(), c.peer_deaths.get(), c.msgs_unconfirmed.get(), c.last_unconfirmed_first.get(),
      c.last_unconfirmed_count.get(), c.rx_rebuilt.get(), c.events.get(), c.events_lost.get(),
      static_cast<uint32_t>(c.group_members.get()), static_cast<uint32_t>(c.group_view.get()), c.group_pending.get(),
      0, 0, 0, 0, 0, 0, s.rx_copy_full.get(), s.calls_busy.get()};
  if (ep->ord) {
    const OrderCounters& o = ep->ord->order.counters();
    st->order_held = ep->ord->order.held(), st->order_bad = o.bad, st->order_records = o.records;
    st->order_departed = o.departed, st->order_pending = ep->ord->order.pending();
    st->order_dropped = ep->ord->order.dropped();
  }
  return 0;
}

const char* imago_ep_name(const imago_ep_t* h) {
  const Endpoint* ep = ep_of(h);
  return ep ? ep->slot->name : nullptr;
}

uint64_t imago_ep_peer(const imago_ep_t* h) {
  const Endpoint* ep = ep_of(h);
  return ep ? ep->slot->peer : 0;
}

}  // extern "C"
