/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A thin C++ layer over imago.h: RAII for the attachment and endpoints, spans for bursts,
 * every C call a method of one of the two.
 * Errors stay negative errno values (no exceptions), as in the C API.
 */
#pragma once

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <span>
#include <utility>

#include "imago.h"

namespace imago {

/** An endpoint, owned: closed (imago_close()) when the object goes or is assigned another.
 *  Move-only. Not for several threads at once: closing, destroying or assigning the object
 *  while another thread calls one of its methods is a data race on its handle member
 *  (ThreadSanitizer reports it), whereas the C handle may be closed while another thread is
 *  inside a call on it (imago.h, imago_close()). To use one endpoint from several threads
 *  (one at a time, as imago.h's "Threads" says), give them the handle from get() and call
 *  imago.h on it; one owner keeps and closes the object (their later calls are refused with
 *  -EINVAL). */
class Endpoint {
 public:
  Endpoint() = default;
  /** Adopts @p ep (from imago_open() or imago_group_open()): this object closes it. */
  explicit Endpoint(imago_ep_t* ep) : ep_(ep) {}
  Endpoint(Endpoint&& o) noexcept : ep_(std::exchange(o.ep_, nullptr)) {}
  Endpoint& operator=(Endpoint&& o) noexcept {
    if (this != &o) close(), ep_ = std::exchange(o.ep_, nullptr);
    return *this;
  }
  ~Endpoint() { close(); }

  /** As imago_send(); -EMSGSIZE for a span of 4 GiB or more (never cut to 32 bits). */
  int send(std::span<const uint8_t> m, uint32_t flags = 0) {
    if (m.size() > UINT32_MAX) return -EMSGSIZE;
    return imago_send(ep_, m.data(), static_cast<uint32_t>(m.size()), flags);
  }
  /** As imago_send_burst(): of a span longer than UINT_MAX, the first UINT_MAX at most. */
  int send_burst(std::span<const imago_iov> ms, uint32_t flags = 0) {
    return imago_send_burst(ep_, ms.data(), count(ms.size()), flags);
  }
  int recv(std::span<imago_msg> out) { return imago_recv_burst(ep_, out.data(), count(out.size())); }
  /** @return descriptors refused (stale or forged), or -EINVAL: see imago_release(). */
  int release(std::span<imago_msg> ms) {
    if (ms.size() > UINT_MAX) return -EINVAL;  // all must go back: refuse rather than cut
    return imago_release(ep_, ms.data(), count(ms.size()));
  }
  /** Zero-copy send, step 1, as imago_buf_alloc(): 0 and @p buf, or a negative errno. */
  int buf_alloc(uint32_t len, void*& buf) { return imago_buf_alloc(ep_, len, &buf); }
  /** Zero-copy send, step 2, as imago_send_zc(): on 0 the buffer is imago's. */
  int send_zc(void* buf, uint32_t len, uint32_t flags = 0) { return imago_send_zc(ep_, buf, len, flags); }
  /** As imago_buf_free(): a buffer from buf_alloc() that was not sent. */
  int buf_free(void* buf) { return imago_buf_free(ep_, buf); }
  /** As imago_poll(): messages ready now, or a negative errno. */
  int poll() { return imago_poll(ep_); }
  int wait(int64_t timeout_us) { return imago_wait(ep_, timeout_us); }
  /** As imago_peer_ready(): 1, 0, or a negative errno (-EINVAL, -ENOTCONN: imagod is gone).
   *  Wait with `== 1` (an error is not "not ready yet"). */
  int peer_ready() const { return imago_peer_ready(ep_); }
  int stats(imago_ep_stats& st) const { return imago_stats(ep_, &st); }
  uint32_t max_message() const { return imago_max_message(ep_); }
  /** The endpoint's name (NULL when empty), its peer node (0: a group endpoint), its group
   *  (0: a peer endpoint), as imago_ep_name(), imago_ep_peer(), imago_ep_group(). The name
   *  points into the endpoint's shared slot: valid until the endpoint is closed (the slot
   *  then serves the next endpoint opened); copy it to keep it. */
  const char* name() const { return imago_ep_name(ep_); }
  uint64_t peer() const { return imago_ep_peer(ep_); }
  uint32_t group() const { return imago_ep_group(ep_); }
  int close() { return ep_ ? imago_close(std::exchange(ep_, nullptr)) : 0; }
  /** The C handle, still this object's (it closes it): the one to share between threads. */
  imago_ep_t* get() const { return ep_; }
  explicit operator bool() const { return ep_ != nullptr; }

 private:
  static unsigned count(size_t n) { return static_cast<unsigned>(std::min<size_t>(n, UINT_MAX)); }
  imago_ep_t* ep_ = nullptr;
};

/** The process's attachment: detached when the object that holds it goes. Move-only: one
 *  owner (a copy would detach under the other, and a process attaches only once). */
class Attachment {
 public:
  Attachment() = default;
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;
  Attachment(Attachment&& o) noexcept : im_(std::exchange(o.im_, nullptr)) {}
  /** Takes @p o's attachment, detaching the one held before (if it is another). */
  Attachment& operator=(Attachment&& o) noexcept {
    if (this != &o) detach(), im_ = std::exchange(o.im_, nullptr);
    return *this;
  }
  /** Embedded: @p argc/@p argv as imago_attach_embedded(). The calling thread becomes EAL's
   *  main lcore, pinned to that lcore's CPU (CPU 0 by default); threads created afterwards
   *  inherit the affinity: create them before, or set theirs. @return 0 or a negative errno. */
  int embedded(int argc = 0, char** argv = nullptr) { return imago_attach_embedded(argc, argv, &im_); }
  /** Secondary process of the imagod with @p prefix. @return 0 or a negative errno. */
  int secondary(const char* prefix = nullptr) { return imago_attach_secondary(prefix, &im_); }
  ~Attachment() { detach(); }
  /** imago_detach() now (a no-op when empty). @return 0 or a negative errno. */
  int detach() { return im_ ? imago_detach(std::exchange(im_, nullptr)) : 0; }
  /** @return 0 and @p out, or a negative errno (see imago_open()). */
  int open(const char* name, uint64_t peer, Endpoint& out, const imago_ep_opts* opts = nullptr) {
    imago_ep_t* ep = nullptr;
    int rc = imago_open(im_, name, peer, opts, &ep);
    if (rc == 0) out = Endpoint(ep);
    return rc;
  }
  /** A group endpoint, as imago_group_open() (@p opts NULL: the defaults).
   *  @return 0 and @p out, or a negative errno. */
  int group_open(uint32_t group, Endpoint& out, const imago_group_opts* opts = nullptr) {
    imago_ep_t* ep = nullptr;
    int rc = imago_group_open(im_, group, opts, &ep);
    if (rc == 0) out = Endpoint(ep);
    return rc;
  }
  /** The nodes served: imago_node_count(), imago_node_id() (0 out of range). */
  unsigned node_count() const { return imago_node_count(im_); }
  uint64_t node_id(unsigned index) const { return imago_node_id(im_, index); }
  int node_stats(unsigned index, imago_node_stats& st) const {
    return imago_node_stats_get(im_, index, &st);
  }
  /** Run-to-completion: as imago_engine_poll() (-ENOTSUP with an engine lcore). */
  int engine_poll() { return imago_engine_poll(im_); }
  imago_t* get() const { return im_; }

 private:
  imago_t* im_ = nullptr;
};

}  // namespace imago
