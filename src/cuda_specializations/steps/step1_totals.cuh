// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 1 (docs/spec/planning.md): totals and loads, from the gathered
// tokens_per_expert [R][E] of the step, computed by every block for itself.
//
// In:  the gathered counts (complete after the barrier); t.load zeroed.
// Out: t.base[e] = cum[rank-1][e] (this rank's entries of e come after
//      those of the ranks before it: step 6's global index starts there),
//      t.rem[e] = total[e], t.load[g] += total of g's experts; a given
//      tokens_per_expert of this rank that differs from its counts is
//      recorded (block 0 of the rank checks).
// What must stay true: every block computes the same totals from the same
// counts, so no block needs another's tables.
#pragma once

#include "tables.cuh"
#include "warp_reduce.cuh"

namespace moonep::cuda::impl {
namespace {

// Expert e's counts of ranks r0..r0+7 (0 past R): the loads first, so they
// are in flight together.
__device__ __forceinline__ void rank_counts8(const std::int32_t* tall, int E, int R, int e, int r0, int (&v)[8]) {
#pragma unroll
  for (int u = 0; u < 8; ++u) v[u] = r0 + u < R ? tall[static_cast<i64>(r0 + u) * E + e] : 0;
}

// load[e / epn] += total, e's total over the ranks.
__device__ __forceinline__ void add_to_load(int* s_load, int epn, int e, int total) {
  if (epn % 32 == 0) {
    // A warp's 32 experts belong to one rank: one atomic per warp.
    const int w = warp_sum(total);
    if ((threadIdx.x & 31) == 0) atomicAdd(&s_load[e / epn], w);
  } else {
    atomicAdd(&s_load[e / epn], total);
  }
}

// By threads [0, nthreads), one expert per thread at a time.
__device__ __forceinline__ void step1_totals(const Block& b, const Tables& t, int nthreads) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E;
  const std::int32_t* tall = b.tpe_all(b.epoch);
  const std::int32_t* given = b.lb == 0 ? p.tpe[b.g] : nullptr;
  MOONEP_ROLLED
  for (int e = b.tid; e < E; e += nthreads) {
    int total = 0, before = 0, own = 0;
    MOONEP_ROLLED
    for (int r0 = 0; r0 < R; r0 += 8) {
      int v[8];
      rank_counts8(tall, E, R, e, r0, v);
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        total += v[u];
        if (r0 + u < b.rank) before += v[u];
        if (r0 + u == b.rank) own = v[u];
      }
    }
    if (given && given[e] != own) record(&p.status->bad_tpe, b.rank, e);
    t.base[e] = before;
    t.rem[e] = total;
    add_to_load(t.load, p.epn, e, total);
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
