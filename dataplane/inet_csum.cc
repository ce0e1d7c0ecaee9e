// SPDX-License-Identifier: BSD-3-Clause
#include "inet_csum.h"

#include <cstring>

#include "reliability/be.h"

namespace imago::dp {

uint32_t csum_add(uint32_t sum, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t acc = sum;
  // Summing 32-bit big-endian halves equals summing 16-bit words modulo 2^16 - 1, and each
  // addend is below 2^33, so the 64-bit accumulator cannot overflow for any frame size.
  for (; len >= 8; len -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v = byteswap_if_little(v);
    acc += (v >> 32) + (v & 0xFFFFFFFFu);
  }
  for (; len >= 2; len -= 2, p += 2) acc += static_cast<uint32_t>(p[0] << 8 | p[1]);
  if (len) acc += static_cast<uint32_t>(p[0] << 8);
  while (acc >> 32) acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

uint16_t csum_finish(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xFFFF);
}

uint16_t ipv4_header_csum(const void* ip_hdr, size_t ihl_bytes) {
  return csum_finish(csum_add(0, ip_hdr, ihl_bytes));
}

uint32_t udp_pseudo_sum(uint32_t src_ip, uint32_t dst_ip, size_t udp_len) {
  return (src_ip >> 16) + (src_ip & 0xFFFF) + (dst_ip >> 16) + (dst_ip & 0xFFFF) + 17u +
         static_cast<uint32_t>(udp_len);
}

uint16_t udp_csum(uint32_t src_ip, uint32_t dst_ip, const void* udp, size_t udp_len) {
  return udp_csum2(src_ip, dst_ip, udp, udp_len, nullptr, 0);
}

uint16_t udp_csum2(uint32_t src_ip, uint32_t dst_ip, const void* udp, size_t head_len, const void* rest,
                   size_t rest_len) {
  uint32_t sum = csum_add(udp_pseudo_sum(src_ip, dst_ip, head_len + rest_len), udp, head_len);
  if (rest_len != 0) {
    // After an odd head the rest's bytes sit in the other half of each 16-bit word: its
    // folded sum, byte-swapped, is what they add (RFC 1071, byte order independence).
    uint32_t r = csum_add(0, rest, rest_len);
    while (r >> 16) r = (r & 0xFFFF) + (r >> 16);
    if (head_len % 2) r = ((r & 0xFF) << 8) | (r >> 8);
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);  // folded first: the add cannot wrap
    sum += r;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  }
  const uint16_t c = csum_finish(sum);
  return c == 0 ? 0xFFFF : c;
}

}  // namespace imago::dp
