// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The layer's data: token activations X [R][S][H], routing weights
// w [R][S][K] (each token's K weights sum to 1) and expert weights
// W [E][H][H'], all in the execution space's memory. Values come from a
// fixed hash so the example prints the same numbers on every machine.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include <moonep/config.hpp>

namespace moe {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using Array2 = Kokkos::View<double**, Kokkos::LayoutRight, Mem>;
using Array3 = Kokkos::View<double***, Kokkos::LayoutRight, Mem>;
using Array4 = Kokkos::View<double****, Kokkos::LayoutRight, Mem>;

struct LayerData {
  int hidden = 0;  // H
  int out = 0;     // H'
  Array3 x;        // [R][S][H]   token activations, per source rank
  Array3 w;        // [R][S][K]   routing weights
  Array3 weights;  // [E][H][H']  expert e's weights, owned by rank e / epn
};

// Uniform in [-1, 1) from a 64-bit key (splitmix64 finaliser).
inline double hashed_uniform(std::uint64_t key) {
  key += 0x9e3779b97f4a7c15ull;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ull;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebull;
  key ^= key >> 31;
  return static_cast<double>(key >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

inline LayerData make_layer_data(const moonep::Config& c, int hidden, int out) {
  LayerData d;
  d.hidden = hidden;
  d.out = out;
  d.x = Array3("X", c.ranks, c.tokens, hidden);
  d.w = Array3("routing_weights", c.ranks, c.tokens, c.topk);
  d.weights = Array3("W", c.experts, hidden, out);
  auto x = Kokkos::create_mirror_view(d.x);
  auto w = Kokkos::create_mirror_view(d.w);
  auto W = Kokkos::create_mirror_view(d.weights);
  std::uint64_t key = 0;
  for (int r = 0; r < c.ranks; ++r)
    for (int s = 0; s < c.tokens; ++s) {
      for (int h = 0; h < hidden; ++h) x(r, s, h) = hashed_uniform(++key);
      double sum = 0;  // positive weights normalised per token, as after a softmax
      for (int k = 0; k < c.topk; ++k) sum += (w(r, s, k) = 1.1 + hashed_uniform(++key));
      for (int k = 0; k < c.topk; ++k) w(r, s, k) /= sum;
    }
  for (int e = 0; e < c.experts; ++e)
    for (int h = 0; h < hidden; ++h)
      for (int o = 0; o < out; ++o) W(e, h, o) = hashed_uniform(++key) / hidden;
  Kokkos::deep_copy(d.x, x);
  Kokkos::deep_copy(d.w, w);
  Kokkos::deep_copy(d.weights, W);
  return d;
}

}  // namespace moe
