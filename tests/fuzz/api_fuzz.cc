// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: what the API checks when an application hands it hostile arguments, as far as
// it is reachable without EAL.
//
//   mode 0  argument vectors of imago_attach_embedded() and imagod: dp::split_args() and
//           api::parse_runtime_options() (with --fault-rx specs, and --auth-key files whose
//           content is the fuzzer's);
//   mode 1  handles (imago_t*, imago_ep_t*): api::HandleTable against a model, with forged,
//           stale and twice-closed handles;
//   mode 2  loan ids of descriptors and zero-copy buffers (imago_release, imago_send_zc,
//           imago_buf_free): api::LoanTable against a model, with forged, stale, foreign and
//           twice-returned ids, hand-over and reclaim;
//   mode 3  the shared table's checks on application values: ShmRoot::in_pools() (zero-copy
//           buffer pointers) and ShmRoot::node_index() (node ids), against a reference.
//
// The control messages imagod takes from secondaries have a target of their own (control_fuzz).
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <type_traits>
#include <string>
#include <vector>

#include "api/handles.h"
#include "api/imago_msg.h"
#include "api/loan.h"
#include "api/options.h"
#include "api/shm.h"
#include "dataplane/eal_args.h"
#include "tests/fuzz/fuzz_common.h"

namespace imago::fuzz {
namespace {

using api::LoanTable;

// --- mode 0: argument vectors ---

std::string g_key_file;  // --auth-key values are written here and the option pointed at it

// argv from the input: NUL-separated strings (a NULL pointer in argv is the caller's bug,
// not a hostile value: never generated).
void args(Reader& in) {
  std::vector<std::string> strs;
  std::string cur;
  for (auto b : in.rest()) {
    if (b == 0) {
      strs.push_back(std::move(cur));
      cur.clear();
      if (strs.size() == 64) break;
    } else {
      cur.push_back(static_cast<char>(b));
    }
  }
  if (strs.size() < 64) strs.push_back(cur);
  // The key file's content is the value after --auth-key; the option reads it from a file.
  for (size_t i = 0; i + 1 < strs.size(); ++i) {
    if (strs[i] != "--auth-key") continue;
    FILE* f = std::fopen(g_key_file.c_str(), "wb");
    FUZZ_CHECK(f != nullptr);
    std::fwrite(strs[i + 1].data(), 1, strs[i + 1].size(), f);
    std::fclose(f);
    strs[i + 1] = g_key_file;
  }
  std::vector<const char*> argv;
  for (const auto& s : strs) argv.push_back(s.c_str());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(strs.size());
  const dp::ArgSplit sp = dp::split_args(argc, argv.data());
  FUZZ_CHECK(sp.prog == strs[0]);
  size_t dash = 0;
  for (size_t i = 1; i < strs.size() && !dash; ++i)
    if (strs[i] == "--") dash = i;
  FUZZ_CHECK(sp.explicit_eal == (dash != 0));
  FUZZ_CHECK(sp.eal.size() == (dash ? dash - 1 : 0));
  FUZZ_CHECK(sp.app.size() == strs.size() - (dash ? dash + 1 : 1));

  api::RuntimeOptions o;
  std::string err;
  const int rc = api::parse_runtime_options(sp.app, o, &err);
  FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EINVAL);
  if (rc == -EINVAL) FUZZ_CHECK(!err.empty());
  if (rc != 0) return;
  // What was accepted is in range: the runtime sizes pools and rings from it.
  FUZZ_CHECK(o.node_id >= 1 && o.node_id <= UINT32_MAX);
  for (const auto& p : o.peers) FUZZ_CHECK(p.id >= 1 && p.id <= UINT32_MAX);
  FUZZ_CHECK(o.pool_max > IMAGO_MSG_INLINE_MAX && o.pool_max <= api::kFrameClass);
  FUZZ_CHECK(o.max_message >= 1024 && o.pool_buffers >= 64);
  const rel::Config& c = o.protocol.engine;
  FUZZ_CHECK(c.dead_after_ns >= 10 * rel::kMs && c.dead_after_ns <= 3'600'000 * rel::kMs);
  FUZZ_CHECK(o.protocol.mtu >= 576 && o.protocol.mtu <= 9000);
  FUZZ_CHECK(c.rto_min_ns > c.ack_delay_ns && c.rto_min_ns <= c.rto_max_ns && c.rto_initial_ns <= c.rto_max_ns);
  FUZZ_CHECK(o.fault_rx.drop >= 0 && o.fault_rx.drop <= 1);  // --loss and --fault-rx loss= alike
  FUZZ_CHECK(o.stats_period_s >= 0 && o.duration_s >= 0);
  if (o.auth_key) {
    bool zero = true;
    for (auto b : o.auth_key->bytes) zero = zero && b == 0;
    FUZZ_CHECK(!zero);
  }
}

// --- mode 1: handles ---

void handles(Reader& in) {
  constexpr unsigned kN = 4;
  auto table = std::make_unique<api::HandleTable<int, kN>>();
  std::map<uintptr_t, int> live;  // handle -> value
  std::vector<uintptr_t> issued;  // every handle ever returned (stale ones included)
  int next_value = 1;
  while (!in.empty()) {
    const uint8_t op = in.u8();
    // A handle to try: one issued (live or stale), one of those altered, or any value.
    auto pick = [&]() -> uintptr_t {
      const uint8_t m = in.u8();
      if (issued.empty() || m >= 0xC0) return static_cast<uintptr_t>(in.u64());
      uintptr_t h = issued[m % issued.size()];
      if (m & 0x80) h ^= uintptr_t{1} << (in.u8() % 64);
      return h;
    };
    switch (op % 4) {
      case 0: {
        const int v = next_value++;
        const uintptr_t h = table->add([&](int& obj) { obj = v; });
        FUZZ_CHECK((h == 0) == (live.size() == kN));
        if (h == 0) break;
        FUZZ_CHECK(h > 0xffff && !live.count(h));  // never null nor a small integer
        live[h] = v;
        issued.push_back(h);
        break;
      }
      case 1: {
        const uintptr_t h = pick();
        int* obj = table->get(h);
        FUZZ_CHECK((obj != nullptr) == (live.count(h) == 1));
        if (obj) FUZZ_CHECK(*obj == live[h]);
        break;
      }
      case 2: {
        const uintptr_t h = pick();
        FUZZ_CHECK(table->remove(h) == (live.erase(h) == 1));
        break;
      }
      default: {
        size_t n = 0, known = 0;
        table->for_each([&](uintptr_t h) { ++n, known += live.count(h); });
        FUZZ_CHECK(n == live.size() && known == n);
      }
    }
  }
}

// --- mode 2: loans ---

// What the table must hold: per slot, its generation and the loan in it (if any). Plain
// arrays, cleared with memset: the model must cost less than the table.
struct LoanModel {
  struct Loan {
    bool live;
    bool handed;
    uint16_t gen;
    uint64_t owner;
  };
  Loan slot[LoanTable::kSlots];
  size_t n_live = 0;
  std::vector<uint32_t> issued;  // ids returned by lend() (the first 4096)

  void init() {
    std::memset(slot, 0, sizeof slot);
    n_live = 0;
    issued.clear();
  }
  /** @return the live loan @p id names, or nullptr (stale, forged, returned). */
  Loan* find(uint32_t id) {
    if (id >> LoanTable::kIndexBits > 0xffff) return nullptr;
    Loan& l = slot[id & (LoanTable::kSlots - 1)];
    return l.live && l.gen == id >> LoanTable::kIndexBits ? &l : nullptr;
  }
  void erase(Loan* l) {
    l->live = false;
    --n_live;
  }
  void clear() {  // generations go on
    for (Loan& l : slot) l.live = false;
    n_live = 0;
  }
};

// Owners as the API makes them: 8-byte aligned, below 2^48, bit 0 the caller's. Some
// selectors give what lend() must refuse (null, bit 1 or 2 set, 2^48 or above).
uint64_t owner_of(uint8_t m) {
  switch (m >> 6) {
    case 0: return 0x10000 + uint64_t(m & 63) * 0x40;        // a handful of buffers
    case 1: return 0x10000 + uint64_t(m & 63) * 0x40 + 1;    // the caller's bit 0
    case 2: return m & 1 ? 0 : 0x10002 + uint64_t(m & 62);   // null, misaligned
    default: return (uint64_t{1} << 48) + m;                  // beyond 48 bits
  }
}

bool owner_ok(uint64_t o) { return o != 0 && (o & 6) == 0 && o < (uint64_t{1} << 48); }

void loans(Reader& in) {
  // One table and model for the process, made new for each input: a table is 64 KiB, and a
  // fresh allocation per input costs more than the input.
  static auto* storage = new std::aligned_storage_t<sizeof(LoanTable), alignof(LoanTable)>;
  static auto* model = new LoanModel;
  LoanTable* t = new (storage) LoanTable();  // every slot free, generations 0
  LoanModel& m = *model;
  m.init();
  auto lend = [&](uint64_t owner, bool handed) {
    const uint32_t id = t->lend(reinterpret_cast<void*>(owner), handed);
    if (id == LoanTable::kNone) {
      FUZZ_CHECK(!owner_ok(owner) || m.n_live == LoanTable::kSlots);
      return;
    }
    FUZZ_CHECK(owner_ok(owner) && m.n_live < LoanTable::kSlots);
    LoanModel::Loan& l = m.slot[id & (LoanTable::kSlots - 1)];
    FUZZ_CHECK(!l.live && id >> LoanTable::kIndexBits == static_cast<uint16_t>(l.gen + 1));
    l = {true, handed, static_cast<uint16_t>(l.gen + 1), owner};
    ++m.n_live;
    if (m.issued.size() < 4096) m.issued.push_back(id);
  };
  unsigned bursts = 0;
  while (!in.empty()) {
    const uint8_t op = in.u8();
    auto pick = [&]() -> uint32_t {  // an id: issued (maybe stale), altered, or any value
      const uint8_t s = in.u8();
      if (m.issued.empty() || s >= 0xC0) return in.u32();
      uint32_t id = m.issued[s % m.issued.size()];
      if (s & 0x80) id ^= 1u << (in.u8() % 32);
      return id;
    };
    switch (op % 9) {
      case 0: {
        const uint64_t owner = owner_of(in.u8());
        lend(owner, in.u8() & 1);
        break;
      }
      case 1: {  // a burst of loans: fills the table (twice per input at most: each costs
                 // thousands of checked calls, and more say nothing new)
        const uint64_t owner = owner_of(in.u8() & 63);
        const unsigned n = in.u16() % 9000;
        for (unsigned i = bursts++ < 2 ? n : 0; i > 0; --i) lend(owner, false);
        break;
      }
      case 2: {
        const uint32_t id = pick();
        LoanModel::Loan* l = m.find(id);
        FUZZ_CHECK(reinterpret_cast<uint64_t>(t->take(id)) == (l ? l->owner : 0));
        if (l) m.erase(l);
        break;
      }
      case 3:
      case 4: {  // a return: claim (by the returner, or the lender's held only), then finish
        const uint32_t id = pick();
        const uint64_t owner = owner_of(in.u8());
        LoanModel::Loan* l = m.find(id);
        const bool held = op % 9 == 4;
        void* o = t->claim(id, reinterpret_cast<void*>(owner), held);
        const bool want = owner != 0 && l && l->owner == owner && !(held && l->handed);
        FUZZ_CHECK(reinterpret_cast<uint64_t>(o) == (want ? owner : 0));
        if (!want) break;
        // Claimed: nobody else takes, peeks or claims it until it is finished.
        FUZZ_CHECK(t->claimed(id, o) && t->take(id) == nullptr && t->peek(id) != o);
        FUZZ_CHECK(t->claim(id, o, false) == nullptr && !t->hand_over(id, o));
        t->finish(id);
        FUZZ_CHECK(!t->claimed(id, o) && t->peek(id) == nullptr);
        m.erase(l);
        break;
      }
      case 5:
      case 6: {  // hand_over / hand_back
        const uint32_t id = pick();
        const uint64_t owner = owner_of(in.u8());
        LoanModel::Loan* l = m.find(id);
        if (op % 9 == 5) {
          const bool want = l && l->owner == owner && !l->handed;
          FUZZ_CHECK(t->hand_over(id, reinterpret_cast<void*>(owner)) == want);
          if (want) l->handed = true;
        } else {
          t->hand_back(id, reinterpret_cast<void*>(owner));
          if (l && l->owner == owner && l->handed) l->handed = false;
        }
        break;
      }
      case 7: {
        const uint32_t id = pick();
        LoanModel::Loan* l = m.find(id);
        FUZZ_CHECK(reinterpret_cast<uint64_t>(t->peek(id)) == (l ? l->owner : 0));
        FUZZ_CHECK(t->handed(id) == (l && l->handed));
        break;
      }
      default:
        if (in.u8() & 1) {
          bool all_owned = true;
          const uint32_t n = t->reclaim([&](void* o) { all_owned = all_owned && o != nullptr; });
          FUZZ_CHECK(n == m.n_live && all_owned);
        } else {
          t->reset();
        }
        m.clear();
    }
    FUZZ_CHECK(t->outstanding() == m.n_live);
  }
}

// --- mode 3: the shared table's checks ---

void shm_checks(Reader& in) {
  static auto* root = new api::ShmRoot();  // 4 MiB (every slot's loan tables): made once
  api::ShmRoot* shm = root;
  shm->n_pool_mem = in.u8() % (api::ShmRoot::kMaxRanges + 1);
  for (uint32_t i = 0; i < shm->n_pool_mem; ++i) {
    const uintptr_t lo = in.u8() & 1 ? static_cast<uintptr_t>(in.u64()) : 0x100000 * (i + 1);
    shm->pool_mem[i] = {lo, lo + (in.u8() & 1 ? static_cast<uintptr_t>(in.u64()) : 0x10000)};
  }
  shm->n_nodes = in.u8() % (api::kMaxNodes + 1);
  for (uint32_t i = 0; i < shm->n_nodes; ++i) shm->node_ids[i] = in.u8() & 1 ? in.u64() : i + 1;
  while (!in.empty()) {
    const uint8_t sel = in.u8();
    uintptr_t p = static_cast<uintptr_t>(in.u64());
    if (shm->n_pool_mem && (sel & 1)) p = shm->pool_mem[sel % shm->n_pool_mem].lo + (p & 0x1ffff);
    const size_t len = sel & 2 ? static_cast<size_t>(in.u64()) : in.u16();
    bool want = false;
    for (uint32_t i = 0; i < shm->n_pool_mem; ++i) {
      const auto& r = shm->pool_mem[i];
      want = want || (p >= r.lo && static_cast<unsigned __int128>(p) + len <= r.hi);
    }
    FUZZ_CHECK(shm->in_pools(reinterpret_cast<const void*>(p), len) == want);
    const uint64_t id = in.u64();
    int want_index = -1;
    for (uint32_t i = 0; i < shm->n_nodes && want_index < 0; ++i)
      if (shm->node_ids[i] == id) want_index = static_cast<int>(i);
    FUZZ_CHECK(shm->node_index(id) == want_index);
  }
}

void run(Reader& in) {
  switch (in.u8() % 4) {
    case 0: return args(in);
    case 1: return handles(in);
    case 2: return loans(in);
    default: return shm_checks(in);
  }
}

// --- seeds ---

Bytes argv_seed(const std::vector<std::string>& a) {
  Writer w;
  w.u8(0);
  for (size_t i = 0; i < a.size(); ++i) {
    if (i) w.u8(0);
    w.bytes({reinterpret_cast<const uint8_t*>(a[i].data()), a[i].size()});
  }
  return w.b;
}

void seeds(const SeedFn& put) {
  // Command lines from docs/USER.md and the DTS suites.
  put("argv_pair", argv_seed({"imagod", "--pair"}));
  put("argv_eal", argv_seed({"imagod", "-l", "0-1", "--vdev", "net_null0", "--", "--node-id", "2", "--peer", "1@02:00:00:00:00:01"}));
  put("argv_udp", argv_seed({"app", "--iface", "veth0", "--node-id", "7", "--peer", "8@10.0.0.8", "--src-ip", "10.0.0.7",
                             "--dead-after-ms", "500", "--max-message", "1048576", "--pool-max", "2048"}));
  put("argv_protocol", argv_seed({"imagod", "--pair", "--mtu", "9000", "--go-back-n", "--no-flow-control", "--no-crc",
                                  "--ack-delay-us", "100", "--rto-min-us", "500", "--rto-max-ms=100", "--dead-after-ms=500"}));
  put("argv_faults", argv_seed({"imagod", "--pair", "--fault-rx", "loss=0.05,burst=0.01,dup=0.01,corrupt=0.001,reorder=0.1,reorder-us=50,delay-us=10,jitter-us=5,seed=3",
                                "--loss", "0.5", "--seed", "9", "--stats-period", "1.5", "--duration", "10"}));
  put("argv_key_hex", argv_seed({"imagod", "--pair", "--auth-key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"}));
  put("argv_key_raw", argv_seed({"imagod", "--pair", "--auth-key", std::string(32, 'k')}));
  put("argv_bad", argv_seed({"imagod", "--node-id", "4294967296", "--peer", "0", "--pool-max", "48", "--help"}));
  put("argv_secondary", argv_seed({"app", "--file-prefix", "imago", "--no-huge", "--engine-lcore", "1", "--pool-buffers", "64"}));
  put("handles", Writer().u8(1).u8(0).u8(0).u8(1).u8(0).u8(2).u8(0).u8(1).u8(0).u8(2).u8(0).u8(1).u8(0x80).u8(20).u8(3).u8(0).u8(0).u8(0).u8(0).u8(0).b);
  put("loans", Writer().u8(2).u8(0).u8(1).u8(0).u8(0).u8(2).u8(1).u8(5).u8(0).u8(1).u8(3).u8(1).u8(1).u8(4).u8(0).u8(2).u8(6).u8(1).u8(2).u8(7).u8(0).u8(2).u8(0).u8(8).u8(1).b);
  put("loans_fill", Writer().u8(2).u8(1).u8(3).u16(8200).u8(2).u8(0x80).u8(5).u8(1).u8(0).u16(8200).u8(8).u8(0).u8(0).u8(3).u8(0).b);
  Writer shm;
  shm.u8(3).u8(3).u8(0).u8(0).u8(0).u8(0).u8(0).u8(0).u8(2).u8(0).u8(0);
  for (uint8_t sel = 0; sel < 4; ++sel) {
    shm.u8(sel).u64(0x100000 + 0x100 * sel);
    sel & 2 ? shm.u64(~uint64_t{0} - sel) : shm.u16(512);
    shm.u64(sel);
  }
  put("shm", shm.b);
}

// --auth-key values are written to a file of our own, removed at exit.
void init() {
  char path[] = "/tmp/imago-fuzz-key-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) std::abort();
  close(fd);
  g_key_file = path;
  std::atexit([] { unlink(g_key_file.c_str()); });
}

}  // namespace
}  // namespace imago::fuzz

IMAGO_FUZZ_TARGET(imago::fuzz::init, imago::fuzz::seeds, imago::fuzz::run)
