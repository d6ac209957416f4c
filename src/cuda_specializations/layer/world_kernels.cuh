// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kernels of the GPU world's layer (GpuWorldLayer): the contract's
// transport (docs/spec/layer.md), one launch per rank, each rank's slot
// buffers in its own chunk of a symmetric mapping (rank d's at rank 0's
// pointer + d * rank_bytes), reached from every device of the world.
//
//   source part       world_scatter: a warp per token t < s_r stores the
//                     token's row into its primaries' slots only (once per
//                     destination rank; with kScale a primary without
//                     duplicates gets round_T(w * row), the reference's
//                     bits), and every entry's weight; world_dots: grad_w
//                     per entry.
//   destination part  world_epilogue: each dup group's primary row copied
//                     into its duplicates' slots, padding zeroed;
//                     world_scale_dups (kScale): each dup group's row
//                     scaled into its duplicates' slots and its own;
//                     world_prologue: each primary with duplicates gets its
//                     partial row in A (w_p*y_p, + w_q*y_q in increasing k).
//   source part       world_gather: a warp per token sums, per primary in
//                     increasing k, the partial row (primary with
//                     duplicates) or w*y, rounded to T once.
//
// These are the transport form of the older virtual-rank kernels
// (dispatch_tail, combine_prologue, combine_sum of commit 4ed8c79),
// per rank. The virtual-rank path keeps its one-GPU kernels
// (scatter_kernels.cuh, gather_kernels.cuh) unchanged.
//
// What must stay true: every slot decoded from the plan is checked against
// R*NvS, every dup group index, dup_loffs index and padding range against
// NvS, and an entry counts only below its rank's count of entries, read on
// the device: whatever the plan holds, nothing outside the buffers.
#pragma once

#include <type_traits>

#include "layer_params.cuh"

namespace moonep::cuda::layer {

struct WorldParams {
  int R, K, S, NvS, groups;
  i64 H;           // elements per row of the buffers of this launch
  i64 row_bytes;   // H * sizeof(T)
  bool vec16;      // rows move in 16-byte pieces
  DeviceRankPlan plan;  // this launch's rank's plan
  int rank;        // this launch's rank: the source or the destination
  i64 rank_bytes;  // bytes from rank d's slot buffers to rank d+1's
  // One process per rank: this rank's kStop word (world_barrier.cuh), set
  // once one of its barriers gave up; null in a world held by one process.
  const unsigned* stop;
};

// Every kernel returns at once, before touching anything, when its rank's
// barrier gave up (until GpuWorldLayer::check() clears the word).
__device__ __forceinline__ bool world_stopped(const WorldParams& p) { return p.stop && *p.stop != 0u; }

// Rank d's part of a slot buffer whose rank-0 part is at `base0`.
template <class V>
__device__ __forceinline__ V* rank_part(V* base0, const WorldParams& p, int d) {
  using B = std::conditional_t<std::is_const_v<V>, const char, char>;
  return reinterpret_cast<V*>(reinterpret_cast<B*>(base0) + static_cast<i64>(d) * p.rank_bytes);
}
// Slot c (0 <= c < R*NvS) of a slot buffer of `width` elements per slot.
template <class V>
__device__ __forceinline__ V* slot_at(V* base0, const WorldParams& p, i64 c, i64 width) {
  return rank_part(base0, p, static_cast<int>(c / p.NvS)) + (c % p.NvS) * width;
}

// This launch's rank's count of entries n_r, or -1 when out of 0..S*K.
__device__ __forceinline__ i64 world_entries(const WorldParams& p) {
  const i64 n = *p.plan.entries;
  return n >= 0 && n <= static_cast<i64>(p.S) * p.K ? n : -1;
}

// Entry `lane` of token t of this launch's (source) rank: slot in
// 0..R*NvS-1, or -1 (past the count, lane >= K, destination out of range).
__device__ __forceinline__ TokenEntry world_entry(const WorldParams& p, i64 n_r, i64 t, int lane) {
  return decode_entry(p.plan.dst, n_r, p.K, p.R, p.NvS, t, lane);
}

// A warp copies one row of p.row_bytes; zeroes one.
__device__ __forceinline__ void warp_copy_row(const WorldParams& p, const char* from, char* to, int lane) {
  if (p.vec16) {
    const int4* f = reinterpret_cast<const int4*>(from);
    int4* t = reinterpret_cast<int4*>(to);
    const i64 n = p.row_bytes / 16;
    for (i64 j = lane; j < n; j += 32) t[j] = f[j];
  } else {
    for (i64 j = lane; j < p.row_bytes; j += 32) to[j] = from[j];
  }
}
__device__ __forceinline__ void warp_zero_row(const WorldParams& p, char* to, int lane) {
  if (p.vec16) {
    int4* t = reinterpret_cast<int4*>(to);
    const i64 n = p.row_bytes / 16;
    for (i64 j = lane; j < n; j += 32) t[j] = make_int4(0, 0, 0, 0);
  } else {
    for (i64 j = lane; j < p.row_bytes; j += 32) to[j] = 0;
  }
}

// Which primaries (lanes) of a token have duplicates: a later entry of the
// token that is a duplicate on the same destination rank. The whole warp
// calls it (e: lane k's entry).
__device__ __forceinline__ unsigned primaries_with_dups(const TokenEntry& e, unsigned primaries, int lane) {
  const bool duplicate = e.valid() && !e.primary;
  unsigned with_dups = 0;
  for (unsigned m = primaries; m; m &= m - 1) {
    const int k = __ffs(m) - 1;
    const int rank_k = __shfl_sync(0xffffffffu, e.rank, k);
    if (__any_sync(0xffffffffu, duplicate && e.rank == rank_k && lane > k)) with_dups |= 1u << k;
  }
  return with_dups;
}

// Source rank p.rank, a warp per token t < s_r: the token's row of `from`
// [S][H] into each primary's slot of `to0`, once per destination rank:
// its bits, or with kScale (combine's backward, weighted) round_T(w *
// row) with w = scale0[slot] (recv_w as dispatched) for a primary without
// duplicates, the bits for one with duplicates (the destination scales
// it and its duplicates: world_scale_dups). Where w_out0 is set,
// w_out[slot] = w_in[t][k] for every entry (dispatch's weights).
template <class T, bool kScale>
__global__ void world_scatter(WorldParams p, const T* from, const typename Arith<T>::A* w_in,
                              typename Arith<T>::A* w_out0, const typename Arith<T>::A* scale0, T* to0) {
  if (world_stopped(p)) return;
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  __shared__ i64 s_slot[kWarpsPerBlock][32];
  __shared__ A s_scale[kWarpsPerBlock][32];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 n_r = world_entries(p);
  for (i64 t = global_warp(); t * p.K < n_r; t += warp_count()) {
    const TokenEntry e = world_entry(p, n_r, t, lane);
    if (e.valid() && w_out0) *slot_at(w_out0, p, e.slot, 1) = w_in[t * p.K + lane];
    const unsigned targets = __ballot_sync(0xffffffffu, e.valid() && e.primary);
    const unsigned scaled = kScale ? targets & ~primaries_with_dups(e, targets, lane) : 0u;
    s_slot[wib][lane] = e.slot;
    if (kScale) s_scale[wib][lane] = (scaled >> lane) & 1u ? *slot_at(scale0, p, e.slot, 1) : A(0);
    __syncwarp();
    const T* row = from + t * p.H;
    if (p.vec16 && !kScale) {
      // The bits, each 16-byte piece kept in a register (scatter_kernels.cuh).
      const int4* row4 = reinterpret_cast<const int4*>(row);
      for (i64 j = lane; j < p.row_bytes / 16; j += 32) {
        const int4 v = __ldg(row4 + j);
        for (unsigned m = targets; m; m &= m - 1)
          reinterpret_cast<int4*>(slot_at(to0, p, s_slot[wib][__ffs(m) - 1], p.H))[j] = v;
      }
    } else if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        T piece[V];
        load_piece(row + h0, piece);
        for (unsigned m = targets; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          T* dst = slot_at(to0, p, s_slot[wib][k], p.H) + h0;
          if (kScale && ((scaled >> k) & 1u)) {
            T out[V];
#pragma unroll
            for (int j = 0; j < V; ++j) M::store(out, j, M::mul(s_scale[wib][k], M::load(piece, j)));
            store_piece(dst, out);
          } else {
            store_piece(dst, piece);
          }
        }
      }
    } else {
      for (i64 h = lane; h < p.H; h += 32) {
        const T v = row[h];
        for (unsigned m = targets; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          T* dst = slot_at(to0, p, s_slot[wib][k], p.H);
          if (kScale && ((scaled >> k) & 1u)) {
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

// Destination rank p.rank, after every source's world_scatter<T, true>: a
// warp per dup group, whose primary's slot holds the token's row g (bits):
// each duplicate q gets round_T(w[q] * g), then the primary round_T(w[p] *
// g), w the rank's recv_w. Each thread reads its elements of g before it
// writes them.
template <class T>
__global__ void world_scale_dups(WorldParams p, T* rows0, const typename Arith<T>::A* w0) {
  if (world_stopped(p)) return;
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31;
  T* rows = rank_part(rows0, p, p.rank);
  const A* w = rank_part(w0, p, p.rank);
  const i64 groups = p.plan.dup_counts[0] < 0 ? 0 : (p.plan.dup_counts[0] > p.NvS ? p.NvS : p.plan.dup_counts[0]);
  for (i64 g = global_warp(); g < groups; g += warp_count()) {
    const std::int32_t* grp = p.plan.dup_groups + 3 * g;
    const i64 primary = grp[0];
    if (primary < 0 || primary >= p.NvS) continue;
    const i64 q0 = grp[1] < 0 ? 0 : grp[1];
    const i64 q1 = static_cast<i64>(grp[1]) + grp[2] > p.NvS ? p.NvS : static_cast<i64>(grp[1]) + grp[2];
    T* prow = rows + primary * p.H;
    if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        T piece[V], out[V];
        *reinterpret_cast<int4*>(piece) = *reinterpret_cast<const int4*>(prow + h0);
        for (i64 q = q0; q < q1; ++q) {
          const i64 dup = p.plan.dup_loffs[q];
          if (dup < 0 || dup >= p.NvS || dup == primary) continue;
          const A wq = w[dup];
#pragma unroll
          for (int j = 0; j < V; ++j) M::store(out, j, M::mul(wq, M::load(piece, j)));
          store_piece(rows + dup * p.H + h0, out);
        }
        const A wp = w[primary];
#pragma unroll
        for (int j = 0; j < V; ++j) M::store(out, j, M::mul(wp, M::load(piece, j)));
        store_piece(prow + h0, out);
      }
    } else {
      for (i64 h = lane; h < p.H; h += 32) {
        const T v = prow[h];
        for (i64 q = q0; q < q1; ++q) {
          const i64 dup = p.plan.dup_loffs[q];
          if (dup < 0 || dup >= p.NvS || dup == primary) continue;
          M::store(rows + dup * p.H, h, M::mul(w[dup], M::load(&v, 0)));
        }
        M::store(prow, h, M::mul(w[primary], M::load(&v, 0)));
      }
    }
  }
}

// Destination rank p.rank, after every source's world_scatter: a warp per
// padding range (rows zeroed, and weights where `weights0` is set) and,
// with copy_dups, per dup group (the primary's row into each duplicate's
// slot, bits; in 16-byte pieces the primary is read once for all its
// duplicates).
template <class T>
__global__ void world_epilogue(WorldParams p, T* rows0, typename Arith<T>::A* weights0, bool copy_dups) {
  if (world_stopped(p)) return;
  const int lane = threadIdx.x & 31;
  char* rows = reinterpret_cast<char*>(rank_part(rows0, p, p.rank));
  typename Arith<T>::A* weights = weights0 ? rank_part(weights0, p, p.rank) : nullptr;
  const i64 groups =
      !copy_dups || p.plan.dup_counts[0] < 0 ? 0 : (p.plan.dup_counts[0] > p.NvS ? p.NvS : p.plan.dup_counts[0]);
  for (i64 u = global_warp(); u < p.groups + groups; u += warp_count()) {
    if (u < p.groups) {
      const std::int32_t* zf = p.plan.zero_fill_ranges + 2 * u;
      const i64 from = zf[0] < 0 ? 0 : zf[0];
      const i64 to = from + zf[1] > p.NvS ? p.NvS : from + zf[1];
      for (i64 s = from; s < to; ++s) {
        if (lane == 0 && weights) weights[s] = 0;
        warp_zero_row(p, rows + s * p.row_bytes, lane);
      }
      continue;
    }
    const std::int32_t* grp = p.plan.dup_groups + 3 * (u - p.groups);
    const i64 primary = grp[0];
    if (primary < 0 || primary >= p.NvS) continue;
    const i64 q0 = grp[1] < 0 ? 0 : grp[1];
    const i64 q1 = static_cast<i64>(grp[1]) + grp[2] > p.NvS ? p.NvS : static_cast<i64>(grp[1]) + grp[2];
    if (p.vec16) {
      // The primary's row read once: each 16-byte piece kept in a register
      // and stored into every duplicate's slot (a read per group, not per
      // duplicate).
      const int4* from = reinterpret_cast<const int4*>(rows + primary * p.row_bytes);
      for (i64 j = lane; j < p.row_bytes / 16; j += 32) {
        const int4 v = from[j];
        for (i64 q = q0; q < q1; ++q) {
          const i64 dup = p.plan.dup_loffs[q];
          if (dup < 0 || dup >= p.NvS || dup == primary) continue;
          reinterpret_cast<int4*>(rows + dup * p.row_bytes)[j] = v;
        }
      }
      continue;
    }
    for (i64 q = q0; q < q1; ++q) {
      const i64 dup = p.plan.dup_loffs[q];
      if (dup < 0 || dup >= p.NvS || dup == primary) continue;
      warp_copy_row(p, rows + primary * p.row_bytes, rows + dup * p.row_bytes, lane);
    }
  }
}

// V values of A as whole 16-byte pieces.
template <class A, int V>
__device__ __forceinline__ void load_acc(const A* from, A (&v)[V]) {
  static_assert((V * sizeof(A)) % 16 == 0, "whole 16-byte pieces");
#pragma unroll
  for (int j = 0; j < V * static_cast<int>(sizeof(A)) / 16; ++j)
    reinterpret_cast<int4*>(v)[j] = reinterpret_cast<const int4*>(from)[j];
}
template <class A, int V>
__device__ __forceinline__ void store_acc(A* to, const A (&v)[V]) {
#pragma unroll
  for (int j = 0; j < V * static_cast<int>(sizeof(A)) / 16; ++j)
    reinterpret_cast<int4*>(to)[j] = reinterpret_cast<const int4*>(v)[j];
}

// Destination rank p.rank: a warp per dup group: partial[primary] =
// w_p * y[primary], then + w_q * y[q] per duplicate in dup_loffs order
// (increasing k), in A (w0 null: unweighted). partial rows have p.H
// values of A.
template <class T>
__global__ void world_prologue(WorldParams p, const T* y0, const typename Arith<T>::A* w0,
                               typename Arith<T>::A* partial0) {
  if (world_stopped(p)) return;
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31;
  const T* y = rank_part(y0, p, p.rank);
  const A* w = w0 ? rank_part(w0, p, p.rank) : nullptr;
  A* partial = rank_part(partial0, p, p.rank);
  const i64 groups = p.plan.dup_counts[0] < 0 ? 0 : (p.plan.dup_counts[0] > p.NvS ? p.NvS : p.plan.dup_counts[0]);
  for (i64 g = global_warp(); g < groups; g += warp_count()) {
    const std::int32_t* grp = p.plan.dup_groups + 3 * g;
    const i64 primary = grp[0];
    if (primary < 0 || primary >= p.NvS) continue;
    const i64 q0 = grp[1] < 0 ? 0 : grp[1];
    const i64 q1 = static_cast<i64>(grp[1]) + grp[2] > p.NvS ? p.NvS : static_cast<i64>(grp[1]) + grp[2];
    const A wp = w ? w[primary] : A(1);
    A* out = partial + primary * p.H;
    if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        T piece[V];
        load_piece(y + primary * p.H + h0, piece);
        A acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A v = M::load(piece, j);
          acc[j] = w ? M::mul(wp, v) : v;
        }
        for (i64 q = q0; q < q1; ++q) {
          const i64 dup = p.plan.dup_loffs[q];
          if (dup < 0 || dup >= p.NvS) continue;
          load_piece(y + dup * p.H + h0, piece);
          const A wq = w ? w[dup] : A(1);
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const A v = M::load(piece, j);
            acc[j] = M::add(acc[j], w ? M::mul(wq, v) : v);
          }
        }
        store_acc(out + h0, acc);
      }
    } else {
      for (i64 h = lane; h < p.H; h += 32) {
        const A v = M::load(y, primary * p.H + h);
        A acc = w ? M::mul(wp, v) : v;
        for (i64 q = q0; q < q1; ++q) {
          const i64 dup = p.plan.dup_loffs[q];
          if (dup < 0 || dup >= p.NvS) continue;
          const A vq = M::load(y, dup * p.H + h);
          acc = M::add(acc, w ? M::mul(w[dup], vq) : vq);
        }
        out[h] = acc;
      }
    }
  }
}

// Source rank p.rank, after every destination's world_prologue: a warp per
// token t < s_r: acc = the lowest-k primary's row (its partial where it has
// duplicates, else w*y or y), + each later primary's, rounded to T once
// into out [S][H]. Where gw is set, lane k also adds gw[t][k] +=
// gadd[slot] (dispatch's backward's routing weight gradient).
template <class T>
__global__ void world_gather(WorldParams p, const T* y0, const typename Arith<T>::A* w0,
                             const typename Arith<T>::A* partial0, T* out, const typename Arith<T>::A* gadd0,
                             typename Arith<T>::A* gw) {
  if (world_stopped(p)) return;
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  __shared__ i64 s_slot[kWarpsPerBlock][32];
  __shared__ A s_w[kWarpsPerBlock][32];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 n_r = world_entries(p);
  for (i64 t = global_warp(); t * p.K < n_r; t += warp_count()) {
    const TokenEntry e = world_entry(p, n_r, t, lane);
    if (e.valid() && gw) gw[t * p.K + lane] = gw[t * p.K + lane] + *slot_at(gadd0, p, e.slot, 1);
    const bool primary = e.valid() && e.primary;
    const unsigned primaries = __ballot_sync(0xffffffffu, primary);
    const unsigned with_dups = primaries_with_dups(e, primaries, lane);
    s_slot[wib][lane] = e.slot;
    s_w[wib][lane] = primary && w0 ? *slot_at(w0, p, e.slot, 1) : A(1);
    __syncwarp();
    T* o = out + t * p.H;
    if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        A acc[V];
        bool first = true;
        for (unsigned m = primaries; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          const i64 c = s_slot[wib][k];
          A v[V];
          if ((with_dups >> k) & 1u) {
            load_acc(slot_at(partial0, p, c, p.H) + h0, v);
          } else {
            T piece[V];
            load_piece(slot_at(y0, p, c, p.H) + h0, piece);
#pragma unroll
            for (int j = 0; j < V; ++j) {
              const A yv = M::load(piece, j);
              v[j] = w0 ? M::mul(s_w[wib][k], yv) : yv;
            }
          }
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = first ? v[j] : M::add(acc[j], v[j]);
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
          const i64 c = s_slot[wib][k];
          A v;
          if ((with_dups >> k) & 1u) {
            v = slot_at(partial0, p, c, p.H)[h];
          } else {
            const A yv = M::load(slot_at(y0, p, c, p.H), h);
            v = w0 ? M::mul(s_w[wib][k], yv) : yv;
          }
          acc = first ? v : M::add(acc, v);
          first = false;
        }
        if (first) break;
        M::store(o, h, acc);
      }
    }
    __syncwarp();  // the shared slots are rewritten by the warp's next token
  }
}

// Source rank p.rank, a thread per entry i < n_r: gw[i] = <g[i div K],
// y[slot]>, A(0) + each product in increasing h.
template <class T>
__global__ void world_dots(WorldParams p, const T* g, const T* y0, typename Arith<T>::A* gw) {
  if (world_stopped(p)) return;
  const i64 n_r = world_entries(p);
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_r; i += stride) {
    const std::int32_t code = p.plan.dst[i];
    const i64 c = code >= 0 ? code : -static_cast<i64>(code) - 1;
    if (c >= static_cast<i64>(p.R) * p.NvS) continue;
    gw[i] = dot_row(g + (i / p.K) * p.H, slot_at(y0, p, c, p.H), p.H, p.vec16);
  }
}

}  // namespace moonep::cuda::layer
