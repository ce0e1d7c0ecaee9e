// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: dataplane/encap.h decode_frame() over hostile frames, both encapsulations,
// with and without a cluster key.
//
// Input: a mode byte (bit 0: UDP instead of L2; bit 1: a cluster key; bit 2: build the
// frame with the real encoder, then mutate it), then either the frame itself, or the
// encoder's fields (link type, payload, destination IP) and a few byte flips and a length
// change. The encoder mode gets the fuzzer past the IP and UDP checksums and the tag.
//
// Invariants: every call counts exactly one outcome (accepted, or one rejection reason);
// an accepted payload lies inside the frame, and its tag too; re-encoding an accepted
// payload decodes to the same bytes; an unmutated encoder frame is always accepted.
#include <cstdint>
#include <cstring>
#include <memory>

#include "dataplane/encap.h"
#include "dataplane/encap_headers.h"
#include "reliability/wire.h"
#include "tests/fuzz/capture.h"
#include "tests/fuzz/fuzz_common.h"

namespace imago::fuzz {
namespace {

constexpr uint8_t kUdp = 0x01, kKeyed = 0x02, kEncode = 0x04;
constexpr size_t kMaxFrame = 9216;  // a jumbo frame: the longest any port hands us

dp::AuthKey g_key;

dp::EncapConfig config(uint8_t mode) {
  dp::EncapConfig c;
  c.kind = (mode & kUdp) ? dp::Encap::Udp : dp::Encap::L2;
  c.src_mac = dp::MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
  c.dst_mac = dp::MacAddr{{0x02, 0, 0, 0, 0, 0x02}};
  c.src_ip = 0x0A000001;
  c.dst_ip = 0x0A000002;
  if (mode & kKeyed) c.auth = g_key;
  return c;
}

// A frame in a buffer of exactly its length, so any read past it is an ASan report.
struct Frame {
  std::unique_ptr<uint8_t[]> p;
  size_t len = 0;
  explicit Frame(std::span<const uint8_t> b) : p(new uint8_t[b.size() ? b.size() : 1]), len(b.size()) {
    if (len) std::memcpy(p.get(), b.data(), len);
  }
};

// Decode once and check the outcome is counted exactly once and lies inside the frame.
bool decode_checked(const dp::EncapConfig& cfg, const Frame& f, dp::DecodedFrame& out) {
  dp::DecodeCounters c;
  const bool ok = dp::decode_frame(cfg, f.p.get(), f.len, out, c);
  FUZZ_CHECK(c.accepted + c.total_rejected() == 1);
  FUZZ_CHECK(ok == (c.accepted == 1));
  for (size_t i = 0; i < dp::kDecodeErrorCount; ++i)
    if (c.rejected[i]) FUZZ_CHECK(dp::decode_error_name(static_cast<dp::DecodeError>(i)) != nullptr);
  if (!ok) return false;
  FUZZ_CHECK(out.type == dp::LinkType::Raw || out.type == dp::LinkType::Reliability || out.type == dp::LinkType::Circuit);
  const uint8_t* end = f.p.get() + f.len;
  FUZZ_CHECK(out.payload >= f.p.get() + dp::encap_header_len(cfg.kind));
  FUZZ_CHECK(out.payload + out.payload_len + dp::encap_trailer_len(cfg) <= end);
  return true;
}

// Build a frame with the real encoder: headers, checksums and tag all correct.
Bytes encode(const dp::EncapConfig& cfg, uint8_t type, std::span<const uint8_t> payload) {
  Bytes b(dp::encap_header_len(cfg.kind) + payload.size() + dp::encap_trailer_len(cfg));
  if (!payload.empty()) std::memcpy(b.data() + dp::encap_header_len(cfg.kind), payload.data(), payload.size());
  const size_t n = dp::encode_frame(cfg, b.data(), static_cast<dp::LinkType>(type),
                                    static_cast<uint16_t>(payload.size()));
  FUZZ_CHECK(n == b.size());
  return b;
}

void run(Reader& in) {
  const uint8_t mode = in.u8();
  dp::EncapConfig cfg = config(mode);
  Bytes frame;
  bool pristine = false;  // an unmutated frame of the encoder: must decode
  if (mode & kEncode) {
    const uint8_t type = in.u8() & 1 ? 2 : 1;  // the two link types the encoder is given
    cfg.dst_ip = in.u32();                     // a multicast group changes the MAC
    const size_t len = std::min<size_t>(in.u16(), kMaxFrame);
    frame = encode(cfg, type, in.bytes(len));
    pristine = true;
    for (uint8_t flips = in.u8() & 7; flips > 0 && !frame.empty(); --flips) {
      const size_t at = in.u16() % frame.size();
      frame[at] ^= in.u8();
      pristine = false;
    }
    if (const int8_t grow = static_cast<int8_t>(in.u8()); grow != 0) {
      frame.resize(grow < 0 ? frame.size() - std::min<size_t>(frame.size(), size_t(-grow)) : frame.size() + grow);
      pristine = pristine && grow > 0;  // Ethernet padding after the frame is fine
    }
  } else {
    auto rest = in.bytes(kMaxFrame);
    frame.assign(rest.begin(), rest.end());
  }
  const Frame f(frame);
  dp::DecodedFrame out;
  const bool ok = decode_checked(cfg, f, out);
  if (pristine) FUZZ_CHECK(ok);
  if (!ok) return;
  // Round trip: what was accepted encodes again to a frame that decodes to the same payload.
  const Frame again(encode(cfg, static_cast<uint8_t>(out.type), {out.payload, out.payload_len}));
  dp::DecodedFrame out2;
  FUZZ_CHECK(decode_checked(cfg, again, out2));
  FUZZ_CHECK(out2.type == out.type && out2.payload_len == out.payload_len);
  FUZZ_CHECK(std::memcmp(out2.payload, out.payload, out.payload_len) == 0);
}

// Seeds: each captured engine frame in both encapsulations, keyed and not, as raw frames and
// as encoder inputs; plus a few degenerate ones.
void seeds(const SeedFn& put) {
  const std::vector<Bytes> conv = capture_conversation();
  int i = 0;
  for (const Bytes& payload : conv) {
    if (i >= 12) break;  // the shapes repeat after the first exchanges
    for (uint8_t mode : {uint8_t{0}, kUdp, kKeyed, uint8_t(kUdp | kKeyed)}) {
      Writer raw;
      raw.u8(mode).bytes(encode(config(mode), 2, payload));
      put("raw_" + std::to_string(i) + "_m" + std::to_string(mode), raw.b);
    }
    Writer enc;
    enc.u8(kEncode | (i & 1 ? kUdp : 0)).u8(1).u32(i % 3 ? 0x0A000002 : 0xE0000105).u16(static_cast<uint16_t>(payload.size()));
    enc.bytes(payload).u8(0).u8(0);
    put("enc_" + std::to_string(i), enc.b);
    ++i;
  }
  put("empty_l2", Writer().u8(0).b);
  put("raw_type_udp", Writer().u8(kUdp).bytes(encode(config(kUdp), 1, Bytes(64, 0xAB))).b);
  put("padded_l2", Writer().u8(0).bytes(encode(config(0), 1, Bytes(4, 1))).bytes(Bytes(40, 0)).b);
}

dp::AuthKey make_key() {
  uint8_t raw[dp::kAuthKeyBytes];
  for (size_t i = 0; i < sizeof raw; ++i) raw[i] = static_cast<uint8_t>(0x5A + i);
  dp::AuthKey k;
  if (dp::auth_key_from_bytes(raw, k) != 0) std::abort();
  return k;
}

void init() { g_key = make_key(); }

}  // namespace
}  // namespace imago::fuzz

IMAGO_FUZZ_TARGET(imago::fuzz::init, imago::fuzz::seeds, imago::fuzz::run)
