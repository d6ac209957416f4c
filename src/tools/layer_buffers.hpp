// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-layer: its flat C-order arrays (doubles read from or
// written to .npy files) as the reference layer's per-rank buffers of the
// computation's element type, and back.
#pragma once

#include <cstdint>
#include <vector>

#include "moonep/layer_reference.hpp"

namespace moonep::tools {

// A [R][...] array as per-rank buffers of T (values rounded to T).
template <class T>
PerRank<T> to_ranks(const std::vector<double>& v, int ranks) {
  const std::size_t per = v.size() / static_cast<std::size_t>(ranks);
  PerRank<T> out(ranks);
  for (int r = 0; r < ranks; ++r) {
    out[r].reserve(per);
    for (std::size_t i = 0; i < per; ++i)
      out[r].push_back(static_cast<T>(static_cast<accum_t<T>>(v[r * per + i])));
  }
  return out;
}
template <class T>
std::vector<double> from_ranks(const PerRank<T>& data) {
  std::vector<double> v;
  for (const auto& rank : data)
    for (const T& x : rank) v.push_back(static_cast<double>(static_cast<accum_t<T>>(x)));
  return v;
}

// Zero-filled buffers: what the contract leaves unwritten (rows past s_r,
// undefined slots) is written as 0.
template <class V>
PerRank<V> zeros(int ranks, std::int64_t per_rank) {
  return PerRank<V>(ranks, std::vector<V>(static_cast<std::size_t>(per_rank), static_cast<V>(accum_t<V>(0))));
}

}  // namespace moonep::tools
