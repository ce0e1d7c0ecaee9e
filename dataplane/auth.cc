// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/auth.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace imago::dp {
namespace {

static_assert(kAuthKeyBytes >= crypto_generichash_blake2b_KEYBYTES_MIN &&
              kAuthKeyBytes <= crypto_generichash_blake2b_KEYBYTES_MAX);
static_assert(kAuthTagBytes >= crypto_generichash_blake2b_BYTES_MIN);

// BLAKE2b's personalisation block: a key used for imago link tags makes tags no other use of
// the same key (another protocol, a later tag layout) would accept.
constexpr unsigned char kPersonal[crypto_generichash_blake2b_PERSONALBYTES] = "imago-link-v1";

// A file holding a key is small; anything longer is not one.
constexpr size_t kMaxKeyFile = 256;

bool all_zero(const uint8_t* p, size_t n) { return sodium_is_zero(p, n) == 1; }

bool is_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Read up to @p cap bytes of @p fd into @p buf. @return the count, or -errno.
ssize_t read_all(int fd, uint8_t* buf, size_t cap) {
  size_t n = 0;
  while (n < cap) {
    const ssize_t r = ::read(fd, buf + n, cap - n);
    if (r == 0) break;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    n += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(n);
}

}  // namespace

int auth_init() { return sodium_init() < 0 ? -EIO : 0; }

int auth_key_from_bytes(std::span<const uint8_t> raw, AuthKey& key) {
  if (raw.size() != kAuthKeyBytes || all_zero(raw.data(), raw.size())) return -EINVAL;
  if (int rc = auth_init(); rc < 0) return rc;
  std::memcpy(key.bytes.data(), raw.data(), kAuthKeyBytes);
  return 0;
}

int auth_key_load(const std::string& path, AuthKey& key, std::string* err) {
  // Non-blocking: opening a FIFO for reading waits for a writer (an outside tester's start
  // hung there); it is refused below, as every file that is not a regular one (a device
  // such as /dev/zero, a directory): a key is a small file of its own.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    *err = "cannot read key file " + path + ": " + std::strerror(e);
    return -e;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    *err = "cannot read key file " + path + ": " + std::strerror(e);
    return -e;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    *err = "key file " + path + " is not a regular file (a key is a file of 32 bytes or 64 hex digits)";
    return -EINVAL;
  }
  // Taken, but said: a key others can read is everyone's (the USER.md example is chmod 600).
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    std::fprintf(stderr, "imago: warning: key file %s is open to other users (mode %03o): chmod 600 it\n",
                 path.c_str(), static_cast<unsigned>(st.st_mode & 0777));
  uint8_t buf[kMaxKeyFile + 1];
  const ssize_t got_bytes = read_all(fd, buf, sizeof buf);
  ::close(fd);
  if (got_bytes < 0) {
    *err = "cannot read key file " + path + ": " + std::strerror(static_cast<int>(-got_bytes));
    return static_cast<int>(got_bytes);
  }
  size_t n = static_cast<size_t>(got_bytes);
  uint8_t raw[kAuthKeyBytes];
  int rc = -EINVAL;
  if (n == kAuthKeyBytes) {
    std::memcpy(raw, buf, n);
    rc = 0;
  } else if (n <= kMaxKeyFile) {
    while (n > 0 && is_space(buf[n - 1])) --n;
    size_t got = 0;
    const char* end = nullptr;
    if (n == 2 * kAuthKeyBytes &&
        sodium_hex2bin(raw, sizeof raw, reinterpret_cast<const char*>(buf), n, nullptr, &got, &end) == 0 &&
        got == kAuthKeyBytes && end == reinterpret_cast<const char*>(buf) + n) {
      rc = 0;
    }
  }
  if (rc == 0) rc = auth_key_from_bytes(raw, key);
  sodium_memzero(buf, sizeof buf);
  sodium_memzero(raw, sizeof raw);
  if (rc == -EINVAL) {
    *err = "key file " + path + " holds no key: want 32 bytes, or 64 hex digits, not all zero " +
           "(make one with: head -c 32 /dev/urandom > " + path + ")";
  } else if (rc < 0) {
    *err = "libsodium failed to start";
  }
  return rc;
}

bool auth_key_option(const std::string& path, std::optional<AuthKey>& key, const char* prog) {
  AuthKey k;
  std::string err;
  if (auth_key_load(path, k, &err) < 0) {
    std::fprintf(stderr, "%s: %s\n", prog, err.c_str());
    return false;
  }
  key = k;
  return true;
}

void auth_tag(const AuthKey& key, const uint8_t* data, size_t len, uint8_t* tag) {
  crypto_generichash_blake2b_salt_personal(tag, kAuthTagBytes, data, len, key.bytes.data(), kAuthKeyBytes,
                                           nullptr, kPersonal);
}

bool auth_verify(const AuthKey& key, const uint8_t* data, size_t len, const uint8_t* tag) {
  uint8_t want[kAuthTagBytes];
  auth_tag(key, data, len, want);
  static_assert(kAuthTagBytes == crypto_verify_16_BYTES);
  return crypto_verify_16(want, tag) == 0;
}

}  // namespace imago::dp
