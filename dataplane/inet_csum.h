/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The Internet checksum (RFC 1071) for IPv4 headers and UDP with its pseudo-header.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace imago::dp {

/** Add @p len bytes (big-endian 16-bit words) to a 32-bit ones'-complement accumulator. */
uint32_t csum_add(uint32_t sum, const void* data, size_t len);
/** Fold an accumulator to 16 bits and complement it: the value stored in a header. */
uint16_t csum_finish(uint32_t sum);

/** @return the checksum to store in an IPv4 header whose checksum field is zero. */
uint16_t ipv4_header_csum(const void* ip_hdr, size_t ihl_bytes);

/** @return the accumulator of the UDP pseudo-header (addresses host order, protocol 17). */
uint32_t udp_pseudo_sum(uint32_t src_ip, uint32_t dst_ip, size_t udp_len);

/**
 * @return the UDP checksum over pseudo-header, UDP header (checksum field zero) and payload,
 *         never 0 (0 is sent as 0xFFFF).
 */
uint16_t udp_csum(uint32_t src_ip, uint32_t dst_ip, const void* udp, size_t udp_len);

/**
 * As udp_csum() for a datagram in two parts: @p head_len bytes at @p udp, then @p rest_len
 * at @p rest (a payload sent by reference, chained behind the headers).
 */
uint16_t udp_csum2(uint32_t src_ip, uint32_t dst_ip, const void* udp, size_t head_len, const void* rest,
                   size_t rest_len);

}  // namespace imago::dp
