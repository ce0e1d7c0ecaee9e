// SPDX-License-Identifier: BSD-3-Clause
// Ports over real PMDs (net_ring, net_null): control-path calls and their errors.
#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_ethdev.h>

#include "dataplane/port.h"
#include "dataplane/ring_pair.h"
#include "tests/eal/eal_env.h"

namespace imago::test {
namespace {

TEST(Port, OpenRejectsMissingPortAndMissingPool) {
  ScopedPool pool(1023);
  dp::Port p;
  // Do / Expect: a port id that does not exist is -ENODEV; no mempool is -EINVAL.
  EXPECT_EQ(p.open(RTE_MAX_ETHPORTS - 1, dp::PortConfig{}, pool.get()), -ENODEV);
  dp::RingPair ring;
  ASSERT_EQ(dp::create_ring_pair(unique_name("r"), 256, ring), 0);
  EXPECT_EQ(p.open(ring.port_a, dp::PortConfig{}, nullptr), -EINVAL);
  rte_eth_dev_close(ring.port_a);
  rte_eth_dev_close(ring.port_b);
  dp::destroy_ring_pair(ring);
}

TEST(Port, NullDeviceStartsWithLinkUpAndTakesMulticastSettings) {
  // Do: create a net_null vdev and bring it up through Port.
  std::string name = "net_null_" + unique_name("p");
  ASSERT_EQ(rte_vdev_init(name.c_str(), nullptr), 0);
  uint16_t id;
  ASSERT_EQ(rte_eth_dev_get_port_by_name(name.c_str(), &id), 0);
  ScopedPool pool(2047);
  dp::Port p;
  ASSERT_EQ(p.open(id, dp::PortConfig{.nb_rxd = 256, .nb_txd = 256, .allmulticast = true}, pool.get()), 0);
  ASSERT_EQ(p.start(), 0);
  // Expect: link up; a driver name; the multicast list refuses a unicast address.
  dp::LinkStatus link;
  ASSERT_EQ(p.link(link, 1000), 0);
  EXPECT_TRUE(link.up);
  EXPECT_EQ(p.driver(), "net_null");
  dp::MacAddr uni{{0x02, 0, 0, 0, 0, 1}}, group{{0x01, 0x00, 0x5e, 0, 0, 7}};
  EXPECT_EQ(p.set_mc_addrs(std::span(&uni, 1)), -EINVAL);
  int rc = p.set_mc_addrs(std::span(&group, 1));
  EXPECT_TRUE(rc == 0 || rc == -ENOTSUP) << rc;
  // Do / Expect: close is clean and idempotent.
  EXPECT_EQ(p.close(), 0);
  EXPECT_EQ(p.close(), 0);
  EXPECT_EQ(rte_vdev_uninit(name.c_str()), 0);
}

}  // namespace
}  // namespace imago::test
