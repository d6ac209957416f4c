// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kernels of expert copies (docs/spec/layer.md "Expert copies"), shared
// by the virtual ranks (expert_copies.cu: one launch for every rank, all
// buffers rank-major on one GPU) and the GPU world (gpu_world_copies.cu:
// one launch per rank, each reading its peers' buffers through the
// world's symmetric mapping). Both address a rank's buffer as a base plus
// the rank times a stride, in pieces:
//
//   fetch   blocks per copy slot (d, b) of ranks d0 .. d0+nd-1: the slot's
//           Q values moved as bits from its expert's owner.
//   reduce  blocks per expert e0 .. e0+ne-1 (of one owner or all): the
//           expert's copies found in increasing d then b in the owner's
//           table, added in the accumulation type, rounded once.
//
// What must stay true: a copied expert outside 0..E-1 is skipped, so no
// plan makes these kernels read or write outside the buffers.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace moonep::cuda::copy_kernels {

using i64 = std::int64_t;

constexpr int kThreads = 256;
// The copies of one expert that reduce lists in shared memory; an expert
// with more (R*B above this and copied that often) is summed by scanning
// the table per element instead (same order, same bits, slower).
constexpr int kListed = 512;

struct CopyParams {
  int R, E, B, epn;
  i64 Q;
  const std::int32_t* table;  // rank 0's experts_to_copy [R][B] (a world's launch: its own rank's)
  i64 stride;                 // words from rank r's plan outputs to rank r+1's (a world's launch: 0)
};

// Rank r's own experts_to_copy row `row`, entry b (every rank holds the
// whole [R][B] table; each rank reads its own plan, as the portable path
// does).
__device__ __forceinline__ std::int32_t copied(const CopyParams& p, int r, int row, int b) {
  return p.table[static_cast<i64>(r) * p.stride + static_cast<i64>(row) * p.B + b];
}

// fetch: blockIdx.y (grid-strided) is slot (d - d0)*B + b of the nd ranks
// from d0; the x blocks and threads stride over the slot's `pieces` units
// of U bytes (int4 or char). Expert e lies at experts + (e div epn) *
// owner_stride + (e mod epn) * pieces; slot (d, b) at copies + (d - d0) *
// copy_stride + b * pieces.
template <class U>
__global__ void fetch_kernel(CopyParams p, i64 pieces, int d0, int nd, const U* experts, i64 owner_stride, U* copies,
                             i64 copy_stride) {
  for (i64 slot = blockIdx.y; slot < static_cast<i64>(nd) * p.B; slot += gridDim.y) {
    const int dl = static_cast<int>(slot / p.B), b = static_cast<int>(slot % p.B), d = d0 + dl;
    const std::int32_t e = copied(p, d, d, b);
    if (e < 0 || e >= p.E) continue;
    const U* from = experts + static_cast<i64>(e / p.epn) * owner_stride + static_cast<i64>(e % p.epn) * pieces;
    U* to = copies + static_cast<i64>(dl) * copy_stride + static_cast<i64>(b) * pieces;
    for (i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; j < pieces;
         j += static_cast<i64>(gridDim.x) * blockDim.x)
      to[j] = from[j];
  }
}

template <class T>
struct Acc;
template <>
struct Acc<float> {
  using A = float;
  __device__ static A load(float v) { return v; }
  __device__ static float store(A a) { return a; }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};
template <>
struct Acc<double> {
  using A = double;
  __device__ static A load(double v) { return v; }
  __device__ static double store(A a) { return a; }
  __device__ static A add(A a, A b) { return __dadd_rn(a, b); }
};
template <>
struct Acc<__nv_bfloat16> {
  using A = float;
  __device__ static A load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(A a) { return __float2bfloat16_rn(a); }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};

// V elements of T that move as one unit (16 bytes when V*sizeof(T) == 16).
template <class T, int V>
struct alignas(V * sizeof(T) == 16 ? 16 : alignof(T)) Piece {
  T v[V];
};

// reduce: blockIdx.y (grid-strided) is expert e = e0 + i, i < ne, owned by
// h = e div epn; the first warp lists the slots (d*B + b) holding a copy
// of e, in increasing d then b, from the owner's table; then every thread
// sums its pieces of V elements over that list. Copy slot (d, b) lies at
// grad_copies + d * copier_stride + b * (Q/V); expert e's gradient at
// grad_experts + (e - e0) * (Q/V). An expert without copies is not written.
template <class T, int V>
__global__ void reduce_kernel(CopyParams p, int e0, int ne, const Piece<T, V>* grad_copies, i64 copier_stride,
                              Piece<T, V>* grad_experts) {
  using M = Acc<T>;
  using A = typename M::A;
  __shared__ int list[kListed];
  __shared__ int count;
  const i64 pieces = p.Q / V;
  for (i64 i = blockIdx.y; i < ne; i += gridDim.y) {
    const i64 e = e0 + i;
    const int h = static_cast<int>(e / p.epn);
    __syncthreads();  // the previous expert's list is no longer read
    if (threadIdx.x < 32) {
      // The first warp scans the owner's table 32 slots at a time; a hit's
      // place is the hits before it (lower lanes, earlier rounds), so the
      // list is in increasing slot d*B + b, i.e. increasing d then b.
      const int lane = threadIdx.x, total = p.R * p.B;
      const std::int32_t* row = p.table + static_cast<i64>(h) * p.stride;
      int n = 0;
      for (int base = 0; base < total; base += 32) {
        const int k = base + lane;
        const bool hit = k < total && row[k] == e;
        const unsigned m = __ballot_sync(0xffffffffu, hit);
        const int at = n + __popc(m & ((1u << lane) - 1u));
        if (hit && at < kListed) list[at] = k;
        n += __popc(m);
      }
      if (lane == 0) count = n;
    }
    __syncthreads();
    const int n = count;
    if (n == 0) continue;  // the same for the whole block
    const auto copy_at = [&](int d, int b) {
      return grad_copies + static_cast<i64>(d) * copier_stride + static_cast<i64>(b) * pieces;
    };
    for (i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; j < pieces;
         j += static_cast<i64>(gridDim.x) * blockDim.x) {
      Piece<T, V> own = grad_experts[i * pieces + j];
      A acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = M::load(own.v[k]);
      if (n <= kListed) {
        for (int c = 0; c < n; ++c) {
          const Piece<T, V> g = copy_at(list[c] / p.B, list[c] % p.B)[j];
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] = M::add(acc[k], M::load(g.v[k]));
        }
      } else {
        for (int d = 0; d < p.R; ++d)
          for (int b = 0; b < p.B; ++b) {
            if (copied(p, h, d, b) != e) continue;
            const Piece<T, V> g = copy_at(d, b)[j];
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] = M::add(acc[k], M::load(g.v[k]));
          }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) own.v[k] = M::store(acc[k]);
      grad_experts[i * pieces + j] = own;
    }
  }
}

// Blocks along x for `pieces` units per row: enough for one row to fill
// the GPU (about 2 blocks per SM of an H100), never more than it needs.
// Rows whose slot is unused (or whose expert has no copies) exit at once,
// so a step that uses few of the R*B slots still moves them at full rate.
inline unsigned x_blocks(i64 pieces) {
  const i64 want = (pieces + kThreads - 1) / kThreads, fill = 2 * 132;
  const i64 b = want < fill ? want : fill;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}
inline unsigned y_blocks(i64 rows) { return static_cast<unsigned>(rows < 1 ? 1 : (rows > 65535 ? 65535 : rows)); }

// Launches reduce_kernel for T, in pieces of 16 bytes when `vec`.
template <class T>
void launch_reduce(const CopyParams& p, bool vec, int e0, int ne, const void* gc, i64 copier_stride_bytes, void* gp,
                   cudaStream_t stream) {
  if (vec) {
    constexpr int V = 16 / sizeof(T);
    const dim3 grid(x_blocks(p.Q / V), y_blocks(ne));
    reduce_kernel<T, V><<<grid, kThreads, 0, stream>>>(p, e0, ne, static_cast<const Piece<T, V>*>(gc),
                                                       copier_stride_bytes / 16, static_cast<Piece<T, V>*>(gp));
  } else {
    const dim3 grid(x_blocks(p.Q), y_blocks(ne));
    reduce_kernel<T, 1><<<grid, kThreads, 0, stream>>>(p, e0, ne, static_cast<const Piece<T, 1>*>(gc),
                                                       copier_stride_bytes / static_cast<i64>(sizeof(T)),
                                                       static_cast<Piece<T, 1>*>(gp));
  }
}

// Launches fetch_kernel, in int4 pieces when `vec` (Q*size a multiple of
// 16 and every base 16-byte aligned), else bytes. Strides in bytes.
inline void launch_fetch(const CopyParams& p, bool vec, i64 bytes, int d0, int nd, const void* experts,
                         i64 owner_stride_bytes, void* copies, i64 copy_stride_bytes, cudaStream_t stream) {
  if (vec) {
    const i64 pieces = bytes / 16;
    fetch_kernel<int4><<<dim3(x_blocks(pieces), y_blocks(static_cast<i64>(nd) * p.B)), kThreads, 0, stream>>>(
        p, pieces, d0, nd, static_cast<const int4*>(experts), owner_stride_bytes / 16, static_cast<int4*>(copies),
        copy_stride_bytes / 16);
  } else {
    fetch_kernel<char><<<dim3(x_blocks(bytes), y_blocks(static_cast<i64>(nd) * p.B)), kThreads, 0, stream>>>(
        p, bytes, d0, nd, static_cast<const char*>(experts), owner_stride_bytes, static_cast<char*>(copies),
        copy_stride_bytes);
  }
}

}  // namespace moonep::cuda::copy_kernels
