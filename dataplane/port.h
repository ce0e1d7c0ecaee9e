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

#include "dataplane/encap_headers.h"

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
 * @return the mbuf data room for frames of up to @p frame bytes: DPDK's default, or more for
 * jumbo frames. net_af_packet wants room for its whole ring frame (framesz less its header), a
 * little more than the frame the kernel fills in.
 */
uint16_t mbuf_room_for(size_t frame);

/**
 * Create a packet mbuf pool of @p n mbufs of @p data_room bytes on @p socket; @p packed puts
 * them back to back, across page boundaries (no IOVA-contiguous objects: not for a NIC's DMA).
 * @return the pool, or nullptr with rte_errno set (ENOMEM, EEXIST, EINVAL) after logging.
 */
rte_mempool* create_mbuf_pool(const std::string& name, unsigned n, uint16_t data_room, int socket,
                              bool packed = false);

/** @return the driver name of port @p port_id, e.g. "net_af_xdp"; "unknown" without one. */
std::string port_driver(uint16_t port_id);

/**
 * @name Holding DPDK's interrupt thread
 * DPDK runs PMD control callbacks on one thread, "eal-intr-thread". net_memif (DPDK 22.11)
 * handles its control socket there, and two of its paths crash a process that is polling or
 * ending (issue #9, item 14; reproducer: scripts/repro-memif-exit.sh):
 *  - when the peer leaves (its DISCONNECT message, or EOF when it exits),
 *    memif_intr_handler() -> memif_disconnect() -> memif_free_regions() munmap()s the rings
 *    and rte_free()s the regions with no lock against eth_memif_rx()/eth_memif_tx(), whose
 *    "connected?" check is not atomic with their ring accesses: an lcore inside a burst
 *    faults in librte_net_memif.so. The same memif_disconnect() may also run on the
 *    interrupt thread while rte_eth_dev_stop() runs it on ours (both unlocked past cc_lock).
 *  - rte_eth_dev_close() of a server (memif_socket_remove_device()) frees the listener
 *    socket but leaves its interrupt source registered; once rte_eal_cleanup() has unmapped
 *    the heap, the thread faults in rte_intr_fd_get() the next time it wakes.
 * Holding the thread parked in a callback of ours (an eventfd of type RTE_INTR_HANDLE_EXT)
 * keeps every other callback from running until release: a callback already running
 * finishes first, later events wait. While held, a memif port neither connects nor notices
 * its peer leaving (the rings stay mapped: the peer's departure only stops the traffic), so
 * hold it once the link is up and while lcores poll, and from the port's stop to the end of
 * the process. Control path; the functions may be called from any thread but not
 * concurrently with each other.
 * @{
 */
/**
 * Park the interrupt thread and return once it is parked (or already was); with
 * @p timeout_ms 0, ask and return at once (a later call or intr_thread_held() tells).
 * @return 0; -ETIMEDOUT when it did not park within @p timeout_ms (a long callback: it parks
 *         when that ends); another negative errno when the hold cannot be set up (EAL down).
 */
int hold_intr_thread(unsigned timeout_ms = 1000);
/** Let the interrupt thread run again (no-op when not held). */
void release_intr_thread();
/** @return true while the interrupt thread is parked by hold_intr_thread(). */
bool intr_thread_held();
/** @} */

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
  /**
   * Stop the port (idempotent). Stop the lcores polling it first. A port whose driver tears
   * down on the interrupt thread (control_on_intr_thread()) holds that thread first and
   * leaves it held for the rest of the process (see hold_intr_thread()).
   * @return 0 or a negative errno.
   */
  int stop();
  /** Stop and close the port, releasing the device (idempotent); the same hold as stop().
   *  @return 0 or a negative errno. */
  int close();
  /**
   * @return true when the driver runs its control channel on DPDK's interrupt thread and
   * tears the port down there when the peer leaves (net_memif): poll it only while that
   * thread is held (hold_intr_thread()) once the link is up.
   */
  bool control_on_intr_thread() const { return intr_control_; }

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
  /**
   * The largest frame the device's own buffers take: net_af_packet's ring frame (its framesz
   * devarg, 2048 by default) less its header room; 0 when not limited so (other PMDs).
   */
  uint32_t ring_frame_limit() const;

 private:
  int setup_queues();

  uint16_t id_ = 0;
  PortConfig cfg_{};
  rte_mempool* pool_ = nullptr;
  bool configured_ = false;
  bool started_ = false;
  bool promisc_before_ = true;  // the interface's promiscuous flag when opened
  bool unset_promisc_ = false;  // we set the interface promiscuous: clear it again at stop
  bool intr_control_ = false;  // net_memif: see control_on_intr_thread()
};

}  // namespace imago::dp
