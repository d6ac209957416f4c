// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kernel that brings slot rows back to their tokens: combine (y's
// rows, weighted by recv_w or not) and dispatch's backward (grad_recv's
// rows, unweighted).
//
// The contract's order (docs/spec/layer.md, "Combine"): for each primary of
// a token, part = w_p * y_p, then + w_q * y_q for its duplicates (the
// token's later entries on the same destination rank) in increasing k,
// all in the accumulation type A; then acc = the part of the lowest-k
// primary, + each later primary's part in increasing k; rounded to T once.
// On one GPU the source reads the duplicates' rows itself and keeps each
// partial row in registers: the same operations in the same order, so the
// same bits as a prologue at the destination, without a partial buffer
// written and read back.
#pragma once

#include "layer_params.cuh"

namespace moonep::cuda::layer {

// out[r][t] for every token t < s_r of every rank (rows past s_r
// untouched). scale null: unweighted.
template <class T>
__global__ void gather_rows(LayerParams p, const T* y, const typename Arith<T>::A* scale, T* out) {
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  __shared__ i64 s_slot[kWarpsPerBlock][32];
  __shared__ A s_w[kWarpsPerBlock][32];
  __shared__ unsigned s_dups[kWarpsPerBlock][32];  // for primary k: the lanes of its duplicates
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  for (i64 u = global_warp(); u < static_cast<i64>(p.R) * p.S; u += warp_count()) {
    const int r = static_cast<int>(u / p.S);
    const i64 t = u % p.S;
    bool in_step;
    const TokenEntry e = token_entry(p, r, t, lane, &in_step);
    if (!in_step) continue;  // the same for the whole warp
    s_slot[wib][lane] = e.slot;
    s_w[wib][lane] = e.valid() && scale ? scale[e.slot] : A(1);
    const unsigned primaries = __ballot_sync(0xffffffffu, e.valid() && e.primary);
    const bool duplicate = e.valid() && !e.primary;
    for (unsigned m = primaries; m; m &= m - 1) {
      const int k = __ffs(m) - 1;
      const int rank_k = __shfl_sync(0xffffffffu, e.rank, k);
      const unsigned dups = __ballot_sync(0xffffffffu, duplicate && e.rank == rank_k && lane > k);
      if (lane == 0) s_dups[wib][k] = dups;
    }
    __syncwarp();
    T* o = out + (static_cast<i64>(r) * p.S + t) * p.H;
    if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        A acc[V];
        bool first = true;
        for (unsigned m = primaries; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          T piece[V];
          load_piece(y + s_slot[wib][k] * p.H + h0, piece);
          A part[V];
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const A v = M::load(piece, j);
            part[j] = scale ? M::mul(s_w[wib][k], v) : v;
          }
          for (unsigned q = s_dups[wib][k]; q; q &= q - 1) {
            const int kq = __ffs(q) - 1;
            load_piece(y + s_slot[wib][kq] * p.H + h0, piece);
#pragma unroll
            for (int j = 0; j < V; ++j) {
              const A v = M::load(piece, j);
              part[j] = M::add(part[j], scale ? M::mul(s_w[wib][kq], v) : v);
            }
          }
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = first ? part[j] : M::add(acc[j], part[j]);
          first = false;
        }
        if (first) break;  // no primary in range (never for a planned token): nothing to write
        T piece[V];
#pragma unroll
        for (int j = 0; j < V; ++j) M::store(piece, j, acc[j]);
        store_piece(o + h0, piece);
      }
    } else {
      for (i64 h = lane; h < p.H; h += 32) {
        A acc = A(0);
        bool first = true;
        for (unsigned m = primaries; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          const A v = M::load(y, s_slot[wib][k] * p.H + h);
          A part = scale ? M::mul(s_w[wib][k], v) : v;
          for (unsigned q = s_dups[wib][k]; q; q &= q - 1) {
            const int kq = __ffs(q) - 1;
            const A vq = M::load(y, s_slot[wib][kq] * p.H + h);
            part = M::add(part, scale ? M::mul(s_w[wib][kq], vq) : vq);
          }
          acc = first ? part : M::add(acc, part);
          first = false;
        }
        if (first) break;
        M::store(o, h, acc);
      }
    }
    __syncwarp();  // the shared slots are rewritten by the warp's next token
  }
}

}  // namespace moonep::cuda::layer
