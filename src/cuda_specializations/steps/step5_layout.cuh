// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 5 (docs/spec/planning.md): the layout of each destination's receive
// buffer.
//
// Two parts, because every block needs every destination's expert offsets
// (its entries may land anywhere) but only one block per rank needs its
// rank's whole E+B-group layout:
// - steps_4_5 (every block, one warp per destination d, after step 3):
//   step 4 for d, then t.eoff[d][e] for the experts with entries on d: the
//   start of e's group less acum[e][d-1], so that step 6's loff is
//   eoff[d][e] + G.
// - store_layout (block 0 of rank d, off the other blocks' path):
//   cu_seqlens and zero_fill_ranges over all E+B groups, and src_info = -1
//   in every slot no entry lands on (each group's padding and the tail).
// Also store_plan_tables: the whole experts_to_copy table and remote_stats
// into the rank's outputs (block 0).
// What must stay true: both parts lay the groups out in the same order
// (g = 0..E+B-1: own and uncopied experts at their ids, copy slots E+b
// last) with the same padding, so the offsets step 6 uses agree with the
// cu_seqlens users read; every slot of src_info is written exactly once
// per step (an entry's source by step 6 of some rank, or -1 here), so
// nothing needs prefilling before the barrier.
#pragma once

#include "step4_copy_slots.cuh"
#include "tables.cuh"
#include "warp_reduce.cuh"

namespace moonep::cuda::impl {
namespace {

// Steps 4-5 for destination d by one warp. Rank d's non-empty groups are
// at most its own epn experts and its candidates (the remote experts it
// took from its one donor), so the offsets follow from those alone, in
// group order: own experts (groups d*epn..) and uncopied candidates
// (groups at their expert ids, in the donor's range, before or after d's)
// first, copy slots E+b last.
__device__ void steps_4_5(const Block& b, const Tables& t, int d) {
  const KernelParams& p = b.p;
  const int E = p.E, epn = p.epn, as = acum_stride(p.R);
  const int nc = min(t.ncand[d], epn);
  const int* cd = t.cand + 2 * d * epn;
  const int* slot = t.cslot + d * epn;
  const int uncopied = step4_copy_slots(b, t, d);
  // Own experts: padded counts, prefix in expert order (their total is
  // where the prefix ends).
  const int uncopied_total = warp_sum(uncopied);
  __syncwarp();
  const bool donor_first = nc > 0 && t.from[d] < d;  // the donor's groups come before d's own
  const int run0 = donor_first ? uncopied_total : 0;
  int run = run0;
  MOONEP_ROLLED
  for (int j0 = 0; j0 < epn; j0 += 32) {
    const int j = j0 + b.lane;
    const int v = j < epn ? pad_to(p, alloc_of(t, as, d * epn + j, d)) : 0;
    const int incl = warp_inclusive_scan(v, b.lane);
    // Less acum[e][d-1]: step 6's loff is then eoff + G, one load fewer.
    if (j < epn) t.eoff[d * E + d * epn + j] = run + incl - v - acum_before(t, as, d * epn + j, d);
    run += __shfl_sync(0xffffffffu, incl, 31);
  }
  const int own_total = run - run0;
  // Candidates: uncopied ones in expert order, copied ones in slot order.
  MOONEP_ROLLED
  for (int i = b.lane; i < nc; i += 32) {
    const int ce = cd[2 * i], si = slot[i];
    int at = si < 0 ? (donor_first ? 0 : own_total) : own_total + uncopied_total;
    for (int j = 0; j < nc; ++j) {
      const int sj = slot[j];
      const bool before = si < 0 ? (sj < 0 && cd[2 * j] < ce) : (sj >= 0 && sj < si);
      if (before) at += pad_to(p, cd[2 * j + 1]);
    }
    t.eoff[d * E + ce] = at - acum_before(t, as, ce, d);
  }
}

// Step 5's outputs for group g of rank d's layout (od: d's outputs) that
// starts at `start` and holds `count` entries; returns the group's end.
__device__ __forceinline__ int store_group(const KernelParams& p, std::int32_t* od, int g, int start, int count) {
  const int padded = pad_to(p, count);
  od[p.out.cu_seqlens + g] = start + padded;
  const bool fill = count > 0 && padded > count;
  od[p.out.zero_fill_ranges + 2 * g] = fill ? start + count : 0;
  od[p.out.zero_fill_ranges + 2 * g + 1] = fill ? padded - count : 0;
  return start + padded;
}

// src_info -1 in a group's padding (n < tp slots from `at`), by one
// thread: in 16-byte stores from the first aligned slot. Each thread pads
// its own group, so a warp's store lands in up to 32 places: 16 bytes a
// place take a quarter of the instructions word stores did. The padding
// is block 0's longest work, more so in a ragged step (small groups leave
// more of each tp-run as padding), where word stores made block 0 the
// step's last block.
__device__ __forceinline__ void fill_padding(std::int32_t* at, int n) {
  const int head = min(n, static_cast<int>((4u - ((reinterpret_cast<uintptr_t>(at) >> 2) & 3u)) & 3u));
  MOONEP_ROLLED
  for (int x = 0; x < head; ++x) at[x] = -1;
  int4* q = reinterpret_cast<int4*>(at + head);
  const int quads = (n - head) >> 2;
  MOONEP_ROLLED
  for (int i = 0; i < quads; ++i) q[i] = make_int4(-1, -1, -1, -1);
  MOONEP_ROLLED
  for (int x = head + 4 * quads; x < n; ++x) at[x] = -1;
}

// This block's rank d (block 0 only): cu_seqlens and the zero-fill ranges
// over all E+B groups, each thread a contiguous run of groups, one
// block-wide scan; src_info -1 in every group's padding and in the tail
// after the last group.
__device__ void store_layout(const Block& b, const Tables& t) {
  const KernelParams& p = b.p;
  const int E = p.E, B = p.B, as = acum_stride(p.R), d = b.rank;
  const unsigned* mark = t.mark + d * mark_words(E);
  const int G = E + B, per = (G + kThreads - 1) / kThreads;
  const int g0 = min(G, b.tid * per), g1 = min(G, g0 + per);
  auto expert_of = [&](int g) {
    if (g >= E) return t.etc[d * B + g - E];
    return ((mark[g >> 5] >> (g & 31)) & 1u) ? -1 : g;
  };
  int sum = 0;
  MOONEP_ROLLED
  for (int g = g0; g < g1; ++g) {
    const int ex = expert_of(g);
    sum += ex >= 0 ? pad_to(p, alloc_of(t, as, ex, d)) : 0;
  }
  int start = block_exclusive_scan(sum, t.scan);
  std::int32_t* od = b.out();
  std::int32_t* si = od + p.out.src_info;
  MOONEP_ROLLED
  for (int g = g0; g < g1; ++g) {
    const int ex = expert_of(g);
    const int count = ex >= 0 ? alloc_of(t, as, ex, d) : 0;
    const int end = store_group(p, od, g, start, count);
    fill_padding(si + start + count, end - start - count);
    start = end;
  }
  // The tail: from the end of the last group (its thread knows it) to NvS.
  if (g1 == G && g0 < G) t.scan[0] = start;
  if (G == 0 && b.tid == 0) t.scan[0] = 0;
  __syncthreads();
  const int used = t.scan[0];
  MOONEP_ROLLED
  for (int x = used + b.tid; x < p.NvS; x += kThreads) si[x] = -1;
}

// Every rank's output holds the whole experts_to_copy table; remote_stats
// is (remote experts with entries here, copies made of my experts).
__device__ __forceinline__ void store_plan_tables(const Block& b, const Tables& t) {
  const KernelParams& p = b.p;
  MOONEP_ROLLED
  for (int i = b.tid; i < p.R * p.B; i += kThreads) b.out()[p.out.experts_to_copy + i] = t.etc[i];
  if (b.tid == 0) {
    b.out()[p.out.remote_stats] = min(t.ncand[b.rank], p.epn);
    b.out()[p.out.remote_stats + 1] = t.copies[b.rank];
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
