// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the control messages imagod takes from secondaries over rte_mp (api/control.h
// CtlMsg), through the checks the primary runs on them (api/control_check.h), against a model
// of the table that opens and closes endpoints as the runtime would.
//
// Input: the primary's table first (nodes, which peers each serves, endpoints already open),
// then requests until the input ends. A request is a selector byte: raw bytes of any length
// (mostly the wrong one), or a CtlMsg built field by field (operation, version, pid, slot,
// ring size, node, peer, name; now and then a group and its flags, the peer then often 0),
// each field either plausible or the fuzzer's raw value.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "api/control_check.h"
#include "api/imago.h"
#include "tests/fuzz/fuzz_common.h"

namespace imago::fuzz {
namespace {

using api::CtlMsg;
using api::CtlOp;
using api::kMaxEndpoints;
using api::kMaxNodes;
using api::SlotState;

constexpr const char* kNames[] = {"orders", "quotes", "a", "0123456789012345678901234567890"};

struct Table {
  api::ShmRoot* shm;
  std::set<std::pair<int, uint64_t>> serves;  // (node index, peer)
};

uint64_t peer_of(Reader& in) {
  const uint8_t s = in.u8();
  return s < 0xC0 ? s % 4 + 1 : in.u64();
}

void name_into(Reader& in, char* dst) {  // dst holds kNameMax + 1 bytes
  const uint8_t s = in.u8();
  std::memset(dst, 0, api::kNameMax + 1);
  if (s < 0x80) {
    std::strcpy(dst, kNames[s % 4]);
  } else {
    auto b = in.bytes(s & 0x40 ? api::kNameMax + 1 : s % (api::kNameMax + 1));
    std::memcpy(dst, b.data(), b.size());  // maybe unterminated, maybe with NULs inside
  }
}

void make_table(Reader& in, Table& t) {
  api::ShmRoot& shm = *t.shm;
  for (auto& s : shm.slots)
    s.state.store(SlotState::kFree), s.pid = 0, s.peer = 0, s.node_index = 0, s.hash = 0, s.group = s.group_flags = 0;
  shm.n_nodes = in.u8() % kMaxNodes + 1;  // a primary has at least one node
  for (uint32_t i = 0; i < shm.n_nodes; ++i) {
    shm.node_ids[i] = in.u8() & 1 ? in.u64() : i + 1;
    for (unsigned n = in.u8() % 4; n > 0; --n) t.serves.insert({static_cast<int>(i), peer_of(in)});
  }
  for (unsigned n = in.u8() % (kMaxEndpoints + 1); n > 0; --n) {
    api::EndpointSlot& s = shm.slots[in.u8() % kMaxEndpoints];
    s.state.store(static_cast<SlotState>(in.u8() % 5));
    s.node_index = in.u8() % shm.n_nodes;
    s.peer = peer_of(in);
    name_into(in, s.name);
    s.name[api::kNameMax] = 0;
    s.hash = api::endpoint_hash(s.name);
    s.pid = static_cast<int32_t>(in.u8() % 4 + 100);
    s.group = in.u8() % 4 == 0 ? in.u8() % 4 : 0;  // some open group endpoints (peer ignored then)
  }
}

CtlMsg build_request(Reader& in) {
  CtlMsg m{};
  const uint8_t f = in.u8();  // which fields are the fuzzer's raw values
  m.op = f & 1 ? static_cast<CtlOp>(in.u32()) : static_cast<CtlOp>(in.u8() % 3 + 1);
  m.version = f & 2 ? in.u32() : api::kShmVersion;
  m.pid = f & 4 ? static_cast<int32_t>(in.u32()) : static_cast<int32_t>(in.u8() % 4 + 100);
  m.rc = static_cast<int32_t>(in.u32());
  m.slot = f & 8 ? in.u32() : in.u8() % kMaxEndpoints;
  m.ring_size = f & 16 ? in.u32() : uint32_t{64} << (in.u8() % 8);
  m.node = f & 32 ? in.u64() : in.u8() % (kMaxNodes + 2);
  m.peer = peer_of(in);
  name_into(in, m.name);
  // A group endpoint now and then (peer 0, the flags of imago.h, or the fuzzer's raw ones).
  if (f & 64) {
    m.group = in.u8() % 4;
    m.group_flags = f & 128 ? in.u32() : in.u8() % 16;
    if (in.u8() & 1) m.peer = 0;
  }
  return m;
}

// The model's verdict on an open: what the runtime documents, decided independently.
int model_open(const Table& t, const CtlMsg& m, int* node_index) {
  const void* nul = std::memchr(m.name, 0, sizeof m.name);
  if (nul == nullptr || nul == m.name) return -EINVAL;
  const uint32_t ring = m.ring_size ? m.ring_size : api::kRingDefault;
  if (ring < api::kRingMin || ring > api::kRingMax || __builtin_popcount(ring) != 1) return -EINVAL;
  int idx = -1;
  if (m.node == 0) idx = 0;
  for (uint32_t i = 0; i < t.shm->n_nodes && idx < 0; ++i)
    if (t.shm->node_ids[i] == m.node) idx = static_cast<int>(i);
  if (idx < 0) return -EINVAL;
  if (m.group != 0) {  // a group endpoint: no peer, SEND and/or RECV, FROM_OLDEST only with
                       // RECV, NACK only with SEND
    const uint32_t f = m.group_flags;
    if (m.peer != 0 || f > 15 || (f & 3) == 0 || ((f & 4) && !(f & 2)) || ((f & 8) && !(f & 1))) return -EINVAL;
    *node_index = idx;
    for (const auto& s : t.shm->slots)
      if (s.state.load() != SlotState::kFree && s.node_index == static_cast<uint32_t>(idx) && s.group == m.group)
        return -EEXIST;
    return 0;
  }
  if ((m.group_flags & ~IMAGO_EP_NET_EVENTS) != 0 || !t.serves.count({idx, m.peer})) return -EINVAL;
  *node_index = idx;
  // An endpoint is (node, peer, wire tag of its name): two names with one tag would be one
  // endpoint to the engine, so the check refuses those as duplicates too.
  const uint32_t tag = api::endpoint_hash(m.name);
  for (const auto& s : t.shm->slots)
    if (s.state.load() != SlotState::kFree && s.node_index == static_cast<uint32_t>(idx) && s.group == 0 &&
        s.peer == m.peer && s.hash == tag)
      return -EEXIST;
  return 0;
}

// Act on an accepted request as the runtime does: open into a free slot, close frees it.
void apply(Table& t, const CtlMsg& m, int node_index) {
  if (m.op == CtlOp::kClose) return t.shm->slots[m.slot].state.store(SlotState::kFree);
  if (m.op != CtlOp::kOpen) return;
  for (auto& s : t.shm->slots) {
    if (s.state.load() != SlotState::kFree) continue;
    s.state.store(SlotState::kOpen);
    s.node_index = static_cast<uint32_t>(node_index);
    s.peer = m.peer;
    s.group = m.group;
    s.group_flags = m.group_flags;
    s.pid = m.pid;
    std::memcpy(s.name, m.name, sizeof s.name);
    s.hash = api::endpoint_hash(s.name);
    return;
  }
}

void request(Reader& in, Table& t) {
  const uint8_t sel = in.u8();
  CtlMsg sent;
  size_t len = sizeof sent;
  std::unique_ptr<uint8_t[]> raw;
  if (sel < 0x20) {  // raw bytes of any length
    auto b = in.bytes(sel & 0x10 ? sizeof sent : in.u16() % 1024);
    len = b.size();
    raw = std::make_unique<uint8_t[]>(len + 1);  // a real copy: ASan sees any over-read
    std::memcpy(raw.get(), b.data(), len);
  } else {
    sent = build_request(in);
  }
  const void* param = raw ? static_cast<const void*>(raw.get()) : &sent;
  if (raw && len == sizeof sent) std::memcpy(&sent, raw.get(), len);
  CtlMsg m;
  const int rc = api::ctl_decode(param, len, *t.shm, &m);
  if (len != sizeof sent || sent.version != api::kShmVersion) {
    FUZZ_CHECK(rc == -EPROTO);
    return;
  }
  FUZZ_CHECK(std::memcmp(&m, &sent, sizeof m) == 0);
  const bool own_close = m.op == CtlOp::kClose && m.slot < kMaxEndpoints && t.shm->slots[m.slot].pid == m.pid;
  const bool known = m.op == CtlOp::kHello || m.op == CtlOp::kOpen || own_close;
  FUZZ_CHECK(rc == (known ? 0 : -EINVAL));
  if (rc != 0) return;
  int node_index = -1;
  if (m.op == CtlOp::kOpen) {
    int want_index = -1;
    const int want = model_open(t, m, &want_index);
    const api::ServesPeer serves = [&](int n, uint64_t peer) {
      FUZZ_CHECK(n >= 0 && static_cast<uint32_t>(n) < t.shm->n_nodes);  // never past the nodes
      return t.serves.count({n, peer}) == 1;
    };
    const int got = api::ctl_check_open(m, *t.shm, serves, &node_index);
    FUZZ_CHECK(got == want);
    if (got != 0) return;
    FUZZ_CHECK(node_index == want_index);
  }
  apply(t, m, node_index);
}

void run(Reader& in) {
  static auto* root = new api::ShmRoot();  // 4 MiB (every slot's loan tables): made once
  Table t{root, {}};
  make_table(in, t);
  while (!in.empty()) request(in, t);
}

// --- seeds: the requests the library sends (api/imago.cc), and a few it never does ---

void seeds(const SeedFn& put) {
  auto table = [](Writer& w) {  // one node (id 1) serving peer 2, one endpoint open
    w.u8(0).u8(0).u8(1).u8(1).u8(1).u8(3).u8(2).u8(0).u8(1).u8(0).u8(5);
  };
  auto req = [](Writer& w, uint8_t op, uint8_t node, uint8_t name) {
    w.u8(0x20).u8(0).u8(op).u8(0).u32(0).u8(0).u8(4).u8(node).u8(1).u8(name);
  };
  Writer hello, open, dup, close, bad;
  table(hello), req(hello, 0, 0, 0);
  table(open), req(open, 1, 1, 0), req(open, 1, 1, 1), req(open, 1, 9, 0);
  table(dup), req(dup, 1, 0, 0), req(dup, 1, 0, 0), req(dup, 2, 0, 0), req(dup, 1, 0, 0);
  table(close), req(close, 2, 0, 0), req(close, 2, 0, 0);
  table(bad);
  bad.u8(0x00).u16(3).u8(1).u8(2).u8(3);  // short
  bad.u8(0x21).u8(0xff).u32(7).u32(99).u32(1).u32(0).u32(40).u32(100).u64(77).u8(0xff).u64(5).u8(0xc0);
  put("hello", hello.b);
  put("open", open.b);
  put("open_twice", dup.b);
  put("close", close.b);
  put("hostile", bad.b);
}

}  // namespace
}  // namespace imago::fuzz

IMAGO_FUZZ_TARGET(imago::fuzz::no_init, imago::fuzz::seeds, imago::fuzz::run)
