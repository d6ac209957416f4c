// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 3 (docs/spec/planning.md): the expert-level split, one warp per
// owner h, then acum (step 6's prefix over ranks) of h's experts by the
// same warp.
//
// In:  t.rem [E] (totals; left holding what each owner keeps), t.from /
//      t.quota (step 2), t.ncand [R] and t.acum zeroed.
// Out: t.acum[e][r] = sum over r' <= r of alloc[r'][e]; t.cand[t][c] =
//      (expert, count) of receiver t's c-th take and t.ncand[t] (step 4's
//      candidates: the remote experts with entries on t); t.copies[h] =
//      remote_stats[h][1], the copies made of h's experts.
// What must stay true: an expert's alloc comes from its owner's split
// alone, so one warp per owner can finish its experts' acum rows without
// waiting for the others; every (receiver, expert) pair is taken at most
// once (each take empties a quota or a remaining), so a receiver has at
// most epn candidates.
#pragma once

#include "tables.cuh"
#include "warp_reduce.cuh"

namespace moonep::cuda::impl {
namespace {

// Step 3 (plan_expert_split below): owner h's takes on the fast path, NU
// receivers / local experts per lane: lane l holds l, l + 32, ...,
// l + 32 * (NU - 1).
template <int NU, class AddCand>
__device__ __forceinline__ void split_owner_packed(const Block& b, int h, int* s_rem, const int* s_from,
                                                   const int* s_quota, AddCand add_cand) {
  const int R = b.p.R, epn = b.p.epn;
  int q[NU], rm[NU];
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    const int t = b.lane + 32 * u;
    q[u] = (t < R && s_from[t] == h) ? s_quota[t] : 0;
    rm[u] = t < epn ? s_rem[h * epn + t] : 0;
  }
  MOONEP_ROLLED
  for (int guard = 0; guard <= R + epn; ++guard) {
    unsigned kq = 0, km = 0;
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const unsigned t = static_cast<unsigned>(b.lane + 32 * u);
      if (q[u] > 0) kq = max(kq, (static_cast<unsigned>(q[u]) << 7) | (127u - t));
      if (rm[u] > 0) km = max(km, (static_cast<unsigned>(rm[u]) << 7) | (127u - t));
    }
    kq = __reduce_max_sync(0xffffffffu, kq);
    km = __reduce_max_sync(0xffffffffu, km);
    if (kq == 0u || km == 0u) break;
    const int qi = 127 - static_cast<int>(kq & 127u), mj = 127 - static_cast<int>(km & 127u);
    const int take = min(static_cast<int>(kq >> 7), static_cast<int>(km >> 7));
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const int t = b.lane + 32 * u;
      if (t == qi) q[u] -= take;
      if (t == mj) rm[u] -= take;
    }
    if (b.lane == 0) add_cand(h * epn + mj, qi, take);
  }
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    const int t = b.lane + 32 * u;
    if (t < epn) s_rem[h * epn + t] = rm[u];
  }
  __syncwarp();
}

// plan_expert_split. In: s_rem [E] (totals; left holding what each owner
// keeps), s_from / s_quota from step 2, s_ncand [R] zeroed. Every
// (receiver, expert) pair is taken at most once (each take empties a
// quota or a remaining), so the pairs are the receiver's remote experts
// (step 4's candidates).
// Sinks: take(e, t, n) for alloc[t][e] = n (t != owner) and receiver t's
// candidate number c; keep(e, h, n) for the owner's remainder;
// copies(h, n) for remote_stats[h][1]; done(h), by the whole warp once
// h's takes and keeps are stored (the warp's lanes see them).
// Fast path (R <= 128, epn <= 128, R*N < 2^25: every value fits 25 bits
// and every index 7): quotas and remainders live in registers, lane l
// holding receivers / local experts l, l+32, l+64, l+96 (only l where R
// and epn fit 32 lanes: four slots per lane lengthen the loop, which is
// B3's critical path (plan_step_kernel.cu)); each
// argmax is one __reduce_max over (value << 7 | 127 - index), which picks
// the largest value and, among equals, the lowest index.
template <class Take, class Keep, class Copies, class Done>
__device__ void plan_expert_split(const Block& b, int* s_rem, const int* s_from, int* s_quota, int* s_ncand,
                                  Take take_sink, Keep keep, Copies copies_sink, Done done) {
  const KernelParams& p = b.p;
  const int R = p.R, epn = p.epn;
  const bool packed = R <= 128 && epn <= 128 && static_cast<i64>(R) * p.N < (1LL << 25);
  auto add_cand = [&](int e, int t, int take) {
    const int c = s_ncand[t]++;
    if (c < epn) take_sink(e, t, c, take);
    else internal_error(p);
  };
  MOONEP_ROLLED
  for (int h = b.warp; h < R; h += kWarps) {
    if (packed) {
      // One register per lane where receivers and local experts fit 32
      // lanes (the headline's R = 8, epn = 32): the loop is the critical
      // path of B3, and four slots per lane quadruple its selects.
      if (R <= 32 && epn <= 32) split_owner_packed<1>(b, h, s_rem, s_from, s_quota, add_cand);
      else split_owner_packed<4>(b, h, s_rem, s_from, s_quota, add_cand);
    } else {
      for (int guard = 0; guard <= R + epn; ++guard) {
        int qv = 0, qi = INT_MAX;
        for (int t = b.lane; t < R; t += 32) {
          if (s_from[t] == h && s_quota[t] > qv) { qv = s_quota[t]; qi = t; }
        }
        warp_argmax_low(qv, qi);
        if (qv <= 0) break;
        int mv = 0, mj = INT_MAX;
        for (int j = b.lane; j < epn; j += 32) {
          const int v = s_rem[h * epn + j];
          if (v > mv) { mv = v; mj = j; }
        }
        warp_argmax_low(mv, mj);
        if (mv <= 0) break;
        if (b.lane == 0) {
          const int take = min(mv, qv);
          s_quota[qi] -= take;
          s_rem[h * epn + mj] -= take;
          add_cand(h * epn + mj, qi, take);
        }
        __syncwarp();
      }
    }
    MOONEP_ROLLED
    for (int j = b.lane; j < epn; j += 32) keep(h * epn + j, h, s_rem[h * epn + j]);
    // remote_stats[h][1]: copies made of h's experts = sum over h's
    // receivers of min(B, their remote experts).
    int copies = 0;
    MOONEP_ROLLED
    for (int t = b.lane; t < R; t += 32) {
      if (s_from[t] == h) copies += min(p.B, s_ncand[t]);
    }
    copies = warp_sum(copies);
    if (b.lane == 0) copies_sink(h, copies);
    __syncwarp();
    done(h);
  }
}

// Into the block's tables (acum's rows have an odd stride, so the rows of
// 32 consecutive experts fall in distinct banks).
__device__ __forceinline__ void step3_expert_split(const Block& b, const Tables& t) {
  const KernelParams& p = b.p;
  const int R = p.R, epn = p.epn, as = acum_stride(R);
  plan_expert_split(
      b, t.rem, t.from, t.quota, t.ncand,
      [&](int e, int r, int c, int take) {
        t.acum[e * as + r] = take;
        t.cand[2 * (r * epn + c)] = e;
        t.cand[2 * (r * epn + c) + 1] = take;
      },
      [&](int e, int h, int keep) { t.acum[e * as + h] = keep; },
      [&](int h, int copies) { t.copies[h] = copies; },
      [&](int h) {
        MOONEP_ROLLED
        for (int j = b.lane; j < epn; j += 32) {
          int* a = t.acum + (h * epn + j) * as;
          int run = 0;
          for (int r = 0; r < R; ++r) a[r] = (run += a[r]);
        }
      });
}

}  // namespace
}  // namespace moonep::cuda::impl
