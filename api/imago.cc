// SPDX-License-Identifier: BSD-3-Clause
// The C API: attachments and endpoints over the shared table, the rings and the pools.
#include "api/imago.h"

#include <rte_eal.h>
#include <rte_memzone.h>
#include <rte_pause.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "api/buffers.h"
#include "api/control.h"
#include "api/handoff.h"
#include "api/runtime.h"
#include "dataplane/eal.h"

using namespace imago::api;
namespace dp = imago::dp;

struct imago_attachment {
  std::unique_ptr<Runtime> rt;  // embedded; null for a secondary process
  ShmRoot* shm = nullptr;
  std::vector<imago_ep*> eps;
};

struct imago_ep {
  imago_t* im;
  EndpointSlot* slot;
  uint32_t index;
  rte_ring* rx;
  rte_ring* tx;
};

namespace {

bool g_attached = false;  // EAL starts once per process

int control(imago_t* im, CtlMsg& m) {
  if (!im->rt) return ctl_request(m);
  im->rt->housekeeping();  // finish closes that timed out (no daemon loop here)
  m.version = kShmVersion;
  m.pid = getpid();
  switch (m.op) {
    case CtlOp::kOpen: return im->rt->open_endpoint(m);
    case CtlOp::kClose: return im->rt->close_endpoint(m.slot);
    default: return 0;
  }
}

bool is_open(const imago_ep* ep) { return ep->slot->state.load(std::memory_order_acquire) == SlotState::kOpen; }

constexpr uint32_t kKnownFlags = IMAGO_FASTPATH | IMAGO_ACK_REQ;

uint32_t& loan_of(void* obj) { return *static_cast<uint32_t*>(obj); }  // headroom bytes 0..3

// A pool buffer for @p len bytes, recorded as lent to the engine. @return it, or nullptr
// with *loan = LoanTable::kNone (every loan slot taken) or 0 (pool empty).
void* lend_tx_buffer(imago_ep* ep, uint32_t len, uint32_t* loan) {
  *loan = 0;
  void* obj = buffer_get(ep->im->shm->pool_for(len), &ep->slot->app_caches);
  if (obj == nullptr) return nullptr;
  *loan = ep->slot->tx_loans.lend(obj);
  if (*loan != LoanTable::kNone) return obj;
  buffer_put(obj, &ep->slot->app_caches);
  return nullptr;
}

// Copy @p len <= IMAGO_MSG_INLINE_MAX bytes with fixed-size (overlapping) moves the compiler
// turns into a few loads and stores, instead of a call to memcpy for every small message.
inline void copy_inline(uint8_t* to, const uint8_t* from, uint32_t len) {
  if (len >= 16) {
    std::memcpy(to, from, 16);
    if (len > 32) std::memcpy(to + 16, from + 16, 16);
    std::memcpy(to + len - 16, from + len - 16, 16);
  } else if (len >= 8) {
    std::memcpy(to, from, 8);
    std::memcpy(to + len - 8, from + len - 8, 8);
  } else if (len >= 4) {
    std::memcpy(to, from, 4);
    std::memcpy(to + len - 4, from + len - 4, 4);
  } else if (len > 0) {
    to[0] = from[0];
    to[len / 2] = from[len / 2];
    to[len - 1] = from[len - 1];
  }
}

// Describe one message to send by copy (in @p d, which may be ring memory: every field is
// written). @return 0, -EAGAIN (no buffer now).
inline int fill_copy(imago_ep* ep, uint64_t peer, const void* data, uint32_t len, uint32_t flags, imago_msg& d) {
  d.src = peer;
  d.len = len;
  d.flags = static_cast<uint16_t>(flags);
  d.reserved = 0;
  if (len <= IMAGO_MSG_INLINE_MAX) [[likely]] {
    d.tier = IMAGO_TIER_INLINE;
    copy_inline(d.u.inline_data, static_cast<const uint8_t*>(data), len);
    return 0;
  }
  uint32_t loan;
  void* obj = lend_tx_buffer(ep, len, &loan);
  if (obj == nullptr) return -EAGAIN;
  auto* buf = static_cast<uint8_t*>(obj) + kHeadroom;
  std::memcpy(buf, data, len);
  d.tier = IMAGO_TIER_POOL;
  d.u.ext = {buf, obj, loan};
  return 0;
}

// @return the pool object behind @p buf if it is a buffer this endpoint lent, else nullptr.
void* own_buffer(imago_ep* ep, void* buf) {
  if (buf == nullptr) return nullptr;
  void* obj = static_cast<uint8_t*>(buf) - kHeadroom;
  return ep->slot->tx_loans.peek(loan_of(obj)) == obj ? obj : nullptr;
}

int attach_done(imago_t* im, imago_t** out) {
  g_attached = true;
  *out = im;
  return 0;
}

}  // namespace

extern "C" {

int imago_attach_embedded(int argc, char** argv, imago_t** out) {
  if (out == nullptr) return -EINVAL;
  if (g_attached) return -EALREADY;
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
  auto im = std::make_unique<imago_attachment>();
  im->rt = std::make_unique<Runtime>();
  if (int rc = im->rt->start(o, args, false); rc < 0) {
    im->rt->stop();
    return rc;
  }
  im->shm = im->rt->shm();
  return attach_done(im.release(), out);
}

int imago_attach_secondary(const char* file_prefix, imago_t** out) {
  if (out == nullptr) return -EINVAL;
  if (g_attached) return -EALREADY;
  std::string prefix = file_prefix ? file_prefix : "imago";
  // The application's thread is lcore 0 but may run on any CPU: several applications and
  // imagod's control thread share the machine, and pinning them all to one CPU starves them.
  unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  std::string lcores = "0@(0-" + std::to_string(ncpu - 1) + ")";
  if (dp::eal_start("imago-app", {"--proc-type=secondary", "--file-prefix", prefix, "--no-pci",
                                  "--no-telemetry", "--lcores", lcores, "--log-level=lib.*:warning"}) < 0) {
    return -EIO;
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
  auto* im = new imago_attachment();
  im->shm = shm;
  return attach_done(im, out);
}

int imago_detach(imago_t* im) {
  if (im == nullptr) return -EINVAL;
  while (!im->eps.empty()) imago_close(im->eps.back());
  if (im->rt) {
    im->rt->stop();
  } else {
    rte_eal_cleanup();
  }
  delete im;
  g_attached = false;
  return 0;
}

unsigned imago_node_count(const imago_t* im) { return im ? im->shm->n_nodes : 0; }

uint64_t imago_node_id(const imago_t* im, unsigned index) {
  return im && index < im->shm->n_nodes ? im->shm->node_ids[index] : 0;
}

int imago_open(imago_t* im, const char* name, uint64_t peer, const struct imago_ep_opts* opts,
               imago_ep_t** out) {
  if (im == nullptr || name == nullptr || out == nullptr) return -EINVAL;
  size_t len = strnlen(name, IMAGO_NAME_MAX + 1);
  if (len == 0 || len > IMAGO_NAME_MAX) return -EINVAL;
  CtlMsg m{};
  m.op = CtlOp::kOpen;
  m.node = opts ? opts->local_node : 0;
  m.ring_size = opts ? opts->ring_size : 0;
  m.peer = peer;
  std::memcpy(m.name, name, len);
  if (int rc = control(im, m); rc < 0) return rc;
  EndpointSlot* s = &im->shm->slots[m.slot];
  // This thread's buffer caches; without them (no memory) every buffer goes to the pool ring.
  if (pool_caches_create(s->app_caches, im->shm->msg_pool, im->shm->frame_pool) < 0)
    s->app_caches = PoolCaches{};
  auto* ep = new imago_ep{im, s, m.slot, s->rx, s->tx};
  im->eps.push_back(ep);
  *out = ep;
  return 0;
}

int imago_close(imago_ep_t* ep) {
  if (ep == nullptr) return -EINVAL;
  pool_caches_free(ep->slot->app_caches);  // before the slot can pass to anyone else
  CtlMsg m{};
  m.op = CtlOp::kClose;
  m.slot = ep->index;
  int rc = control(ep->im, m);
  auto& eps = ep->im->eps;
  eps.erase(std::remove(eps.begin(), eps.end(), ep), eps.end());
  delete ep;
  return rc == -ETIMEDOUT ? rc : 0;
}

int imago_send(imago_ep_t* ep, const void* data, uint32_t len, uint32_t flags) {
  imago_iov one{data, len};
  int rc = imago_send_burst(ep, &one, 1, flags);
  return rc == 1 ? 0 : rc == 0 ? -EAGAIN : rc;
}

int imago_send_burst(imago_ep_t* ep, const struct imago_iov* msgs, unsigned n, uint32_t flags) {
  if (ep == nullptr || (msgs == nullptr && n > 0) || (flags & ~kKnownFlags)) return -EINVAL;
  if (!is_open(ep)) return -ENOTCONN;
  if (n == 0) return 0;
  // Reserve room on the tx ring (we are its only producer) and describe the messages straight
  // into it: no local batch, no second copy. The ring may wrap: two spans.
  rte_ring_zc_data zcd;
  const unsigned room = rte_ring_enqueue_zc_burst_elem_start(ep->tx, sizeof(imago_msg), n, &zcd, nullptr);
  if (room < n) ep->slot->tx_ring_full.add();
  const uint64_t peer = ep->slot->peer;
  const uint32_t max = ep->im->shm->max_message;
  unsigned done = 0;
  int rc = 0;
  for (; done < room; ++done) {
    imago_msg& d = done < zcd.n1 ? static_cast<imago_msg*>(zcd.ptr1)[done]
                                 : static_cast<imago_msg*>(zcd.ptr2)[done - zcd.n1];
    const imago_iov& m = msgs[done];
    rc = (m.data == nullptr && m.len > 0) ? -EINVAL
         : m.len > max                    ? -EMSGSIZE
                                          : fill_copy(ep, peer, m.data, m.len, flags, d);
    if (rc < 0) [[unlikely]]
      break;
  }
  if (room > 0) rte_ring_enqueue_zc_elem_finish(ep->tx, done);  // fewer than reserved: the rest is unreserved
  return done > 0 || rc == 0 || rc == -EAGAIN ? static_cast<int>(done) : rc;
}

int imago_buf_alloc(imago_ep_t* ep, uint32_t len, void** buf) {
  if (ep == nullptr || buf == nullptr) return -EINVAL;
  if (len > ep->im->shm->max_message) return -EMSGSIZE;
  uint32_t loan;
  void* obj = lend_tx_buffer(ep, len, &loan);
  if (obj == nullptr) return loan == LoanTable::kNone ? -ENOSPC : -EAGAIN;
  loan_of(obj) = loan;
  *buf = static_cast<uint8_t*>(obj) + kHeadroom;
  return 0;
}

int imago_send_zc(imago_ep_t* ep, void* buf, uint32_t len, uint32_t flags) {
  if (ep == nullptr || (flags & ~kKnownFlags)) return -EINVAL;
  void* obj = own_buffer(ep, buf);
  if (obj == nullptr || len > rte_mempool_from_obj(obj)->elt_size - kHeadroom) return -EINVAL;
  if (!is_open(ep)) return -ENOTCONN;
  imago_msg d;
  d.src = ep->slot->peer;
  d.len = len;
  d.flags = static_cast<uint16_t>(flags);
  d.tier = IMAGO_TIER_POOL;
  d.reserved = 1;  // zero-copy, for the tier counters
  d.u.ext = {buf, obj, loan_of(obj)};
  if (handoff_put(ep->tx, &d, 1) == 1) return 0;
  ep->slot->tx_ring_full.add();
  return -EAGAIN;
}

int imago_buf_free(imago_ep_t* ep, void* buf) {
  if (ep == nullptr) return -EINVAL;
  void* obj = own_buffer(ep, buf);
  if (obj == nullptr) return -EINVAL;
  if (void* o = ep->slot->tx_loans.take(loan_of(obj))) buffer_put(o, &ep->slot->app_caches);
  return 0;
}

int imago_recv_burst(imago_ep_t* ep, struct imago_msg* msgs, unsigned n) {
  if (ep == nullptr || (msgs == nullptr && n > 0)) return -EINVAL;
  if (!is_open(ep)) return -ENOTCONN;
  return static_cast<int>(handoff_get(ep->rx, msgs, n));
}

void imago_release(imago_ep_t* ep, struct imago_msg* msgs, unsigned n) {
  if (ep == nullptr || msgs == nullptr) return;
  for (unsigned i = 0; i < n; ++i) {
    imago_msg& m = msgs[i];
    if (m.tier == IMAGO_TIER_INLINE) continue;  // nothing held: the common, cheap case
    void* expect = m.tier == IMAGO_TIER_MBUF ? tag_mbuf(static_cast<rte_mbuf*>(m.u.ext.owner)) : m.u.ext.owner;
    // Only what this endpoint lent, once: a stale or forged descriptor frees nothing.
    if (ep->slot->rx_loans.peek(m.u.ext.loan) == expect)
      if (void* o = ep->slot->rx_loans.take(m.u.ext.loan)) put_loaned(o, &ep->slot->app_caches);
    m.tier = IMAGO_TIER_INLINE;
  }
}

int imago_poll(imago_ep_t* ep) {
  if (ep == nullptr) return -EINVAL;
  return static_cast<int>(rte_ring_count(ep->rx));
}

int imago_wait(imago_ep_t* ep, int64_t timeout_us) {
  if (ep == nullptr) return -EINVAL;
  using clock = std::chrono::steady_clock;
  const auto end = timeout_us < 0 ? clock::time_point::max() : clock::now() + std::chrono::microseconds(timeout_us);
  for (unsigned spins = 0;; ++spins) {
    if (rte_ring_count(ep->rx) > 0) return 1;
    if (!is_open(ep)) return -ENOTCONN;
    if (clock::now() >= end) return 0;
    if (spins < 2000) {
      rte_pause();  // a message due within microseconds is caught without a wake-up
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

int imago_peer_ready(imago_ep_t* ep) {
  if (ep == nullptr) return -EINVAL;
  return ep->slot->peer_ready.load(std::memory_order_acquire) ? 1 : 0;
}

uint32_t imago_max_message(const imago_ep_t* ep) { return ep ? ep->im->shm->max_message : 0; }

int imago_stats(const imago_ep_t* ep, struct imago_ep_stats* st) {
  if (ep == nullptr || st == nullptr) return -EINVAL;
  const EngineSideCounters& c = ep->slot->c;
  *st = imago_ep_stats{
      c.msgs_sent.get(),   c.bytes_sent.get(), c.msgs_received.get(), c.bytes_received.get(),
      c.tx_inline.get(),   c.tx_pool.get(),    c.tx_zero_copy.get(),  c.rx_inline.get(),
      c.rx_pool.get(),     c.rx_mbuf.get(),    ep->slot->tx_ring_full.get(), c.rx_ring_full.get(),
      c.rx_no_buffer.get(), c.tx_invalid.get(), rte_ring_count(ep->tx), rte_ring_count(ep->rx),
      ep->slot->peer_ready.load(std::memory_order_acquire), 0};
  return 0;
}

const char* imago_ep_name(const imago_ep_t* ep) { return ep ? ep->slot->name : nullptr; }
uint64_t imago_ep_peer(const imago_ep_t* ep) { return ep ? ep->slot->peer : 0; }

}  // extern "C"
