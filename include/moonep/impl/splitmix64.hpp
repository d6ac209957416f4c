// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/splitmix64.hpp — the one small random generator MoonEP uses
// (synthetic routings, randomized tests). Our own rather than <random>'s
// distributions, whose outputs differ between standard libraries, so a
// seed means the same routing everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace moonep::impl {

struct SplitMix64 {
  std::uint64_t state;

  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller).
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Uniform in [0, n), n > 0 (modulo bias is irrelevant at test sizes).
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(static_cast<int>(v.size()))]; }
};

}  // namespace moonep::impl
