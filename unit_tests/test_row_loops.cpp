// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The host layers' row loops (src/core/row_loops.hpp) give the bits of a
// plain loop of the same operations, whichever clone the CPU runs (the
// loader picks AVX-512, AVX2 or the baseline): every length from 0 past a
// few vector widths, unaligned starts, values with rounding in every
// product, and for bf16 the narrowing's ties, NaN and overflow.
#include "catch2_compat.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/row_loops.hpp"
#include "moonep/bf16.hpp"
#include "moonep/layer_reference.hpp"

namespace {

using moonep::bf16;

template <class V>
bool same_bits(const std::vector<V>& a, const std::vector<V>& b) {
  // (An empty vector's data() may be null, which memcmp must not get.)
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(V)) == 0);
}

// Values whose products and sums round (a fixed linear congruential draw).
template <class V>
std::vector<V> draw(std::size_t n, std::uint64_t seed) {
  std::vector<V> v(n);
  for (auto& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(seed >> 11) / 9007199254740992.0;  // [0, 1)
    x = V(static_cast<float>((u - 0.4) * 37.3));
  }
  return v;
}

template <class T>
void check_type() {
  using A = moonep::accum_t<T>;
  const A f = A(0.7317f);
  for (std::size_t n = 0; n <= 70; ++n)
    for (std::size_t off = 0; off < 3; ++off) {
      INFO("n = " << n << ", offset " << off);
      const std::vector<T> in_all = draw<T>(n + off, 7 * n + off);
      const std::vector<A> acc_all = draw<A>(n + off, 11 * n + off);
      const T* in = in_all.data() + off;
      std::vector<A> want(n), got(n);

      for (std::size_t h = 0; h < n; ++h) want[h] = f * static_cast<A>(in[h]);
      moonep::rows::scale(got.data(), f, in, std::int64_t(n));
      CHECK(same_bits(want, got));

      for (std::size_t h = 0; h < n; ++h) want[h] = static_cast<A>(in[h]);
      moonep::rows::widen(got.data(), in, std::int64_t(n));
      CHECK(same_bits(want, got));

      for (std::size_t h = 0; h < n; ++h) want[h] = got[h] = acc_all[off + h];
      for (std::size_t h = 0; h < n; ++h) want[h] = want[h] + f * static_cast<A>(in[h]);
      moonep::rows::add_scaled(got.data(), f, in, std::int64_t(n));
      CHECK(same_bits(want, got));

      for (std::size_t h = 0; h < n; ++h) want[h] = got[h] = acc_all[off + h];
      for (std::size_t h = 0; h < n; ++h) want[h] = want[h] + static_cast<A>(in[h]);
      moonep::rows::add(got.data(), in, std::int64_t(n));
      CHECK(same_bits(want, got));

      std::vector<A> thirds(n);
      std::vector<T> want_t(n), got_t(n);
      for (std::size_t h = 0; h < n; ++h) thirds[h] = acc_all[off + h] / A(3);
      for (std::size_t h = 0; h < n; ++h) want_t[h] = static_cast<T>(thirds[h]);
      moonep::rows::narrow(got_t.data(), thirds.data(), std::int64_t(n));
      CHECK(same_bits(want_t, got_t));
    }
}

}  // namespace

TEST_CASE("row loops: the bits of a plain loop, every length and offset") {
  INFO("compiled per instruction set: " << moonep::rows::multiversioned());
  check_type<float>();
  check_type<double>();
  check_type<bf16>();
  // The accumulators' own sums (a token's partial rows at its source).
  std::vector<float> a = draw<float>(37, 3), b = draw<float>(37, 4), want = a;
  for (std::size_t h = 0; h < a.size(); ++h) want[h] = want[h] + b[h];
  moonep::rows::add(a.data(), b.data(), 37);
  CHECK(same_bits(want, a));
}

TEST_CASE("row loops: bf16 rounding's special values survive the vector clones") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Ties to even both ways, the largest finite that rounds to infinity,
  // infinities, NaN (quiet bit set), zeros, a subnormal.
  std::vector<float> in = {1.00390625f, 1.01171875f, 3.3895314e38f, 3.40282347e38f, inf, -inf, nan,
                           -0.0f, 0.0f, 1e-40f, -2.5f, 65504.0f, 1.0f / 3.0f, -7.0f / 9.0f, 1e-3f, 2.0f};
  for (int rep = 0; rep < 3; ++rep) in.insert(in.end(), in.begin(), in.begin() + 16);  // past 16 lanes
  std::vector<bf16> want(in.size()), got(in.size());
  for (std::size_t h = 0; h < in.size(); ++h) want[h] = bf16(in[h]);
  moonep::rows::narrow(got.data(), in.data(), std::int64_t(in.size()));
  CHECK(same_bits(want, got));
  CHECK(want[0].bits == 0x3f80);  // 1 + 2^-8: a tie, to even (down)
  CHECK(want[1].bits == 0x3f82);  // 1 + 3*2^-8: a tie, to even (up)
  CHECK((want[6].bits & 0x7fc0) == 0x7fc0);  // NaN stays a quiet NaN
}
