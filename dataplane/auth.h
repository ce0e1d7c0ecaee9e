/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Frame authentication: a per-cluster key and the 16-byte tag that proves a frame was made by
 * a holder of it. The tag is keyed BLAKE2b (RFC 7693) with a 16-byte output, computed by
 * libsodium's crypto_generichash_blake2b (no home-made cryptography), personalised with
 * "imago-link-v1" so the key's tags mean nothing to any other protocol. docs/PROTOCOL.md
 * ("Frame authentication tag") gives the exact bytes covered; encap.h places the tag.
 *
 * Why keyed BLAKE2b: it is a MAC by construction (a PRF when keyed, no HMAC nesting needed),
 * one pass over the frame, faster than HMAC-SHA-256/512 on every frame size we send (see
 * bench/auth_bench.cc), and safe with one long-lived key (unlike Poly1305, a one-time MAC).
 *
 * Pure: no DPDK. The key is loaded and libsodium initialised on the control path
 * (auth_key_load, auth_key_from_bytes); auth_tag and auth_verify never allocate.
 */
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace imago::dp {

/** Bytes of a cluster key. */
inline constexpr size_t kAuthKeyBytes = 32;
/** Bytes of the tag appended to each authenticated frame (128 bits). */
inline constexpr size_t kAuthTagBytes = 16;

/** A cluster key. Make one with auth_key_load() or auth_key_from_bytes(): they initialise
 *  libsodium, which auth_tag() and auth_verify() rely on. */
struct AuthKey {
  std::array<uint8_t, kAuthKeyBytes> bytes{};
};

/**
 * Initialise libsodium (idempotent, thread-safe); control path.
 * @return 0, or -EIO when libsodium cannot start.
 */
int auth_init();

/**
 * Make a key from @p raw (exactly kAuthKeyBytes bytes, not all zero).
 * @return 0; -EINVAL (wrong length, all zero); -EIO (libsodium failed to start).
 */
int auth_key_from_bytes(std::span<const uint8_t> raw, AuthKey& key);

/**
 * Read a key from the file @p path: exactly 32 raw bytes (`head -c 32 /dev/urandom`), or 64
 * hexadecimal digits optionally followed by white space (`openssl rand -hex 32`). Only a
 * regular file: a FIFO (whose opening would wait for a writer), a device or a directory is
 * refused without being read.
 * @return 0; -ENOENT/-EACCES/... (the file cannot be read: -errno); -EINVAL (not a regular
 *         file, not a key, or all zero); -EIO (libsodium failed to start). On error @p err
 *         says why.
 */
int auth_key_load(const std::string& path, AuthKey& key, std::string* err);

/**
 * The value of an `--auth-key FILE` option: load the key from @p path (never from the command
 * line, where ps would show it) into @p key, or print why not to stderr after "@p prog: ".
 * @return true when loaded.
 */
bool auth_key_option(const std::string& path, std::optional<AuthKey>& key, const char* prog);

/** Write the tag of the @p len bytes at @p data under @p key to @p tag (kAuthTagBytes). */
void auth_tag(const AuthKey& key, const uint8_t* data, size_t len, uint8_t* tag);

/** @return true when @p tag (kAuthTagBytes) is the tag of @p data under @p key; compared in
 *  constant time. */
bool auth_verify(const AuthKey& key, const uint8_t* data, size_t len, const uint8_t* tag);

}  // namespace imago::dp
