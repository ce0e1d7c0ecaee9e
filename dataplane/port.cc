// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/port.h"

#include <net/if.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_interrupts.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dataplane/eal.h"
#include "dataplane/if_state.h"
#include "dataplane/log.h"

namespace imago::dp {
namespace {

int fail(uint16_t port, const char* what, int rc) {
  IMAGO_LOG(ERR, dataplane, "port %u: %s failed: %s\n", port, what, rte_strerror(-rc));
  return rc;
}

// The interrupt-thread hold (port.h): park() runs on "eal-intr-thread" when kick_fd is
// readable and blocks there reading release_fd. Set up once and never torn down: the thread
// may stay parked until the process ends, past rte_eal_cleanup(), so nothing here lives in
// DPDK's heap (a private interrupt instance is malloc()ed) or has a destructor.
enum : int { kFree = 0, kRequested = 1, kParked = 2 };

struct IntrHold {
  rte_intr_handle* handle = nullptr;
  int kick_fd = -1;     // EFD_NONBLOCK: park() consumes it; RTE_INTR_HANDLE_EXT reads nothing
  int release_fd = -1;  // blocking: park() waits here
  std::atomic<int> state{kFree};
};

IntrHold& intr_hold() {
  static IntrHold* h = new IntrHold;  // never freed: the parked thread may outlive main()
  return *h;
}

// States: kFree -> kRequested (hold: kick) -> kParked (here) -> kFree (release: wake up); a
// release before the thread got here takes kRequested back to kFree and park() returns.
void park(void* arg) {
  auto* h = static_cast<IntrHold*>(arg);
  uint64_t v;
  if (read(h->kick_fd, &v, sizeof v) < 0) return;  // nothing asked (EAGAIN)
  int requested = kRequested;
  if (!h->state.compare_exchange_strong(requested, kParked, std::memory_order_acq_rel)) return;
  while (read(h->release_fd, &v, sizeof v) < 0 && errno == EINTR) {
  }
}

// rte_intr_instance_alloc() and its setters are experimental in DPDK 22.11 (the only way to
// build a handle since 21.11 made it opaque); net_memif itself uses them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
int intr_hold_setup(IntrHold& h) {
  if (h.handle) return 0;
  h.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  h.release_fd = eventfd(0, EFD_CLOEXEC);
  rte_intr_handle* ih = nullptr;
  int rc = 0;
  if (h.kick_fd < 0 || h.release_fd < 0) {
    rc = -errno;
  } else if ((ih = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE)) == nullptr) {
    rc = -ENOMEM;
  } else if (rte_intr_fd_set(ih, h.kick_fd) != 0 || rte_intr_type_set(ih, RTE_INTR_HANDLE_EXT) != 0) {
    rc = -EINVAL;
  } else {
    rc = rte_intr_callback_register(ih, park, &h);
  }
  if (rc < 0) {
    IMAGO_LOG(ERR, dataplane, "cannot hold the interrupt thread: %s\n", rte_strerror(-rc));
    rte_intr_instance_free(ih);
    for (int* fd : {&h.kick_fd, &h.release_fd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    return rc;
  }
  h.handle = ih;
  return 0;
}
#pragma GCC diagnostic pop

}  // namespace

int hold_intr_thread(unsigned timeout_ms) {
  IntrHold& h = intr_hold();
  if (h.state.load(std::memory_order_acquire) == kParked) return 0;
  if (int rc = intr_hold_setup(h); rc < 0) return rc;
  int state = kFree;  // else kRequested (its kick is pending) or kParked meanwhile
  if (h.state.compare_exchange_strong(state, kRequested, std::memory_order_acq_rel)) {
    uint64_t one = 1;
    if (write(h.kick_fd, &one, sizeof one) < 0) {
      int rc = -errno;
      h.state.store(kFree, std::memory_order_release);
      return rc;
    }
  }
  // The thread parks once the callback it may be running returns: microseconds, or as long
  // as a PMD callback takes.
  for (unsigned waited_us = 0; h.state.load(std::memory_order_acquire) != kParked; waited_us += 100) {
    if (waited_us >= timeout_ms * 1000u) {
      if (timeout_ms > 0) {
        IMAGO_LOG(WARNING, dataplane, "the interrupt thread did not park within %u ms\n", timeout_ms);
      }
      return -ETIMEDOUT;
    }
    rte_delay_us_sleep(100);
  }
  return 0;
}

void release_intr_thread() {
  IntrHold& h = intr_hold();
  if (h.state.exchange(kFree, std::memory_order_acq_rel) != kParked) return;  // none, or asked only
  uint64_t one = 1;
  if (write(h.release_fd, &one, sizeof one) < 0) {
    IMAGO_LOG(ERR, dataplane, "cannot release the interrupt thread: %s\n", strerror(errno));
  }
}

bool intr_thread_held() { return intr_hold().state.load(std::memory_order_acquire) == kParked; }

unsigned mbufs_needed(const PortConfig& cfg, unsigned nb_lcores, unsigned burst, unsigned cache,
                      unsigned extra) {
  unsigned descs = unsigned{cfg.nb_rxq} * cfg.nb_rxd + unsigned{cfg.nb_txq} * cfg.nb_txd;
  return descs + nb_lcores * (burst + cache) + extra;
}

uint16_t mbuf_room_for(size_t frame) {
  constexpr size_t kAfPacketSlack = 256;
  return static_cast<uint16_t>(std::max<size_t>(RTE_MBUF_DEFAULT_DATAROOM, frame + kAfPacketSlack));
}

// rte_pktmbuf_pool_create() with the mempool flags it does not take.
static rte_mempool* pktmbuf_pool(const char* name, unsigned n, unsigned cache, uint16_t room, int socket,
                                 unsigned flags) {
  rte_mempool* mp = rte_mempool_create_empty(name, n, sizeof(rte_mbuf) + room, cache,
                                             sizeof(rte_pktmbuf_pool_private), socket, flags);
  if (mp == nullptr) return nullptr;
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = room;
  int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr);
  if (rc == 0) {
    rte_pktmbuf_pool_init(mp, &priv);
    rc = rte_mempool_populate_default(mp);
  }
  if (rc < 0) {
    rte_mempool_free(mp);
    rte_errno = -rc;
    return nullptr;
  }
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  return mp;
}

rte_mempool* create_mbuf_pool(const std::string& name, unsigned n, uint16_t data_room, int socket, bool packed) {
  unsigned cache = std::min(256u, n / 8);  // mempool cache must stay below n / 1.5
  const auto room = static_cast<uint16_t>(data_room + RTE_PKTMBUF_HEADROOM);
  rte_mempool* mp = packed ? pktmbuf_pool(name.c_str(), n, cache, room, socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG)
                           : rte_pktmbuf_pool_create(name.c_str(), n, cache, 0, room, socket);
  if (!mp) {
    IMAGO_LOG(ERR, dataplane, "mempool %s (%u mbufs): %s\n", name.c_str(), n,
              rte_strerror(rte_errno));
  }
  return mp;
}

namespace {

// The kernel interface behind port @p id (net_af_packet, net_af_xdp), 0 for none.
unsigned port_if_index(uint16_t id) {
  rte_eth_dev_info info{};
  return rte_eth_dev_info_get(id, &info) == 0 ? info.if_index : 0;
}

}  // namespace

int Port::open(uint16_t port_id, const PortConfig& cfg, rte_mempool* pool) {
  if (!rte_eth_dev_is_valid_port(port_id)) return fail(port_id, "lookup", -ENODEV);
  // Another live imago process on the interface: setting up our AF_XDP socket would fail, and
  // removing the device then detaches the interface's XDP program, cutting that process off.
  // Refuse before touching the device, and never remove it. (A program a killed process left
  // is no one's: its claim died with it, and the PMD takes the program over.)
  const unsigned ifx = port_if_index(port_id);  // 0: no kernel interface behind it
  if (port_driver(port_id) == "net_af_xdp") {
    char name[IF_NAMESIZE] = "?";
    if (ifx != 0 && iface_claim(ifx) == -EBUSY) {
      IMAGO_LOG(ERR, dataplane, "port %u: interface %s is in use by another imago process over net_af_xdp "
                "(one process per interface): refused, that process left undisturbed\n", port_id,
                if_indextoname(ifx, name) ? name : "?");
      eal_leave_devices();  // EAL's cleanup would remove the device, and that program with it
      return -EBUSY;
    }
  }
  if (!pool) return fail(port_id, "open (no mempool)", -EINVAL);
  // Read before the start, which clears it to ethdev's own setting (off): an unreadable flag
  // counts as on, so it is left as it is.
  promisc_before_ = ifx != 0 ? iface_promiscuous(ifx) != 0 : rte_eth_promiscuous_get(port_id) != 0;
  id_ = port_id;
  cfg_ = cfg;
  pool_ = pool;
  intr_control_ = driver() == "net_memif";
  rte_eth_conf conf{};
  if (int rc = rte_eth_dev_configure(id_, cfg.nb_rxq, cfg.nb_txq, &conf); rc < 0) {
    return fail(id_, "configure", rc);
  }
  configured_ = true;
  uint16_t rxd = cfg.nb_rxd, txd = cfg.nb_txd;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(id_, &rxd, &txd); rc < 0) {
    return fail(id_, "descriptor adjust", rc);
  }
  cfg_.nb_rxd = rxd;
  cfg_.nb_txd = txd;
  if (cfg.mtu) {
    if (int rc = rte_eth_dev_set_mtu(id_, cfg.mtu); rc < 0) return fail(id_, "set mtu", rc);
  }
  return setup_queues();
}

int Port::setup_queues() {
  int socket = rte_eth_dev_socket_id(id_);
  for (uint16_t q = 0; q < cfg_.nb_rxq; ++q) {
    if (int rc = rte_eth_rx_queue_setup(id_, q, cfg_.nb_rxd, socket, nullptr, pool_); rc < 0) {
      if (driver() == "net_af_xdp")  // the kernel's reason went to the log above ("libbpf: ...")
        IMAGO_LOG(ERR, dataplane,
                  "port %u: net_af_xdp could not attach its XDP program or socket: XDP on a veth wants the "
                  "MTU of both ends at most 3000 (frames and mbufs fit one page), and one XDP program per "
                  "interface\n", id_);
      return fail(id_, "rx queue setup", rc);
    }
  }
  for (uint16_t q = 0; q < cfg_.nb_txq; ++q) {
    if (int rc = rte_eth_tx_queue_setup(id_, q, cfg_.nb_txd, socket, nullptr); rc < 0) {
      return fail(id_, "tx queue setup", rc);
    }
  }
  return 0;
}

int Port::start() {
  if (int rc = rte_eth_dev_start(id_); rc < 0) {
    if (intr_control_)  // the PMD says only EPERM when a client finds no server on its socket
      IMAGO_LOG(ERR, dataplane, "port %u: net_memif could not connect: a client (role=client, the default) needs "
                "its server (role=server) running on the same socket first\n", id_);
    return fail(id_, "start", rc);
  }
  started_ = true;
  // Some PMDs (net_ring) have no filters at all; not being able to widen them is harmless. A
  // kernel interface outlives the process: one that was not promiscuous (open() read it) is
  // put back at stop.
  if (cfg_.promiscuous) unset_promisc_ = set_promiscuous(true) == 0 && !promisc_before_;
  if (cfg_.allmulticast) set_allmulticast(true);
  return 0;
}

int Port::stop() {
  if (!started_) return 0;
  started_ = false;
  // net_memif: rte_eth_dev_stop() runs memif_disconnect() here; the interrupt thread must not
  // run it at the same time for a peer that leaves now (port.h, "Holding DPDK's interrupt
  // thread"), nor touch the server socket rte_eth_dev_close() frees.
  if (intr_control_) hold_intr_thread();
  if (unset_promisc_) set_promiscuous(false);
  unset_promisc_ = false;
  if (int rc = rte_eth_dev_stop(id_); rc < 0) return fail(id_, "stop", rc);
  return 0;
}

int Port::close() {
  int rc = stop();
  if (configured_) {
    configured_ = false;
    if (intr_control_) hold_intr_thread();  // also when never started: the server socket
    if (int crc = rte_eth_dev_close(id_); crc < 0) return fail(id_, "close", crc);
  }
  return rc;
}

int Port::link(LinkStatus& out, unsigned wait_ms) const {
  rte_eth_link l{};
  for (unsigned waited = 0;; waited += 10) {
    if (int rc = rte_eth_link_get_nowait(id_, &l); rc < 0) return fail(id_, "link get", rc);
    if (l.link_status || waited >= wait_ms) break;
    rte_delay_ms(10);
  }
  out.up = l.link_status == RTE_ETH_LINK_UP;
  out.speed_mbps = l.link_speed;
  out.full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
  return 0;
}

MacAddr Port::mac() const {
  rte_ether_addr a{};
  rte_eth_macaddr_get(id_, &a);
  MacAddr m;
  std::memcpy(m.b.data(), a.addr_bytes, 6);
  return m;
}

int Port::set_promiscuous(bool on) {
  int rc = on ? rte_eth_promiscuous_enable(id_) : rte_eth_promiscuous_disable(id_);
  if (rc < 0 && rc != -ENOTSUP) return fail(id_, "promiscuous", rc);
  return rc;
}

int Port::set_allmulticast(bool on) {
  int rc = on ? rte_eth_allmulticast_enable(id_) : rte_eth_allmulticast_disable(id_);
  if (rc < 0 && rc != -ENOTSUP) return fail(id_, "all-multicast", rc);
  return rc;
}

int Port::set_mc_addrs(std::span<const MacAddr> addrs) {
  std::vector<rte_ether_addr> list(addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    if (!addrs[i].is_multicast()) return fail(id_, "multicast list (unicast address)", -EINVAL);
    std::memcpy(list[i].addr_bytes, addrs[i].b.data(), 6);
  }
  int rc = rte_eth_dev_set_mc_addr_list(id_, list.data(), static_cast<uint32_t>(list.size()));
  if (rc < 0 && rc != -ENOTSUP) return fail(id_, "multicast list", rc);
  return rc;
}

std::string port_driver(uint16_t port_id) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) < 0 || !info.driver_name) return "unknown";
  return info.driver_name;
}

std::string Port::driver() const { return port_driver(id_); }

uint32_t Port::ring_frame_limit() const {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(id_, &info) < 0 || !info.driver_name || std::strcmp(info.driver_name, "net_af_packet") != 0)
    return 0;
  const rte_devargs* da = info.device ? rte_dev_devargs(info.device) : nullptr;
  const char* args = da && da->args ? da->args : "";
  const char* at = std::strstr(args, "framesz=");
  const unsigned long framesz = at ? std::strtoul(at + 8, nullptr, 0) : 2048;  // the PMD's default
  // Its tpacket2 header and address take the front of each ring frame (64 bytes, rounded up).
  return framesz > 64 ? static_cast<uint32_t>(framesz - 64) : 0;
}

uint32_t Port::link_mtu() const {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(id_, &info) < 0) return 0;
  if (info.driver_name && std::strcmp(info.driver_name, "net_ring") == 0) return 0;
  ifreq ifr{};
  if (info.if_index != 0 && if_indextoname(info.if_index, ifr.ifr_name) != nullptr) {
    const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
    const bool ok = s >= 0 && ::ioctl(s, SIOCGIFMTU, &ifr) == 0;
    if (s >= 0) ::close(s);
    if (ok && ifr.ifr_mtu > 0) return static_cast<uint32_t>(ifr.ifr_mtu);
  }
  uint16_t mtu = 0;
  return rte_eth_dev_get_mtu(id_, &mtu) == 0 ? mtu : 0;
}

}  // namespace imago::dp
