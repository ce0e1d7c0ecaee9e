/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A small, fast, seeded pseudo-random generator (xoshiro256**, seeded by splitmix64).
 *
 * Everything random in imago that must replay (fault injection, the simulator, property
 * tests) draws from one of these, so a seed reproduces a run exactly.
 */
#pragma once

#include <cstdint>

namespace imago {

class Rng {
 public:
  explicit Rng(uint64_t seed) { reseed(seed); }

  /** Restart the sequence from @p seed. */
  void reseed(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9E3779B97F4A7C15ull;  // splitmix64 spreads any seed, even 0, over the state
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }

  /** @return 64 uniformly random bits. */
  uint64_t next() {
    uint64_t r = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }

  /** @return a double uniform in [0, 1). */
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /** @return true with probability @p p (p <= 0 never draws, so a zero knob costs nothing). */
  bool chance(double p) { return p > 0 && uniform() < p; }
  /** @return an integer uniform in [0, n); n must be > 0. */
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace imago
