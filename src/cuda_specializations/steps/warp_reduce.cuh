// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the warp and block reductions and scans the steps are built
// from. Steps 2-3 run these in serial loops on the critical path, so each
// is as few dependent instructions as the hardware allows.
#pragma once

#include "launch.cuh"

namespace moonep::cuda::impl {
namespace {

// Largest value, ties to the lowest index (idx INT_MAX = none): two
// single-instruction warp reductions (sm_80+) instead of a shuffle ladder.
__device__ __forceinline__ void warp_argmax_low(int& v, int& i) {
  const int m = __reduce_max_sync(0xffffffffu, v);
  i = static_cast<int>(__reduce_min_sync(0xffffffffu, v == m ? static_cast<unsigned>(i) : 0xffffffffu));
  v = m;
}
// Smallest value, ties to the lowest index.
__device__ __forceinline__ void warp_argmin_low(int& v, int& i) {
  const int m = __reduce_min_sync(0xffffffffu, v);
  i = static_cast<int>(__reduce_min_sync(0xffffffffu, v == m ? static_cast<unsigned>(i) : 0xffffffffu));
  v = m;
}
__device__ __forceinline__ int warp_sum(int v) { return __reduce_add_sync(0xffffffffu, v); }

// Inclusive prefix of v over the warp's lanes.
__device__ __forceinline__ int warp_inclusive_scan(int v, int lane) {
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

// Exclusive prefix over the block's threads (all threads must call).
__device__ int block_exclusive_scan(int v, int* s_scan) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int incl = warp_inclusive_scan(v, lane);
  if (lane == 31) s_scan[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = lane < kWarps ? s_scan[lane] : 0;
    w = warp_inclusive_scan(w, lane);
    if (lane < kWarps) s_scan[lane] = w;  // inclusive warp totals
  }
  __syncthreads();
  const int before = warp > 0 ? s_scan[warp - 1] : 0;
  __syncthreads();  // s_scan may be reused by the caller right away
  return before + incl - v;
}

}  // namespace
}  // namespace moonep::cuda::impl
