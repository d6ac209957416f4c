// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test support for the CUDA MoE layer's tests (test_cuda_moe_layer,
// test_cuda_moe_layer_backward): one step's data drawn as
// support/layer_cases.hpp draws it, the experts rounded to T (so the
// direct layer, in double, sees the parameters the GPU sees), and the
// comparison of a GPU result with the direct layer's.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "support/cuda_layer_support.hpp"
#include "support/layer_cases.hpp"

namespace cuda_layer_test {

using namespace layer_test;

template <class T>
struct MoeData {
  PerRank<T> x, P, grad_out;
  PerRank<moonep::weight_t<T>> w;
  Experts ex;  // the experts as T holds them
};

template <class T>
MoeData<T> draw_data(const Step& s, int H, int O, Values v, std::uint64_t seed) {
  const Config& c = s.c;
  Draw draw(v, seed);
  MoeData<T> d;
  d.x = rows_of<T>(c, c.tokens, H, s.tokens, draw);
  d.w = rows_of<moonep::weight_t<T>>(c, c.tokens, c.topk, s.tokens, draw, true);
  d.grad_out = rows_of<T>(c, c.tokens, O, s.tokens, draw);
  d.ex = draw_experts(c, H, O, v, seed + 1);
  for (double& m : d.ex.m) m = from(to<T>(m));
  d.P = owner_parameters<T>(c, d.ex);
  return d;
}

// Tolerance, relative to the largest magnitude of the expected array: 0
// for exact data in float or double (every product and sum exact, so any
// order gives the exact result), otherwise about T's rounding of the
// intermediate y and of the result.
template <class T>
double tolerance(Values v) {
  if (v == Values::exact && sizeof(T) >= 4) return 0;
  return sizeof(T) == 2 ? 1.0 / 32 : (sizeof(T) == 4 ? 1e-5 : 1e-12);
}

// got [R][rows][width] (flat) against want for rows t < s_r (within the
// tolerance), and rows past s_r still holding `untouched`'s bits. With
// only_rank >= 0, got holds that rank's rows alone and only they are
// compared (the tolerance still scaled by the whole of want).
template <class V>
void compare_rows(const char* what, const Step& s, std::int64_t rows, std::int64_t width, const std::vector<V>& got,
                  const std::vector<std::vector<double>>& want, double rel, V untouched, int only_rank = -1) {
  double scale = 0;
  for (const auto& r : want)
    for (double v : r) scale = std::fmax(scale, std::fabs(v));
  const double tol = rel * (1 + scale);
  std::size_t wrong = 0, kept = 0;
  std::string first;
  for (int r = only_rank < 0 ? 0 : only_rank; r < (only_rank < 0 ? s.c.ranks : only_rank + 1); ++r)
    for (std::int64_t t = 0; t < rows; ++t)
      for (std::int64_t j = 0; j < width; ++j) {
        const std::int64_t row = (only_rank < 0 ? r * rows : 0) + t;
        const V g = got[static_cast<std::size_t>(row * width + j)];
        if (t < s.tokens[r]) {
          const double w = want[r][static_cast<std::size_t>(t * width + j)];
          if (!(std::fabs(from(g) - w) <= tol)) {
            if (wrong++ == 0)
              first = "rank " + std::to_string(r) + " row " + std::to_string(t) + " col " + std::to_string(j) +
                      ": " + std::to_string(from(g)) + " vs " + std::to_string(w);
          }
        } else {
          kept += same_bits(g, untouched) ? 0 : 1;
        }
      }
  INFO(what << ": first wrong " << first << " (tolerance " << tol << ")");
  CHECK(wrong == 0);
  CHECK(kept == 0);
}

// The steps of both tests: layer_test's (full, ragged, B < epn with one
// slot, one rank per token, R = 1), B < epn copying everything, and every
// entry copied to every rank.
inline std::vector<std::pair<std::string, Step>> moe_steps() {
  std::vector<std::pair<std::string, Step>> steps = layer_steps();
  steps.emplace_back("B < epn copying everything", synthetic_step(Config{4, 16, 3, 12, 2, 2}, 0.5, 22, false));
  steps.emplace_back("copied to every rank", copy_everywhere_step());
  return steps;
}

}  // namespace cuda_layer_test
