// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The per-entry values of the backward: combine's backward's routing
// weight gradients (a dot product per entry) and dispatch's backward's
// addition of grad_recv_w. One thread per entry (r, i < N_r), entries whose
// destination is out of range skipped.
#pragma once

#include "layer_params.cuh"

namespace moonep::cuda::layer {

inline int blocks_for_threads(i64 threads) { return blocks_for((threads + 31) / 32); }

// The slot of entry i of rank r, or -1 when i is past the rank's count or
// its destination is out of range.
__device__ __forceinline__ i64 entry_slot(const LayerParams& p, int r, i64 i) {
  const i64 N = static_cast<i64>(p.S) * p.K, n_r = *field(p.plan.entries, p, r);
  if (i >= n_r || n_r > N) return -1;
  const std::int32_t code = field(p.plan.dst, p, r)[i];
  const i64 c = code >= 0 ? code : -static_cast<i64>(code) - 1;
  return c < static_cast<i64>(p.R) * p.NvS ? c : -1;
}

// gw[r][i] = <g[r][i div K], y[slot]>: A(0), then + each product in
// increasing h (the contract fixes this serial order, so one thread sums a
// whole row; the threads of a token read the same g).
template <class T>
__global__ void entry_dots(LayerParams p, const T* g, const T* y, typename Arith<T>::A* gw) {
  const i64 N = static_cast<i64>(p.S) * p.K;
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 u = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; u < p.R * N; u += stride) {
    const int r = static_cast<int>(u / N);
    const i64 i = u % N, c = entry_slot(p, r, i);
    if (c < 0) continue;
    gw[u] = dot_row(g + (static_cast<i64>(r) * p.S + i / p.K) * p.H, y + c * p.H, p.H, p.vec16);
  }
}

// gw[r][i] = gw[r][i] + grecv_w[slot], in W (= A).
template <class W>
__global__ void add_slot_weights(LayerParams p, const W* grecv_w, W* gw) {
  const i64 N = static_cast<i64>(p.S) * p.K;
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 u = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; u < p.R * N; u += stride) {
    const i64 c = entry_slot(p, static_cast<int>(u / N), u % N);
    if (c >= 0) gw[u] = gw[u] + grecv_w[c];
  }
}

}  // namespace moonep::cuda::layer
