// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: virtual circuits (reliability/circuits/). Five CircuitNodes in a line
// (1-2-3-4-5, circuit_sim.h) with real circuits between them, and hostile input at the
// middle nodes: raw bytes, frames the nodes really sent replayed with byte flips (resealed or
// not), SETUPs built field by field (any origin, destination, nonce, VCI, hop count), data
// frames with guessed or real VCIs, opens and closes, links dying, time.
//
// Input: a byte of loss (per 256), then ops: an op byte, then its fields (Reader).
//
// Invariants: no crash or sanitizer report; tables within their bounds (max_circuits,
// max_pending); every end hears up then down, or down, once, naming the right peer
// (EndChecker); circuits up at both ends with the links between them alive carry frames both
// ways; and once the input stops, every origin closes and the idle time passes: every table
// at every node is empty.
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_common.h"
#include "tests/reliability/circuit_sim.h"

namespace imago::fuzz {
namespace {

using namespace imago::rel::circ;
using imago::rel::circ::test::CircuitRunStats;
using imago::rel::circ::test::CircuitSim;
using imago::rel::circ::test::EndChecker;

constexpr NodeId kNodes = 5;
constexpr uint64_t kMs = 1'000'000;

CircuitConfig config() {
  CircuitConfig c;
  c.max_circuits = 16;
  c.max_pending = 4;
  c.setup_retry_ns = 5 * kMs;
  c.setup_tries = 3;
  c.idle_ns = 50 * kMs;
  return c;
}

struct Harness {
  CircuitSim s{make_line(kNodes), 1, config()};
  EndChecker ends;
  CircuitRunStats st;
  std::vector<NodeId> nodes{1, 2, 3, 4, 5};
  std::vector<Bytes> seen;  ///< frames the nodes sent, to replay

  Harness() {
    s.drop = [this](NodeId, PortId, std::span<const uint8_t> f) {
      if (seen.size() < 64) seen.emplace_back(f.begin(), f.end());
      return false;
    };
  }
  void check() {
    const std::string err = ends.sync(s, nodes, &st);
    if (!err.empty()) fail(err.c_str(), __FILE__, __LINE__);
    for (NodeId n : nodes) {
      FUZZ_CHECK(s.cn(n).in_use() <= config().max_circuits);
      FUZZ_CHECK(s.cn(n).pending() <= config().max_pending);
    }
  }
};

void seal_if(Bytes& f, bool seal) {
  if (!seal || f.size() < sizeof(CircuitHeader)) return;
  const int body = circ_body_len(f[1]);
  circ_seal(f.data(), body >= 0 && f.size() == sizeof(CircuitHeader) + static_cast<size_t>(body) ? body : 0);
}

void op_forged_setup(Harness& h, Reader& in) {
  Bytes f(sizeof(CircuitHeader) + sizeof(SetupBody));
  circ_header(f.data(), CircKind::kSetup, 0, in.u8());
  SetupBody b;
  b.origin.set(in.u8() % 8), b.dst.set(in.u8() % 8), b.nonce.set(in.u32()), b.back_vci.set(in.u32());
  std::memcpy(f.data() + sizeof(CircuitHeader), &b, sizeof b);
  circ_seal(f.data(), sizeof b);
  h.s.cn(2 + in.u8() % 3).on_frame(in.u8() % 3, f, h.s.now());
}

void op_replay(Harness& h, Reader& in) {
  if (h.seen.empty()) return;
  Bytes f = h.seen[in.u8() % h.seen.size()];
  const uint8_t flips = in.u8() % 4;
  for (uint8_t i = 0; i < flips && !f.empty(); ++i) f[in.u8() % f.size()] ^= in.u8();
  seal_if(f, in.u8() & 1);
  h.s.cn(2 + in.u8() % 3).on_frame(in.u8() % 3, f, h.s.now());
}

void op_data(Harness& h, Reader& in) {
  const NodeId n = 2 + in.u8() % 3;
  PortId p;
  uint32_t v;
  CircuitId l;
  h.s.cn(n).route_data(in.u8() % 3, in.u32(), h.s.now(), &p, &v, &l);
}

void op_open_close(Harness& h, Reader& in) {
  const NodeId a = 1 + in.u8() % kNodes, b = in.u8() % (kNodes + 2);
  if (in.u8() & 1) {
    CircuitId id;
    if (h.s.cn(a).open(b, h.s.now(), &id) == 0) h.ends.opened(a, id, b);
    return;
  }
  for (const auto& [k, e] : h.ends.ends()) {
    if (k.first != a || !e.origin) continue;
    h.s.cn(a).close(k.second, h.s.now());
    h.ends.closed(k.first, k.second);
    return;
  }
}

void op_walks(Harness& h) {
  for (const auto& [k, e] : h.ends.ends()) {
    if (!e.origin || !e.up) continue;
    NodeId at;
    CircuitId far;
    h.s.walk(k.first, k.second, &at, &far);  // keeps live circuits alive; checked at the end
  }
}

void run_input(Reader& in) {
  Harness h;
  h.s.loss = in.u8() / 256.0;
  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    switch (in.u8() % 8) {
      case 0: h.s.cn(2 + in.u8() % 3).on_frame(in.u8() % 3, in.bytes(in.u8() % 48), h.s.now()); break;
      case 1: op_forged_setup(h, in); break;
      case 2: op_replay(h, in); break;
      case 3: op_data(h, in); break;
      case 4: op_open_close(h, in); break;
      case 5: h.s.kill_link(in.u8() % (kNodes - 1)); break;
      case 6: op_walks(h); break;
      default: h.s.run((1 + in.u8() % 16) * kMs); break;
    }
    h.check();
  }
  // The input is done: no more loss, every origin closes, the idle time passes.
  h.s.loss = 0;
  h.s.drop = nullptr;
  std::vector<EndChecker::Key> origins;
  for (const auto& [k, e] : h.ends.ends())
    if (e.origin) origins.push_back(k);
  for (const auto& k : origins) h.s.cn(k.first).close(k.second, h.s.now()), h.ends.closed(k.first, k.second);
  h.s.run(config().idle_ns * 2 + config().setup_retry_ns * (config().setup_tries + 2));
  h.check();
  for (NodeId n : h.nodes) FUZZ_CHECK(h.s.cn(n).in_use() == 0);
  FUZZ_CHECK(h.ends.ends().empty());
}

void make_seeds(const SeedFn& write) {
  // Open 1->5 and 2->4, let them come up, walk them, a forged SETUP and a replay, a close.
  Writer w;
  w.u8(0);
  w.u8(4).u8(0).u8(4).u8(1);  // open 1 -> 5
  w.u8(4).u8(1).u8(4).u8(1);  // open 2 -> 4
  w.u8(7).u8(4);              // run 5 ms
  w.u8(6);                    // walks
  w.u8(1).u8(8).u8(6).u8(3).u32(77).u32(99).u8(0).u8(0);  // forged SETUP 6 -> 3 at node 2
  w.u8(2).u8(0).u8(1).u8(3).u8(0x10).u8(1).u8(1).u8(1);   // replay frame 0 flipped, resealed
  w.u8(3).u8(1).u8(0).u32(12345);                          // data with a guessed VCI
  w.u8(4).u8(0).u8(0).u8(0);                               // close 1's circuit
  w.u8(5).u8(2);                                           // link 3-4 dies
  w.u8(7).u8(15);
  write("open_walk_forge_close", w.b);
  Writer lossy;
  lossy.u8(40);
  for (int i = 0; i < 6; ++i) lossy.u8(4).u8(static_cast<uint8_t>(i)).u8(static_cast<uint8_t>(5 - i)).u8(1).u8(7).u8(3);
  write("lossy_opens", lossy.b);
}

}  // namespace
}  // namespace imago::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  imago::fuzz::maybe_write_corpus(argc, argv, imago::fuzz::make_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  imago::fuzz::Reader in(data, size);
  imago::fuzz::run_input(in);
  return 0;
}
