/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An ethdev port as imago uses it: configure, queues, start/stop/close, link status, MAC,
 * promiscuous and all-multicast, multicast address list. Works over any PMD.
 *
 * Control path: every function returns 0 or a negative errno and logs a clear message.
 */
#pragma once

#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <cstdint>
#include <span>
#include <string>

#include "dataplane/wire.h"

namespace imago::dp {

/** Port settings; defaults fit the no-hugepage embedded mode. */
struct PortConfig {
  uint16_t nb_rxq = 1;
  uint16_t nb_txq = 1;
  uint16_t nb_rxd = 1024;
  uint16_t nb_txd = 1024;
  uint16_t mtu = 0;            ///< 0 keeps the device default
  bool promiscuous = true;
  bool allmulticast = false;
};

/** Link state as reported by the PMD. */
struct LinkStatus {
  bool up = false;
  uint32_t speed_mbps = 0;
  bool full_duplex = false;
};

/**
 * Mbufs a port needs: every rx and tx descriptor, plus @p burst in flight per lcore and the
 * per-lcore mempool caches, plus @p extra held elsewhere (fault delay queue, app buffers).
 */
unsigned mbufs_needed(const PortConfig& cfg, unsigned nb_lcores, unsigned burst, unsigned cache,
                      unsigned extra);

/**
 * Create a packet mbuf pool of @p n mbufs of @p data_room bytes on @p socket.
 * @return the pool, or nullptr with rte_errno set (ENOMEM, EEXIST, EINVAL) after logging.
 */
rte_mempool* create_mbuf_pool(const std::string& name, unsigned n, uint16_t data_room, int socket);

/** One configured ethdev port. */
class Port {
 public:
  /**
   * Configure port @p port_id with @p cfg, rx queues drawing from @p pool. Does not start it.
   * @return 0; -ENODEV (no such port), -EINVAL (queue or descriptor counts the device
   *         refuses), -ENOMEM, or another negative errno from the PMD.
   */
  int open(uint16_t port_id, const PortConfig& cfg, rte_mempool* pool);
  /** Start the port and apply promiscuous/all-multicast. @return 0 or a negative errno. */
  int start();
  /** Stop the port (idempotent). @return 0 or a negative errno. */
  int stop();
  /** Stop and close the port, releasing the device (idempotent). @return 0 or a negative errno. */
  int close();

  /** @return 0 with @p out filled, or a negative errno. @p wait_ms > 0 waits for link up. */
  int link(LinkStatus& out, unsigned wait_ms = 0) const;
  /** @return the port's MAC address. */
  MacAddr mac() const;
  /** @return 0, -ENOTSUP or another negative errno. */
  int set_promiscuous(bool on);
  /** @return 0, -ENOTSUP or another negative errno. */
  int set_allmulticast(bool on);
  /** Replace the multicast filter list. @return 0, -ENOTSUP, -EINVAL or another errno. */
  int set_mc_addrs(std::span<const MacAddr> addrs);

  uint16_t id() const { return id_; }
  rte_mempool* pool() const { return pool_; }
  const PortConfig& config() const { return cfg_; }
  /** @return the device's driver name, e.g. "net_ring". */
  std::string driver() const;
  /**
   * The largest IP MTU the link carries: the kernel interface's for a device backed by one
   * (net_af_packet reports a fixed 1500 to ethdev but carries what its interface and its
   * framesz devarg allow), else ethdev's. Control path (an ioctl).
   * @return the MTU, or 0 when the device has none (net_ring).
   */
  uint32_t link_mtu() const;

 private:
  int setup_queues();

  uint16_t id_ = 0;
  PortConfig cfg_{};
  rte_mempool* pool_ = nullptr;
  bool configured_ = false;
  bool started_ = false;
};

}  // namespace imago::dp
