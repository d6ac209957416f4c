// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// C1: the counts step 1 starts from and the ranks step 6 indexes by
// (docs/spec/planning.md steps 1 and 6), for one block's entries, before
// the one barrier of the step.
//
// In:  the block's routing entries (its Slice of the rank's s_r tokens).
// Out: t.ent[i] (the entry's expert, -1 for a bad id, recorded in the
//      status), t.pos[i] (its rank among the entries of the same expert in
//      its warp, in lane order), t.hist[w][e] (warp w's count of e, then
//      the warp's exclusive base among the block's entries of e), t.key[e]
//      (the block's count of e, turned into a sort key by sort_entries.cuh),
//      the rank's scratch row hist[worker][e] (read by later blocks for
//      their bases), and the block's counts added into the gathered
//      tokens_per_expert [R][E] of this step's parity.
// What must stay true: ranks are stable, warp by warp and lane by lane in
// entry order, since step 6's global index orders one expert's entries by
// source rank, then position; the gathered counts are complete only when
// every block of every rank has arrived at the gather counter after
// adding its own (the schedule's barrier).
#pragma once

#include "tables.cuh"

namespace moonep::cuda::impl {
namespace {

// Per-warp histograms and ranks. The lanes of a round holding the same
// expert e (its peers) are found through the warp's word of e in t.peer:
// every lane ORs its bit into it, then reads it back (OR commutes, so the
// word is the same whatever order the atomics take), and the round's first
// peer clears it. One atomic and one load per round instead of a ballot per
// bit of the id, which took about twice as long. `brouting` is the block's
// first entry; [w0, w1) this warp's entries, indexed from it in 32 bits (a
// block's entries fit 2^31: 64-bit indices cost a carry and a second
// compare at every use); ev0 the first batch of routing loads, issued by
// the caller before its housekeeping.
__device__ __forceinline__ void count_and_rank(const Block& b, const Tables& t, const std::int32_t* brouting, int w0,
                                               int w1, i64 i0, const int (&ev0)[kUnroll]) {
  const KernelParams& p = b.p;
  const int E = p.E;
  int* row = t.hist + b.warp * E;
  unsigned* peer = t.peer + b.warp * E;
  const unsigned lt = (1u << b.lane) - 1u;
  // Each warp zeroes its own words: zeroed by the whole block behind a
  // block barrier, they would hold up the first routing loads.
  MOONEP_ROLLED
  for (int i = b.lane; i < E; i += 32) {
    peer[i] = 0u;
    row[i] = 0;
  }
  __syncwarp();
  // kUnroll rounds unrolled (unlike most of the kernel, see MOONEP_ROLLED):
  // a rolled round with the loads kept kUnroll rounds ahead in a ring of
  // registers was slower at the headline.
  for (int base0 = w0; base0 < w1; base0 += 32 * kUnroll) {
    int ev[kUnroll];  // loads first, so they are in flight together
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int li = base0 + 32 * u + b.lane;
      ev[u] = base0 == w0 ? ev0[u] : (li < w1 ? brouting[li] : -1);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int base = base0 + 32 * u;
      if (base >= w1) break;
      const int li = base + b.lane;
      int e = ev[u];
      if (li < w1 && static_cast<unsigned>(e) >= static_cast<unsigned>(E)) {
        record(&p.status->bad_entry, b.rank, i0 + li);
        e = -1;
      }
      if (e >= 0) atomicOr(peer + e, 1u << b.lane);
      __syncwarp();
      const unsigned peers = e >= 0 ? peer[e] : 0u;
      const int before = e >= 0 ? row[e] : 0;  // only the round's leader of e writes row[e]
      const int r = e >= 0 ? before + __popc(peers & lt) : -1;
      __syncwarp();
      if (e >= 0 && b.lane == __ffs(peers) - 1) {
        // From the count loaded above: row[e] again after the __syncwarp
        // would be one more round trip on the round's chain.
        row[e] = before + __popc(peers);
        peer[e] = 0u;
      }
      if (li < w1) {
        t.ent[li] = e;
        t.pos[li] = r;
      }
      __syncwarp();
    }
  }
}

// Block totals: warp rows become exclusive warp bases; the block's count
// of e goes to the rank's hist[w][e] (worker-major: the block's row is
// consecutive words, its stores whole lines; expert-major rows make the
// arrival's release wait for every block's scattered stores into the same
// lines), to t.key[e], and into the gathered counts (atomics into rank 0's
// copy, or one multicast reduction into every rank's copy). Worker blocks
// only; the block's epoch is known (b.epoch).
__device__ __forceinline__ void publish_block_totals(const Block& b, const Tables& t, const Slice& s) {
  const KernelParams& p = b.p;
  const int E = p.E;
  std::int32_t* ghist = b.loc() + p.loc.hist + static_cast<i64>(s.w) * E;
  const i64 row = static_cast<i64>(b.rank) * E;
  std::int32_t* tall = b.tpe_all(b.epoch) + row;
  std::int32_t* mc_tall =
      b.mc() ? b.mc() + p.sym.tpe_all + static_cast<i64>(b.epoch & 1u) * p.sym.tpe_half + row : nullptr;
  MOONEP_ROLLED
  for (int e = b.tid; e < E; e += kThreads) {
    // Every warp's count first, then the bases: the compiler cannot tell
    // that hist[w * E + e] and hist[(w + 1) * E + e] differ (E is not a
    // constant), so in one loop each load would wait for the store before
    // it, kWarps round trips on every block's way to its arrival.
    int c[kWarps];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) c[w] = t.hist[w * E + e];
    int run = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      t.hist[w * E + e] = run;
      run += c[w];
    }
    ghist[e] = run;
    if (run > 0) {
      if (mc_tall) multimem_add_relaxed(mc_tall + e, run);
      else atomicAdd(tall + e, run);
    }
    t.key[e] = run;
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
