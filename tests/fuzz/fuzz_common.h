// SPDX-License-Identifier: BSD-3-Clause
// What every fuzz target shares: a forward reader over the fuzz input (structure the
// mutator can keep: an op byte, then its fields, in order), an invariant check that stops the
// run with a reason, and the --write-corpus=DIR mode that writes a target's seed inputs
// (made with the real encoders and engines) instead of fuzzing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace imago::fuzz {

using Bytes = std::vector<uint8_t>;

/** Stop the run: libFuzzer saves the input as a crash. */
[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "\n==fuzz== invariant broken at %s:%d: %s\n", file, line, what);
  std::abort();
}
#define FUZZ_CHECK(cond)                                       \
  do {                                                         \
    if (!(cond)) ::imago::fuzz::fail(#cond, __FILE__, __LINE__); \
  } while (0)

/** Reads the fuzz input front to back; past the end every read yields zeros. */
class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return off_ >= n_; }
  size_t left() const { return n_ - off_; }
  uint8_t u8() { return off_ < n_ ? d_[off_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
  uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
  uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }
  /** @return up to @p n bytes (fewer at the end of the input). */
  std::span<const uint8_t> bytes(size_t n) {
    n = std::min(n, left());
    std::span<const uint8_t> s(d_ + off_, n);
    off_ += n;
    return s;
  }
  std::span<const uint8_t> rest() { return bytes(left()); }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t off_ = 0;
};

/** Builds a seed input in the layout a Reader takes apart. */
struct Writer {
  Bytes b;
  Writer& u8(uint8_t v) { return b.push_back(v), *this; }
  Writer& u16(uint16_t v) { return u8(static_cast<uint8_t>(v)).u8(static_cast<uint8_t>(v >> 8)); }
  Writer& u32(uint32_t v) { return u16(static_cast<uint16_t>(v)).u16(static_cast<uint16_t>(v >> 16)); }
  Writer& u64(uint64_t v) { return u32(static_cast<uint32_t>(v)).u32(static_cast<uint32_t>(v >> 32)); }
  Writer& bytes(std::span<const uint8_t> s) { return b.insert(b.end(), s.begin(), s.end()), *this; }
};

/** Where the seeds of a target go: set by --write-corpus=DIR, empty when fuzzing. */
using SeedFn = std::function<void(const std::string& name, const Bytes& input)>;

/**
 * Call from LLVMFuzzerInitialize. With --write-corpus=DIR among the arguments, call
 * @p make_seeds with a writer into DIR (which must exist) and exit; otherwise return.
 */
inline void maybe_write_corpus(int* argc, char*** argv, void (*make_seeds)(const SeedFn&)) {
  static constexpr char kFlag[] = "--write-corpus=";
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp((*argv)[i], kFlag, sizeof kFlag - 1) != 0) continue;
    const std::string dir = (*argv)[i] + sizeof kFlag - 1;
    unsigned n = 0;
    make_seeds([&](const std::string& name, const Bytes& input) {
      const std::string path = dir + "/" + name;
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr || std::fwrite(input.data(), 1, input.size(), f) != input.size()) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::exit(1);
      }
      std::fclose(f);
      ++n;
    });
    std::printf("%u seeds written to %s\n", n, dir.c_str());
    std::exit(0);
  }
}

}  // namespace imago::fuzz

/**
 * Define a target's libFuzzer entry points: @p init() once (set-up the target needs), then
 * --write-corpus=DIR with @p seeds, then each input to @p run(Reader&).
 */
#define IMAGO_FUZZ_TARGET(init, seeds, run)                             \
  extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {       \
    init();                                                            \
    ::imago::fuzz::maybe_write_corpus(argc, argv, seeds);              \
    return 0;                                                          \
  }                                                                    \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    ::imago::fuzz::Reader in(data, size);                              \
    run(in);                                                           \
    return 0;                                                          \
  }

namespace imago::fuzz {
/** For IMAGO_FUZZ_TARGET: a target with nothing to set up. */
inline void no_init() {}
}  // namespace imago::fuzz
