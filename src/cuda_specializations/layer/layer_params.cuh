// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What every kernel of the CUDA layer (VirtualRankLayer) shares: the
// shape and plan pointers (LayerParams), the walk over tokens one warp at a
// time, the decoding of a token's K entries into slots, row pieces of 16
// bytes, and arithmetic rounded step by step (Arith) as the host computes.
//
// What must stay true: a slot handed to a kernel body is inside the
// buffers (0 <= slot < R*NvS) whatever the plan holds, and an entry counts
// only if it lies below its rank's count of entries, read on the device.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "moonep/cuda_planner.hpp"

namespace moonep::cuda::layer {

using i64 = std::int64_t;

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 32 * kWarpsPerBlock;

// The shape, the plans (rank r's outputs at rank 0's pointers + r *
// plan_stride words) and how rows move.
struct LayerParams {
  int R, K, S, NvS, groups;
  i64 H;            // elements per row
  i64 row_bytes;    // H * element size
  bool vec16;       // rows move as int4: row_bytes % 16 == 0 and every base 16-byte aligned
  DeviceRankPlan plan;  // rank 0's
  i64 plan_stride;  // words from rank r's plan fields to rank r+1's
};

__device__ __forceinline__ const std::int32_t* field(const std::int32_t* rank0, const LayerParams& p, int r) {
  return rank0 + static_cast<i64>(r) * p.plan_stride;
}

__device__ __forceinline__ i64 global_warp() {
  return (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
}
__device__ __forceinline__ i64 warp_count() { return (static_cast<i64>(gridDim.x) * blockDim.x) >> 5; }

// A token's K entries as lane k sees entry k: its slot (in 0..R*NvS-1, or
// -1 when the entry is past the rank's count or its destination is out of
// range), whether it is a primary, and its destination rank.
struct TokenEntry {
  i64 slot;
  bool primary;
  int rank;
  __device__ bool valid() const { return slot >= 0; }
};

// Entry t*K + lane of a rank's dst (n_r entries) decoded; -1 slot when
// lane >= K, the entry is past n_r or its destination is out of range.
__device__ __forceinline__ TokenEntry decode_entry(const std::int32_t* dst, i64 n_r, int K, int R, int NvS, i64 t,
                                                   int lane) {
  TokenEntry e{-1, false, -1};
  const i64 i = t * K + lane;
  if (lane >= K || i >= n_r) return e;
  const std::int32_t code = dst[i];
  const i64 c = code >= 0 ? code : -static_cast<i64>(code) - 1;
  if (c >= static_cast<i64>(R) * NvS) return e;
  e.slot = c;
  e.primary = code >= 0;
  e.rank = static_cast<int>(c / NvS);
  return e;
}

// Lane `lane` decodes entry `lane` of token t of rank r; `in_step` is
// whether the token lies below the rank's count (the same for the warp).
__device__ __forceinline__ TokenEntry token_entry(const LayerParams& p, int r, i64 t, int lane, bool* in_step) {
  const i64 N = static_cast<i64>(p.S) * p.K, n_r = *field(p.plan.entries, p, r);
  *in_step = t * p.K < n_r && n_r <= N;
  if (!*in_step) return TokenEntry{-1, false, -1};
  return decode_entry(field(p.plan.dst, p, r), n_r, p.K, p.R, p.NvS, t, lane);
}

// Element conversions and arithmetic rounded step by step (no FMA).
template <class T>
struct Arith;
template <>
struct Arith<float> {
  using A = float;
  __device__ static A load(const float* v, i64 j) { return v[j]; }
  __device__ static void store(float* v, i64 j, A a) { v[j] = a; }
  __device__ static A mul(A a, A b) { return __fmul_rn(a, b); }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};
template <>
struct Arith<double> {
  using A = double;
  __device__ static A load(const double* v, i64 j) { return v[j]; }
  __device__ static void store(double* v, i64 j, A a) { v[j] = a; }
  __device__ static A mul(A a, A b) { return __dmul_rn(a, b); }
  __device__ static A add(A a, A b) { return __dadd_rn(a, b); }
};
template <>
struct Arith<__nv_bfloat16> {
  using A = float;
  __device__ static A load(const __nv_bfloat16* v, i64 j) { return __bfloat162float(v[j]); }
  __device__ static void store(__nv_bfloat16* v, i64 j, A a) { v[j] = __float2bfloat16_rn(a); }
  __device__ static A mul(A a, A b) { return __fmul_rn(a, b); }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};

// V elements of T as one 16-byte piece.
template <class T, int V>
__device__ __forceinline__ void load_piece(const T* from, T (&v)[V]) {
  static_assert(V * sizeof(T) == 16, "one 16-byte piece");
  *reinterpret_cast<int4*>(v) = __ldg(reinterpret_cast<const int4*>(from));
}
template <class T, int V>
__device__ __forceinline__ void store_piece(T* to, const T (&v)[V]) {
  static_assert(V * sizeof(T) == 16, "one 16-byte piece");
  *reinterpret_cast<int4*>(to) = *reinterpret_cast<const int4*>(v);
}

// <a, b> over one row of H elements: A(0), then + each product in
// increasing h (the contract's serial order), 16-byte pieces when `vec16`.
template <class T>
__device__ __forceinline__ typename Arith<T>::A dot_row(const T* a, const T* b, i64 H, bool vec16) {
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  A acc = A(0);
  if (vec16) {
    for (i64 h0 = 0; h0 < H; h0 += V) {
      T x[V], y[V];
      load_piece(a + h0, x);
      load_piece(b + h0, y);
#pragma unroll
      for (int j = 0; j < V; ++j) acc = M::add(acc, M::mul(M::load(x, j), M::load(y, j)));
    }
  } else {
    for (i64 h = 0; h < H; ++h) acc = M::add(acc, M::mul(M::load(a, h), M::load(b, h)));
  }
  return acc;
}

inline int blocks_for(i64 warps) {
  const i64 b = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

}  // namespace moonep::cuda::layer
