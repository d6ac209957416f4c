// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kernels that move token rows out to slots: dispatch (x's rows into
// recv, every entry's weight into recv_w) and the gradient rows of
// combine's backward (grad_out's rows, times each slot's weight, into
// grad_y); and the padding ranges' zero rows of both.
//
// One warp per token reads its row once, in 16-byte pieces where rows
// allow, and writes each piece into the slot of every entry of the token,
// primaries and duplicates alike. On one GPU that is the contract's
// transport (the row reaches each destination rank once, with the primary,
// and the destination copies it into its duplicates' slots) without the
// second read of each primary's slot: the bits written are the same.
#pragma once

#include "layer_params.cuh"

namespace moonep::cuda::layer {

// Per token (r, t < s_r) of every rank: each valid entry k's slot gets the
// token's row of `from` [R][S][H] (kScale: each element
// round_T(scale[slot] * x), else the bits), and, where w_out is set,
// w_out[slot] = w_in[r][t][k].
template <class T, bool kScale>
__global__ void scatter_rows(LayerParams p, const T* from, const typename Arith<T>::A* w_in,
                             typename Arith<T>::A* w_out, const typename Arith<T>::A* scale, T* to) {
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  __shared__ i64 s_slot[kWarpsPerBlock][32];
  __shared__ A s_scale[kWarpsPerBlock][32];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 N = static_cast<i64>(p.S) * p.K;
  for (i64 u = global_warp(); u < static_cast<i64>(p.R) * p.S; u += warp_count()) {
    const int r = static_cast<int>(u / p.S);
    const i64 t = u % p.S;
    bool in_step;
    const TokenEntry e = token_entry(p, r, t, lane, &in_step);
    if (!in_step) continue;  // the same for the whole warp
    if (e.valid() && w_out) w_out[e.slot] = w_in[static_cast<i64>(r) * N + t * p.K + lane];
    s_slot[wib][lane] = e.slot;
    if (kScale) s_scale[wib][lane] = e.valid() ? scale[e.slot] : A(0);
    const unsigned entries = __ballot_sync(0xffffffffu, e.valid());
    __syncwarp();
    const T* row = from + (static_cast<i64>(r) * p.S + t) * p.H;
    if (p.vec16 && !kScale) {
      // The bits: each 16-byte piece straight from the load into every
      // slot, kept in a register (a T array here costs local memory:
      // 12% of dispatch's time on an H100).
      const int4* row4 = reinterpret_cast<const int4*>(row);
      for (i64 j = lane; j < p.row_bytes / 16; j += 32) {
        const int4 v = __ldg(row4 + j);
        for (unsigned m = entries; m; m &= m - 1)
          reinterpret_cast<int4*>(to + s_slot[wib][__ffs(m) - 1] * p.H)[j] = v;
      }
    } else if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        T piece[V];
        load_piece(row + h0, piece);
        for (unsigned m = entries; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          T* dst = to + s_slot[wib][k] * p.H + h0;
          if (kScale) {
            T scaled[V];
#pragma unroll
            for (int j = 0; j < V; ++j) M::store(scaled, j, M::mul(s_scale[wib][k], M::load(piece, j)));
            store_piece(dst, scaled);
          } else {
            store_piece(dst, piece);
          }
        }
      }
    } else {
      for (i64 h = lane; h < p.H; h += 32) {
        const T v = row[h];
        for (unsigned m = entries; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          T* dst = to + s_slot[wib][k] * p.H;
          if (kScale) {
            M::store(dst, h, M::mul(s_scale[wib][k], M::load(&v, 0)));
          } else {
            dst[h] = v;
          }
        }
      }
    }
    __syncwarp();  // the shared slots are rewritten by the warp's next token
  }
}

// Per destination, a warp per padding range: zero rows and, where
// `weights` is set, weight 0; each range clipped to 0..NvS.
template <class T>
__global__ void zero_padding(LayerParams p, T* rows, typename Arith<T>::A* weights) {
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31;
  for (i64 u = global_warp(); u < static_cast<i64>(p.R) * p.groups; u += warp_count()) {
    const int d = static_cast<int>(u / p.groups);
    const i64 j = u % p.groups;
    const std::int32_t* zf = field(p.plan.zero_fill_ranges, p, d);
    const i64 from = zf[2 * j] < 0 ? 0 : zf[2 * j];
    const i64 to = from + zf[2 * j + 1] > p.NvS ? p.NvS : from + zf[2 * j + 1];
    const i64 base = static_cast<i64>(d) * p.NvS;
    for (i64 s = from; s < to; ++s) {
      if (lane == 0 && weights) weights[base + s] = 0;
      T* row = rows + (base + s) * p.H;
      if (p.vec16) {
        for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V)
          *reinterpret_cast<int4*>(row + h0) = make_int4(0, 0, 0, 0);
      } else {
        for (i64 h = lane; h < p.H; h += 32) row[h] = T(0.0f);
      }
    }
  }
}

}  // namespace moonep::cuda::layer
