/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * CRC32C (Castagnoli), the checksum of every imago frame and of the test payloads.
 *
 * Uses the SSE4.2 crc32 instruction (8 bytes per step); the result equals the reflected
 * CRC-32C of iSCSI/ext4 (check value 0xE3069283 for "123456789").
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace imago {

/**
 * Extend a running CRC32C over @p len bytes.
 *
 * @param crc  the value returned by the previous call, or 0 to start.
 * @param data the bytes; may be null when @p len is 0.
 * @param len  number of bytes.
 * @return the CRC32C of everything passed so far.
 */
uint32_t crc32c(uint32_t crc, const void* data, size_t len);

}  // namespace imago
