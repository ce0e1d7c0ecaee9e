/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A thin C++ layer over imago.h: RAII for the attachment and endpoints, spans for bursts.
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

class Endpoint {
 public:
  Endpoint() = default;
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
  int wait(int64_t timeout_us) { return imago_wait(ep_, timeout_us); }
  /** As imago_peer_ready(): 1, 0, or a negative errno (-EINVAL, -ENOTCONN: imagod is gone).
   *  Wait with `== 1` (an error is not "not ready yet"). */
  int peer_ready() const { return imago_peer_ready(ep_); }
  int stats(imago_ep_stats& st) const { return imago_stats(ep_, &st); }
  int close() { return ep_ ? imago_close(std::exchange(ep_, nullptr)) : 0; }
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
  /** Embedded: @p argc/@p argv as imago_attach_embedded(). @return 0 or a negative errno. */
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
  imago_t* get() const { return im_; }

 private:
  imago_t* im_ = nullptr;
};

}  // namespace imago
