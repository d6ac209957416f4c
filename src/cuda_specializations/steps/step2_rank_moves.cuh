// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 2 (docs/spec/planning.md): rank-level moves, by warp 0 of every
// block.
//
// In:  t.load [R] (step 1).
// Out: s_from[r] (the donor of receiver r, -1: none) and s_quota[r] (what r
//      receives from it), preset by the caller to -1 / 0.
// The balances are load[g] - CAP_g with CAP_g = T div R + (g < T mod R),
// T the step's entries: the sum of the loads. For a full step T = R*S*K
// and CAP_g = S*K; for a ragged one the loads carry the counts, so no
// block needs the other ranks' s_r. At most R iterations: each fills a
// receiver for good.
#pragma once

#include "tables.cuh"
#include "warp_reduce.cuh"

namespace moonep::cuda::impl {
namespace {

// CAP_g of rank g for a step of T entries over R ranks.
__device__ __forceinline__ int rank_capacity(int T, int R, int g) {
  const unsigned q = static_cast<unsigned>(T) / static_cast<unsigned>(R);
  const unsigned rem = static_cast<unsigned>(T) - q * static_cast<unsigned>(R);
  return static_cast<int>(q) + (static_cast<unsigned>(g) < rem ? 1 : 0);
}

// s_bal [R] is scratch for R > 32.
__device__ void plan_rank_moves(const Block& b, const int* s_load, int* s_bal, int* s_from, int* s_quota) {
  const KernelParams& p = b.p;
  const int R = p.R;
  if (b.warp != 0) return;
  if (R <= 32) {
    // Lane r holds rank r's balance in a register: no shared round trips
    // (the loop is on the critical path). When every balance + N fits 25
    // bits (R*N < 2^25; balances lie in [-CAP, T - CAP], within [-N,
    // (R-1)*N]), each argmax / argmin is ONE warp reduction over
    // (balance + N) << 7 with the index in the low bits (127 - r for the
    // max, r for the min: ties to the lowest rank either way); otherwise two
    // reductions each.
    const bool packed = static_cast<i64>(R) * p.N < (1LL << 25);
    const int r = b.lane;
    const int load = r < R ? s_load[r] : 0;
    const int T = warp_sum(load);
    int bal = r < R ? load - rank_capacity(T, R, r) : 0, from = -1, quota = 0;
    if (p.trace && bal != INT_MIN) trace_point(p, 17);  // debug trace: loads arrived
    MOONEP_ROLLED
    for (int it = 0; it < R; ++it) {
      int sv, si, dv, di;
      if (packed) {
        const unsigned biased = static_cast<unsigned>(bal + p.N) << 7;
        const unsigned kmax = __reduce_max_sync(0xffffffffu, r < R ? biased | (127u - r) : 0u);
        const unsigned kmin = __reduce_min_sync(0xffffffffu, r < R ? biased | static_cast<unsigned>(r) : ~0u);
        sv = static_cast<int>(kmax >> 7) - p.N;
        si = 127 - static_cast<int>(kmax & 127u);
        dv = static_cast<int>(kmin >> 7) - p.N;
        di = static_cast<int>(kmin & 127u);
      } else {
        sv = r < R ? bal : INT_MIN; si = r; dv = r < R ? bal : INT_MAX; di = r;
        warp_argmax_low(sv, si);
        warp_argmin_low(dv, di);
      }
      if (sv <= 0 || dv >= 0) break;
      const int move = -dv;
      if (r == si) bal -= move;
      if (r == di) { bal = 0; from = si; quota = move; }
    }
    if (p.trace && from != INT_MIN) trace_point(p, 18);  // debug trace: the moves are known
    if (r < R) { s_from[r] = from; s_quota[r] = quota; }
    return;
  }
  int part = 0;
  for (int r = b.lane; r < R; r += 32) part += s_load[r];
  const int T = warp_sum(part);
  for (int r = b.lane; r < R; r += 32) s_bal[r] = s_load[r] - rank_capacity(T, R, r);
  __syncwarp();
  for (int it = 0; it < R; ++it) {
    int sv = INT_MIN, si = INT_MAX, dv = INT_MAX, di = INT_MAX;
    for (int r = b.lane; r < R; r += 32) {
      const int v = s_bal[r];
      if (v > sv) { sv = v; si = r; }
      if (v < dv) { dv = v; di = r; }
    }
    warp_argmax_low(sv, si);
    warp_argmin_low(dv, di);
    if (sv <= 0 || dv >= 0) break;
    if (b.lane == 0) {
      const int move = -dv;
      s_bal[si] -= move;
      s_bal[di] = 0;
      s_from[di] = si;
      s_quota[di] = move;
    }
    __syncwarp();
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
