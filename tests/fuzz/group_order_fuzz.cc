// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: an ordered group endpoint's ordering (api/group_order.h). Three members
// (tests/api/order_net.h): 2 and 3 are real and follow the protocol; member 1 is the target,
// and the input also puts hostile messages in the members' names (and in a stranger's) into
// its streams: raw bytes, records with a valid head and any body (DATA with any stamp, CREDIT,
// CTL of any kind and field, GONE of anyone), and group events of any kind (the engine
// side's own, kEventNodeGone, too).
//
// Input: a byte of mode and window, a byte of seed (interleaving), then ops: an op byte, then
// its fields (Reader).
//
// Invariants: no crash or sanitizer report; what member 1 holds stays within its bounds;
// every buffer comes back exactly once (nothing leaks, nothing is given back twice: ASan);
// and when nothing hostile was sent, member 1 delivers each of 2's and 3's messages once, in
// their order.
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/api/order_net.h"
#include "tests/fuzz/fuzz_common.h"

namespace imago::fuzz {
namespace {

using namespace imago::api::test;

constexpr uint32_t kN = 3;

struct Harness {
  Net net;
  bool hostile = false;
  bool ok = false;
  std::vector<uint32_t> last_seq = std::vector<uint32_t>(kN, 0);

  order::Mode mode;
  uint32_t window;

  explicit Harness(uint8_t mode_window)
      : mode(mode_window & 1 ? order::Mode::kTotal : order::Mode::kCausal), window(1 + (mode_window >> 1) % 8) {
    ok = build(net, kN, mode, window);
    net.refuse = 0.05;
  }
  ~Harness() {
    close_all(net);
    FUZZ_CHECK(net.buffers == 0);
  }

  void send(Member& me) {
    uint8_t head[order::kMaxRecord];
    if (me.g.prepare(head) != 0) return;
    uint8_t body[8] = {0xA5};
    const uint32_t seq = me.sent_msgs + 1;
    std::memcpy(body + 4, &seq, 4);
    const int rc = me.send({head, me.g.head_len()}, body, false);
    me.g.sent(rc == 0);
    me.sent_msgs += rc == 0;
  }

  void receive(Member& me, uint8_t want) {
    imago_msg out[8];
    const int n = me.g.receive(out, 1 + want % 8, [&me](imago_msg* in, unsigned max) { return pull(me, in, max); });
    FUZZ_CHECK(n >= 0 || n == -ECONNRESET);
    for (int i = 0; i < n; ++i) {
      imago_msg& d = out[i];
      if (!(d.flags & IMAGO_MSG_F_EVENT) && me.id == 1 && !hostile) {
        FUZZ_CHECK(d.len == 8);
        uint32_t seq;
        std::memcpy(&seq, static_cast<uint8_t*>(imago_msg_data(&d)) + 4, 4);
        FUZZ_CHECK(d.src >= 2 && d.src <= kN);
        FUZZ_CHECK(seq == last_seq[d.src - 1] + 1);
        last_seq[d.src - 1] = seq;
      }
      give_back(net, d);
    }
    FUZZ_CHECK(me.g.held() <= 2 * 8 * (kN - 1));
  }

  /** A message from @p src into member 1's stream of it (a stranger's goes in slot 0's). */
  void inject(Reader& r, bool valid_head) {
    hostile = true;
    const uint8_t who = r.u8() % (kN + 1);  // 0: a stranger
    std::vector<uint8_t> b;
    if (valid_head) {
      b.resize(order::kHeadLen);
      const order::Head h{static_cast<order::Kind>(r.u8() % 6), mode, static_cast<uint8_t>(kN),
                          order::fingerprint(mode, window, net.ids)};
      order::put_head(b.data(), h);
    }
    const auto rest = r.bytes(r.u8() % 64);
    b.insert(b.end(), rest.begin(), rest.end());
    imago_msg d = make(net, who == 0 ? 77 : who, b, {});
    net.m[0]->in[who == 0 ? 1 : who - 1].push_back(d);
  }

  void event(Reader& r) {
    hostile = true;
    const uint8_t k = r.u8() % 9;  // 8: the engine side's word that a node died
    const uint32_t kind = k == 8 ? imago::api::order::kEventNodeGone : k, reason = r.u8() % 6;
    const NodeId source = r.u8() % (kN + 2), member = r.u8() % (kN + 2);
    net.m[0]->events.push_back(imago::api::test::event(kind, source, member, reason));
  }
};

}  // namespace
}  // namespace imago::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace imago::fuzz;
  Reader r(data, size);
  Harness h(r.u8());
  if (!h.ok) return 0;
  h.net.rng.seed(r.u8());
  for (int ops = 0; !r.empty() && ops < 4000; ++ops) {
    const uint8_t op = r.u8();
    Member& m = *h.net.m[op % kN];
    switch ((op >> 2) % 6) {
      case 0: h.send(m); break;
      case 1: h.receive(m, r.u8()); break;
      case 2: h.inject(r, false); break;
      case 3: h.inject(r, true); break;
      case 4: h.event(r); break;
      default:
        for (int i = 0; i < 8; ++i) h.receive(*h.net.m[static_cast<size_t>(i) % kN], 7);
    }
  }
  return 0;
}
