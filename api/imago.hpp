/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A thin C++ layer over imago.h: RAII for the attachment and endpoints, spans for bursts.
 * Errors stay negative errno values (no exceptions), as in the C API.
 */
#pragma once

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

  int send(std::span<const uint8_t> m, uint32_t flags = 0) {
    return imago_send(ep_, m.data(), static_cast<uint32_t>(m.size()), flags);
  }
  int send_burst(std::span<const imago_iov> ms, uint32_t flags = 0) {
    return imago_send_burst(ep_, ms.data(), static_cast<unsigned>(ms.size()), flags);
  }
  int recv(std::span<imago_msg> out) { return imago_recv_burst(ep_, out.data(), static_cast<unsigned>(out.size())); }
  /** @return descriptors refused (stale or forged), or -EINVAL: see imago_release(). */
  int release(std::span<imago_msg> ms) { return imago_release(ep_, ms.data(), static_cast<unsigned>(ms.size())); }
  int wait(int64_t timeout_us) { return imago_wait(ep_, timeout_us); }
  bool peer_ready() const { return imago_peer_ready(ep_) == 1; }
  int stats(imago_ep_stats& st) const { return imago_stats(ep_, &st); }
  int close() { return ep_ ? imago_close(std::exchange(ep_, nullptr)) : 0; }
  imago_ep_t* get() const { return ep_; }
  explicit operator bool() const { return ep_ != nullptr; }

 private:
  imago_ep_t* ep_ = nullptr;
};

class Attachment {
 public:
  /** Embedded: @p argc/@p argv as imago_attach_embedded(). @return 0 or a negative errno. */
  int embedded(int argc = 0, char** argv = nullptr) { return imago_attach_embedded(argc, argv, &im_); }
  /** Secondary process of the imagod with @p prefix. @return 0 or a negative errno. */
  int secondary(const char* prefix = nullptr) { return imago_attach_secondary(prefix, &im_); }
  ~Attachment() {
    if (im_) imago_detach(im_);
  }
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
