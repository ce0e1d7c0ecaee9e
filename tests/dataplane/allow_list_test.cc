// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for dataplane/allow_list.h: frames admitted only from configured peers, each
// bound to its address; peers without an address; spoofed node ids. No EAL.
#include "dataplane/allow_list.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "reliability/be.h"

namespace imago::dp {
namespace {

constexpr MacAddr kMacA{{0x02, 0, 0, 0, 0, 0xA}};
constexpr MacAddr kMacB{{0x02, 0, 0, 0, 0, 0xB}};
constexpr MacAddr kMacEvil{{0x02, 0, 0, 0, 0, 0xE}};
constexpr MacAddr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
constexpr uint32_t kIpA = 0x0A000001, kIpB = 0x0A000002, kIpEvil = 0x0A0000EE;

// A reliability frame header's first 8 bytes naming @p src as its sender.
std::vector<uint8_t> frame_from(uint32_t src) {
  std::vector<uint8_t> f(48, 0);
  Be32 v;
  v.set(src);
  std::memcpy(f.data() + 4, &v, sizeof v);
  return f;
}

Admit l2(const AllowList& a, const MacAddr& mac, uint32_t claimed) {
  auto f = frame_from(claimed);
  return a.check(mac, 0, f.data(), f.size());
}

Admit udp(const AllowList& a, uint32_t ip, uint32_t claimed) {
  auto f = frame_from(claimed);
  return a.check(kMacEvil, ip, f.data(), f.size());
}

TEST(AllowList, L2PeersAreBoundToTheirMacs) {
  // Do: peers 1 at MAC A and 2 at MAC B.
  AllowList a(Encap::L2);
  ASSERT_EQ(a.add(1, kMacA, 0), 0);
  ASSERT_EQ(a.add(2, kMacB, 0), 0);
  // Expect: each admitted from its own MAC in its own name.
  EXPECT_EQ(l2(a, kMacA, 1), Admit::Allowed);
  EXPECT_EQ(l2(a, kMacB, 2), Admit::Allowed);
  // Expect: A's MAC in B's name, or in a stranger's, is spoofed.
  EXPECT_EQ(l2(a, kMacA, 2), Admit::Spoofed);
  EXPECT_EQ(l2(a, kMacA, 99), Admit::Spoofed);
  // Expect: a stranger's MAC in A's name is spoofed; in its own name, not allowed.
  EXPECT_EQ(l2(a, kMacEvil, 1), Admit::Spoofed);
  EXPECT_EQ(l2(a, kMacEvil, 99), Admit::NotAllowed);
}

TEST(AllowList, UdpPeersAreBoundToTheirIpAddressesNotMacs) {
  // Do: peers 1 at 10.0.0.1 and 2 at 10.0.0.2 in UDP mode (frames arrive through routers).
  AllowList a(Encap::Udp);
  ASSERT_EQ(a.add(1, kBroadcast, kIpA), 0);
  ASSERT_EQ(a.add(2, kBroadcast, kIpB), 0);
  // Expect: the source IP decides, whatever MAC the last router wrote.
  EXPECT_EQ(udp(a, kIpA, 1), Admit::Allowed);
  EXPECT_EQ(udp(a, kIpB, 2), Admit::Allowed);
  EXPECT_EQ(udp(a, kIpA, 2), Admit::Spoofed);
  EXPECT_EQ(udp(a, kIpEvil, 2), Admit::Spoofed);
  EXPECT_EQ(udp(a, kIpEvil, 3), Admit::NotAllowed);
}

TEST(AllowList, PeerWithoutAddressIsAdmittedFromAnyOtherAddress) {
  // Do: peer 1 with no address (broadcast MAC, the default), peer 2 at MAC B.
  AllowList a(Encap::L2);
  ASSERT_EQ(a.add(1, kBroadcast, 0), 0);
  ASSERT_EQ(a.add(2, kMacB, 0), 0);
  EXPECT_FALSE(a.has_address(1));
  EXPECT_TRUE(a.has_address(2));
  // Expect: peer 1 admitted from any address but peer 2's; strangers still not allowed.
  EXPECT_EQ(l2(a, kMacEvil, 1), Admit::Allowed);
  EXPECT_EQ(l2(a, kMacA, 1), Admit::Allowed);
  EXPECT_EQ(l2(a, kMacB, 1), Admit::Spoofed);
  EXPECT_EQ(l2(a, kMacEvil, 3), Admit::NotAllowed);
}

TEST(AllowList, MulticastZeroAndMissingAddressesAreNoAddress) {
  // Do: L2 peers at a multicast and at the zero MAC; UDP peers at no IP, a group, broadcast.
  AllowList l(Encap::L2), u(Encap::Udp);
  ASSERT_EQ(l.add(1, MacAddr{{0x01, 0, 0x5e, 0, 0, 1}}, 0), 0);
  ASSERT_EQ(l.add(2, MacAddr{{0, 0, 0, 0, 0, 0}}, 0), 0);
  ASSERT_EQ(u.add(1, kMacA, 0), 0);
  ASSERT_EQ(u.add(2, kMacA, 0xE0000001), 0);
  ASSERT_EQ(u.add(3, kMacA, 0xFFFFFFFF), 0);
  // Expect: none of them has an address to check.
  for (uint64_t id : {1, 2}) EXPECT_FALSE(l.has_address(id)) << id;
  for (uint64_t id : {1, 2, 3}) EXPECT_FALSE(u.has_address(id)) << id;
}

TEST(AllowList, NodesSharingAnAddressAreEachAdmitted) {
  // Do: peers 1 and 2 behind the same MAC.
  AllowList a(Encap::L2);
  ASSERT_EQ(a.add(1, kMacA, 0), 0);
  ASSERT_EQ(a.add(2, kMacA, 0), 0);
  // Expect: both admitted from it; a third node from it is spoofed.
  EXPECT_EQ(l2(a, kMacA, 1), Admit::Allowed);
  EXPECT_EQ(l2(a, kMacA, 2), Admit::Allowed);
  EXPECT_EQ(l2(a, kMacA, 3), Admit::Spoofed);
}

TEST(AllowList, FrameTooShortToNameItsSenderIsJudgedByAddress) {
  // Do: 3-byte frames from a peer's MAC and from a stranger's.
  AllowList a(Encap::L2);
  ASSERT_EQ(a.add(1, kMacA, 0), 0);
  const uint8_t tiny[3] = {1, 3, 0};
  // Expect: the peer's goes on (the engine rejects it as too short); the stranger's does not.
  EXPECT_EQ(a.check(kMacA, 0, tiny, sizeof tiny), Admit::Allowed);
  EXPECT_EQ(a.check(kMacEvil, 0, tiny, sizeof tiny), Admit::NotAllowed);
}

TEST(AllowList, EmptyListAdmitsNothing) {
  // Do: check frames against a list with no peers.
  AllowList a(Encap::L2);
  // Expect: nothing is allowed.
  EXPECT_EQ(l2(a, kMacA, 1), Admit::NotAllowed);
}

TEST(AllowList, RefusesDuplicatesAndTooManyPeers) {
  // Do: add peer 1 twice, then fill the list.
  AllowList a(Encap::L2);
  ASSERT_EQ(a.add(1, kMacA, 0), 0);
  // Expect: -EEXIST for the duplicate, -ENOSPC past kMaxPeers.
  EXPECT_EQ(a.add(1, kMacB, 0), -EEXIST);
  for (uint64_t id = 2; id <= AllowList::kMaxPeers; ++id) ASSERT_EQ(a.add(id, kBroadcast, 0), 0);
  EXPECT_EQ(a.add(AllowList::kMaxPeers + 1, kBroadcast, 0), -ENOSPC);
}

}  // namespace
}  // namespace imago::dp
