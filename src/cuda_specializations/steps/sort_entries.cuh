// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The block's entries in expert order, and each entry's rank among the
// rank's entries of its expert: what step 6 (docs/spec/planning.md) needs,
// prepared after the barrier by warps the planning leaves idle.
//
// In:  C1's t.ent, t.pos, t.hist (warp bases), t.key (block counts) and the
//      rank's per-worker rows hist[w][e] (complete after the barrier).
// Out: t.bb[e] (the rank's entries of e in the blocks before this one),
//      t.key[e] (the first slot of e in `sorted`), t.sorted / t.sexp (slot
//      j holds entry sorted[j] of expert sexp[j]; a contiguous run per
//      expert, in entry order), and for bad ids dd = pos = -1.
// What must stay true: step 6's G of the entry in slot j is
// base[e] + bb[e] + j - key[e] (the schedule adds bb into base), so each
// expert's run must be in the C1 rank order.
#pragma once

#include "tables.cuh"
#include "warp_reduce.cuh"

namespace moonep::cuda::impl {
namespace {

// By one warp: key[e], the block's count of e, becomes e's first slot in
// `sorted` (lane l sums a run of experts, the warp scans the lane sums).
__device__ void sort_keys_warp(const Block& b, const Tables& t) {
  const int E = b.p.E, per = (E + 31) / 32;
  const int e0 = min(E, b.lane * per), e1 = min(E, e0 + per);
  int sum = 0;
#pragma unroll 4
  for (int e = e0; e < e1; ++e) sum += t.key[e];
  int slot = warp_inclusive_scan(sum, b.lane) - sum;
#pragma unroll 4
  for (int e = e0; e < e1; ++e) {
    const int c = t.key[e];
    t.key[e] = slot;
    slot += c;
  }
}

// By threads [first, first + n): bb[e], the rank's entries of e in the
// blocks before this one (their counts in the rank's per-worker rows
// [nworkers][E], readable after the barrier). A thread takes experts e and
// e + n together, up to 16 blocks' loads of each in flight: at the headline
// (E = 256 on 224 threads) every expert is then one round trip to L2
// instead of two for the threads holding two experts. A warp's loads are 32
// consecutive words of one row.
__device__ void block_bases(const Block& b, const Tables& t, const Slice& s, int first, int n) {
  const KernelParams& p = b.p;
  const std::int32_t* ghist = b.loc() + p.loc.hist;
  MOONEP_ROLLED
  for (int e = b.tid - first; e < p.E; e += 2 * n) {
    const int e2 = e + n;
    const bool two = e2 < p.E;
    int bbase = 0, bbase2 = 0;
    MOONEP_ROLLED
    for (int w0 = 0; w0 < s.w; w0 += 16) {
      int v[16], v2[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const i64 row = static_cast<i64>(w0 + u) * p.E;
        v[u] = w0 + u < s.w ? ghist[row + e] : 0;
        v2[u] = two && w0 + u < s.w ? ghist[row + e2] : 0;
      }
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        bbase += v[u];
        bbase2 += v2[u];
      }
    }
    t.bb[e] = bbase;
    if (two) t.bb[e2] = bbase2;
  }
}

// The entries of C1 warps [row0, row1) by the warps that call it (this
// warp is number idx of n), in a phase where most warps are idle: every
// entry to slot key[e] + its C1 warp's base + its rank within that warp
// (any slot order works as long as each expert's entries are contiguous
// and in order), into sorted (entry) and sexp (expert).
__device__ void sort_entries(const Block& b, const Tables& t, const Slice& s, int idx, int n, int row0, int row1) {
  const KernelParams& p = b.p;
  const int E = p.E, K = p.K;
  const i64 i0 = s.tok0 * K;
  const int ne = static_cast<int>(s.tok1 - s.tok0) * K;
  MOONEP_ROLLED
  for (int w = row0 + idx; w < row1; w += n) {
    const int l1 = static_cast<int>(warp_entries_begin(s, K, w + 1) - i0);
    const int* hw = t.hist + w * E;
    MOONEP_ROLLED
    for (int li = static_cast<int>(warp_entries_begin(s, K, w) - i0) + b.lane; li < l1; li += 32) {
      const int e = t.ent[li];
      if (e < 0) {
        // A bad id: no slot, no destination (step 6 walks slots only).
        t.dd[li] = -1;
        t.pos[li] = -1;
        continue;
      }
      const int at = t.key[e] + hw[e] + t.pos[li];
      if (at < ne) {
        t.sorted[at] = li;
        t.sexp[at] = e;
      } else {
        internal_error(p);
      }
    }
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
