// SPDX-License-Identifier: BSD-3-Clause
// The primary's checks on control requests from secondaries (api/control_check.h), no EAL.
#include "api/control_check.h"
#include "api/ctl_answers.h"
#include "api/imago.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace imago::api {
namespace {

struct Table {
  std::unique_ptr<ShmRoot> shm = std::make_unique<ShmRoot>();
  ServesPeer serves = [](int node, uint64_t peer) { return node == 0 && peer == 2; };
  Table() {
    shm->n_nodes = 1;
    shm->node_ids[0] = 1;
  }
};

CtlMsg open_req(const char* name, uint64_t peer = 2) {
  CtlMsg m{};
  m.op = CtlOp::kOpen;
  m.version = kShmVersion;
  m.pid = 100;
  m.peer = peer;
  std::snprintf(m.name, sizeof m.name, "%s", name);
  return m;
}

TEST(CtlDecode, WrongLengthOrVersionIsEproto) {
  Table t;
  CtlMsg m = open_req("a"), out;
  // Do: a short message, a long one, another version, no bytes at all.
  // Expect: -EPROTO each time, and nothing of the request kept.
  EXPECT_EQ(ctl_decode(&m, sizeof m - 1, *t.shm, &out), -EPROTO);
  EXPECT_EQ(ctl_decode(nullptr, sizeof m, *t.shm, &out), -EPROTO);
  m.version = kShmVersion + 1;
  EXPECT_EQ(ctl_decode(&m, sizeof m, *t.shm, &out), -EPROTO);
  EXPECT_EQ(out.pid, 0);
}

TEST(CtlDecode, UnknownOperationOrAnotherProcessesCloseIsEinval) {
  Table t;
  CtlMsg m = open_req("a"), out;
  m.op = static_cast<CtlOp>(7);
  EXPECT_EQ(ctl_decode(&m, sizeof m, *t.shm, &out), -EINVAL);
  // Do: close slot 3, owned by pid 101, as pid 100; then as 101; then slot 32.
  // Expect: refused, taken, refused.
  t.shm->slots[3].pid = 101;
  m.op = CtlOp::kClose;
  m.slot = 3;
  EXPECT_EQ(ctl_decode(&m, sizeof m, *t.shm, &out), -EINVAL);
  m.pid = 101;
  EXPECT_EQ(ctl_decode(&m, sizeof m, *t.shm, &out), 0);
  EXPECT_EQ(out.slot, 3u);
  m.slot = kMaxEndpoints;
  EXPECT_EQ(ctl_decode(&m, sizeof m, *t.shm, &out), -EINVAL);
}

TEST(CtlCheckOpen, NamesRingsNodesAndPeersAreChecked) {
  Table t;
  int node = -1;
  EXPECT_EQ(ctl_check_open(open_req("orders"), *t.shm, t.serves, &node), 0);
  EXPECT_EQ(node, 0);
  EXPECT_EQ(ctl_check_open(open_req(""), *t.shm, t.serves, &node), -EINVAL);
  CtlMsg m = open_req("x");
  std::memset(m.name, 'n', sizeof m.name);  // no terminating NUL
  EXPECT_EQ(ctl_check_open(m, *t.shm, t.serves, &node), -EINVAL);
  for (uint32_t ring : {32u, 96u, 8192u}) {
    m = open_req("x");
    m.ring_size = ring;
    EXPECT_EQ(ctl_check_open(m, *t.shm, t.serves, &node), -EINVAL) << ring;
  }
  m = open_req("x");
  m.node = 9;  // no such node
  EXPECT_EQ(ctl_check_open(m, *t.shm, t.serves, &node), -EINVAL);
  EXPECT_EQ(ctl_check_open(open_req("x", 3), *t.shm, t.serves, &node), -EINVAL);  // not a peer
}

TEST(CtlCheckOpen, ALiveEndpointOfTheSameNameAndPeerIsEexist) {
  Table t;
  EndpointSlot& s = t.shm->slots[5];
  s.state.store(SlotState::kOpen);
  s.peer = 2;
  s.hash = endpoint_hash("orders");
  int node;
  EXPECT_EQ(ctl_check_open(open_req("orders"), *t.shm, t.serves, &node), -EEXIST);
  s.state.store(SlotState::kFree);  // once freed, the name is free again
  EXPECT_EQ(ctl_check_open(open_req("orders"), *t.shm, t.serves, &node), 0);
}

TEST(CtlCheckOpen, GroupRequestsNeedNoPeerAndKnownFlagsOnePerNodeAndGroup) {
  Table t;
  auto group_req = [](uint32_t g, uint32_t flags, uint64_t peer = 0) {
    CtlMsg m = open_req("group-9", peer);
    m.group = g;
    m.group_flags = flags;
    return m;
  };
  int node;
  EXPECT_EQ(ctl_check_open(group_req(9, IMAGO_GROUP_SEND), *t.shm, t.serves, &node), 0);
  EXPECT_EQ(ctl_check_open(group_req(9, IMAGO_GROUP_RECV | IMAGO_GROUP_FROM_OLDEST), *t.shm, t.serves, &node), 0);
  // Hostile: a peer as well, no direction, unknown bits, FROM_OLDEST alone, a peer endpoint's
  // flags other than IMAGO_EP_NET_EVENTS.
  EXPECT_EQ(ctl_check_open(group_req(9, IMAGO_GROUP_SEND, 2), *t.shm, t.serves, &node), -EINVAL);
  EXPECT_EQ(ctl_check_open(group_req(9, 0), *t.shm, t.serves, &node), -EINVAL);
  EXPECT_EQ(ctl_check_open(group_req(9, IMAGO_GROUP_SEND | 0x100), *t.shm, t.serves, &node), -EINVAL);
  EXPECT_EQ(ctl_check_open(group_req(9, IMAGO_GROUP_SEND | IMAGO_GROUP_FROM_OLDEST), *t.shm, t.serves, &node), -EINVAL);
  EXPECT_EQ(ctl_check_open(group_req(0, 0x2u, 2), *t.shm, t.serves, &node), -EINVAL);
  EXPECT_EQ(ctl_check_open(group_req(0, IMAGO_EP_NET_EVENTS | 0x8u, 2), *t.shm, t.serves, &node), -EINVAL);
  EXPECT_EQ(ctl_check_open(group_req(0, IMAGO_EP_NET_EVENTS, 2), *t.shm, t.serves, &node), 0);
  // One group endpoint per node and group; a peer endpoint named alike is no conflict.
  EndpointSlot& s = t.shm->slots[3];
  s.state.store(SlotState::kOpen);
  s.group = 9;
  EXPECT_EQ(ctl_check_open(group_req(9, IMAGO_GROUP_RECV), *t.shm, t.serves, &node), -EEXIST);
  EXPECT_EQ(ctl_check_open(group_req(10, IMAGO_GROUP_RECV), *t.shm, t.serves, &node), 0);
  EXPECT_EQ(ctl_check_open(open_req("group-9"), *t.shm, t.serves, &node), 0);
}

TEST(CtlTime, ThePrimaryWorksOnlyWhileTheApplicationStillWaits) {
  constexpr uint64_t kMs = 1'000'000;
  const uint64_t now = ctl_clock_ns();
  EXPECT_EQ(ctl_time_left_ns(0), 0u);  // hostile or missing: nothing is started
  EXPECT_EQ(ctl_time_left_ns(now + kCtlMarginMs * kMs - kMs), 0u);
  const uint64_t left = ctl_time_left_ns(now + 3000 * kMs);
  EXPECT_GT(left, (3000 - kCtlMarginMs - 100) * kMs);
  EXPECT_LE(left, (3000 - kCtlMarginMs) * kMs);
  EXPECT_EQ(ctl_time_left_ns(~uint64_t{0}), kCtlGiveUpMs * kMs);  // a far deadline buys nothing
}

TEST(CtlAnswersTest, ARetryGetsTheAnswerItHadAndOnlyItsOwn) {
  CtlAnswers answers;
  CtlMsg m = open_req("a");
  m.id = 7;
  EXPECT_EQ(answers.find(m), nullptr);
  m.rc = 0, m.slot = 5;
  answers.record(m);
  CtlMsg retry = open_req("a");
  retry.id = 7;
  const CtlAnswers::Answer* a = answers.find(retry);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->slot, 5u);
  EXPECT_EQ(a->rc, 0);
  retry.pid = 101;  // another process's request with the same id
  EXPECT_EQ(answers.find(retry), nullptr);
  retry.pid = 100, retry.op = CtlOp::kClose;
  EXPECT_EQ(answers.find(retry), nullptr);
  // The oldest answers make room for new ones.
  for (uint64_t id = 100; id < 100 + 256; ++id) m.id = id, answers.record(m);
  retry.op = CtlOp::kOpen;
  EXPECT_EQ(answers.find(retry), nullptr);
}

}  // namespace
}  // namespace imago::api
