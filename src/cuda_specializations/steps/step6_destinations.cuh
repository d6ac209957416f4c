// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 6 (docs/spec/planning.md): each entry's destination, and src_info
// at the destination.
//
// In:  the block's entries in expert order (sort_entries.cuh: slot j holds
//      entry sorted[j] of expert sexp[j]), t.base[e] (the rank-wide index
//      of the block's first entry of e), t.key[e] (e's first slot), t.acum
//      (step 3), t.eoff (steps_4_5), t.sip[d] (d's src_info).
// Out: src_info[d][loff] = rank*NvS + i at every destination; t.dd[i] = d
//      and t.pos[i] = d*NvS + loff (unflipped: step 7 flips duplicates).
// What must stay true: G = base[e] + j - key[e] is the entry's global
// index; d is the first rank with acum[e][d] > G (acum is non-decreasing
// over d and acum[e][R-1] is e's total, above every G, so the search
// never passes R-1); an offset outside [0, NvS) would mean inconsistent
// tables, and is flagged, never stored.
#pragma once

#include "tables.cuh"

namespace moonep::cuda::impl {
namespace {

// Walking the entries in expert order makes a run of one expert's entries
// bound for one destination land on consecutive words of its src_info, and
// neighbouring lanes mostly share an expert, so the table lookups are
// broadcasts rather than bank conflicts. A thread's kUnroll slots go
// through each stage together (the search is a fixed ladder of steps), so
// their dependent loads overlap instead of queueing one after the other.
// ne: the block's entries; src0: src_info value of its entry 0.
__device__ __forceinline__ void step6_destinations(const Block& b, const Tables& t, int ne, int src0) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, NvS = p.NvS, as = acum_stride(R);
  const int top = search_top(R);
  MOONEP_ROLLED
  for (int j0 = b.tid; j0 < ne; j0 += kThreads * kUnroll) {
    int li[kUnroll], ex[kUnroll], G[kUnroll], lo[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * kThreads;
      li[u] = j < ne ? t.sorted[j] : -1;
      ex[u] = j < ne ? t.sexp[j] : 0;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (li[u] < 0) ex[u] = 0;  // sexp of an empty slot is stale
      G[u] = t.base[ex[u]] + j0 + u * kThreads - t.key[ex[u]];
      lo[u] = 0;
    }
    // d = how many acum[e][d] are <= G.
    for (int step = top; step > 0; step >>= 1) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = lo[u] + step;
        if (c <= R && t.acum[ex[u] * as + c - 1] <= G[u]) lo[u] = c;
      }
    }
    // The stores, with as few instructions per slot as possible: d's
    // src_info pointer from a table, the source index from one base, one
    // error flag for all slots (this loop issues some 75 instructions per
    // slot on 16 warps: its time is as much issue as latency).
    bool bad = false;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (li[u] < 0) continue;
      const int d = lo[u];
      const int loff = t.eoff[d * E + ex[u]] + G[u];  // d < R (search_top)
      const bool ok = loff >= 0 && loff < NvS;
      if (ok) t.sip[d][loff] = src0 + li[u];
      bad |= !ok;
      t.dd[li[u]] = ok ? d : -1;
      t.pos[li[u]] = ok ? d * NvS + loff : -1;
    }
    if (bad) internal_error(p);
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
