// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The planning kernel: the schedule that runs docs/spec/planning.md steps
// 1-8 (the step library in steps/, one file per step) for the ranks of one
// cooperative launch, with ONE cross-block barrier per step. Every block
// plans the whole step (steps 1-5, a few KB of tables) for itself from the
// gathered counts, instead of one rank computing tables and handing them
// to the others: the planning is redundant but short and local, and what
// it removes is a serial chain of cross-block hand-offs
// (docs/design/cuda_planner.md). Its tables live in the block's shared
// memory (plan_kernel_shared_tables, the fast path) or, for shapes whose
// tables do not fit, in the block's own slice of global scratch
// (plan_kernel_global_tables): the same schedule, the same steps, the same
// plans.
//
// One launch holds either every rank as a group of bpr blocks (virtual
// ranks, moonep/cuda_planner.hpp; plan_kernel_*_tables) or one rank of a
// GPU world (moonep/gpu_world.hpp; plan_kernel_*_tables_world, the only
// ones compiled with the world's code: see Block::world). Blocks 1..bpr-1
// of a rank own a slice of its s_r tokens each; block 0 (when bpr > 1)
// owns none, and stores the rank's full layout while the others run steps
// 6-8.
//
// Per step, per block:
//   C1  the block's entries counted and ranked per warp (count_entries.cuh);
//       [GPU world: wait until every block of the previous step has
//       ended, kDone]; block 0 zeroes the rank's dup_counts (others reserve
//       on them after the barrier); the block's counts go to the rank's
//       per-worker rows and into the gathered tokens_per_expert (double-
//       buffered by step parity); arrive at the gather counter.
//   --  while waiting: thread 0 polls the counter (acquire loads); warps
//       1.. zero the tables and the other parity of the gathered counts.
//   B   after the barrier, four phases between block barriers (B1-B4) (see
//       plan_and_sort): step 1; step 2; step 3 with acum; steps 4-5 per
//       destination. Warps a phase leaves idle sort the block's entries by
//       expert (sort_entries.cuh). Block 0 stores experts_to_copy and
//       remote_stats.
//   C2  step 6 over the entries in expert order; steps 7-8 per tile of
//       tokens (one tile with shared tables); block 0 stores cu_seqlens,
//       the zero-fill ranges and src_info -1; [GPU world: arrive at kDone].
//       The kernel's end publishes everything.
//
// No hang: a bad expert id or token count is recorded in DeviceStatus and
// skipped everywhere, and every block still passes the barrier; every wait
// for another rank is bounded (KernelParams::timeout_ns): past it the block
// records it (DeviceStatus::late) and ends before any store into another
// rank. The host launches one block per SM at most (kernel_params.hpp).
#include <climits>
#include <cstdint>

#include "steps/count_entries.cuh"
#include "steps/sort_entries.cuh"
#include "steps/step1_totals.cuh"
#include "steps/step2_rank_moves.cuh"
#include "steps/step3_expert_split.cuh"
#include "steps/step5_layout.cuh"
#include "steps/step6_destinations.cuh"
#include "steps/step8_dup_rows.cuh"

namespace moonep::cuda::impl {
namespace {

// ---- B: the plan (steps 1-5) and the sort of the block's entries ------------
// After the barrier, in four phases between block barriers (B1-B4):
//   B1. warps 0..H-1 (H = kWarps / 2): step 1; warp H: the sort keys; warps
//      H+1..: the earlier blocks' counts of each expert (bb);
//   B2. warp 0: step 2; the other warps: bb into base and the block's
//      entries into expert order (all of them at R >= kWarps; else those
//      of the first half of the C1 warps, on the warps beside warp 0's
//      scheduler);
//   B3. step 3, one warp per owner (at R < kWarps, warps R.. sort the
//      rest of the block's entries meanwhile);
//   B4. steps 4-5, one warp per destination.
// The sort is needed only from step 6 on: beside steps 1-3 it is off the
// critical path (before the barrier it would be on the last arriving
// block's), and it uses warps planning leaves idle. Every barrier is the
// whole block's: with a named barrier per warp group, compute-sanitizer's
// racecheck reports hazards between accesses that __syncthreads orders, so
// the sanitizer could no longer vouch for the kernel.
__device__ void plan_and_sort(const Block& b, const Tables& t, const Slice& s) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E;
  constexpr int H = kWarps / 2;
  // B1.
  if (b.warp < H) {
    step1_totals(b, t, 32 * H);
  } else if (s.worker) {
    if (b.warp == H) sort_keys_warp(b, t);
    else block_bases(b, t, s, 32 * (H + 1), kThreads - 32 * (H + 1));
  }
  __syncthreads();
  trace_point(p, 5);
  // B2. base[e] += bb[e]: step 6's G = base[e] + j - key[e] is then
  // the rank-wide index of the entry in slot j. The whole sort beside step
  // 3 outlasts step 3 itself when step 3 leaves warps idle (R < kWarps), so
  // it is split to end with it: the first half of the C1 warps' entries
  // here, by the warps that do not share warp 0's scheduler (warp w issues
  // on sub-partition w % 4; sorting on all of warps 1.. slows step 2), the
  // rest in B3.
  const bool sort_in_3 = R < kWarps;
  constexpr int kHalf = kWarps / 2;
  if (b.warp == 0) {
    plan_rank_moves(b, t.load, t.bal, t.from, t.quota);
  } else if (s.worker) {
    MOONEP_ROLLED
    for (int e = b.tid - 32; e < E; e += kThreads - 32) t.base[e] += t.bb[e];
    if (!sort_in_3) sort_entries(b, t, s, b.warp - 1, kWarps - 1, 0, kWarps);
    else if (b.warp % 4 != 0) sort_entries(b, t, s, b.warp - 1 - b.warp / 4, kWarps - 1 - (kWarps - 1) / 4, 0, kHalf);
  }
  __syncthreads();
  trace_point(p, 6);
  // B3.
  if (sort_in_3 && b.warp >= R && s.worker) sort_entries(b, t, s, b.warp - R, kWarps - R, kHalf, kWarps);
  step3_expert_split(b, t);
  __syncthreads();
  trace_point(p, 7);
  // B4 (C1's per-warp counts are done with: eoff takes their place).
  MOONEP_ROLLED
  for (int d = b.warp; d < R; d += kWarps) steps_4_5(b, t, d);
  __syncthreads();
  if (b.lb == 0) store_plan_tables(b, t);
}

// Where the block's tables live.
template <bool kGlobal>
__device__ __forceinline__ int* tables_base(const Block& b) {
  if constexpr (kGlobal) {
    return b.loc() + b.p.loc.tables + static_cast<i64>(b.lb) * b.p.table_words;
  } else {
    return dynamic_smem();
  }
}

// Steps 7-8 for the block's tokens [tk0, tk0 + nt) (entries from i0, the
// block's first). Step 7 stores each token's dst values (duplicates
// flipped) from its registers; t.pos keeps them unflipped for step 8. Each
// primary's duplicates go to t.ent and the primaries to a list in t.sorted
// (both free after step 6).
__device__ __forceinline__ void dedup_tile(const Block& b, const Tables& t, int tk0, int nt, i64 i0) {
  const KernelParams& p = b.p;
  const int K = p.K, R = p.R, e0 = tk0 * K;
  const int* s_d = t.dd + e0;
  int* s_dst = t.pos + e0;
  unsigned* s_later = reinterpret_cast<unsigned*>(t.ent) + e0;
  step7_dedup(b, nt, s_d, s_dst, t.mask + tk0, t.cnt, b.out() + p.out.dst + i0 + e0, s_later, t.sorted, t.nprim);
  __syncthreads();
  const Reservation res = reserve_dup_rows(b, t.cnt);
  trace_point(p, 11);
  trace_point(p, 12);
  if (b.tid < R) {
    t.gb[b.tid] = res.rows;
    t.lb[b.tid] = res.loffs;
  }
  __syncthreads();
  if (K <= kRegK && R <= 32) step8_list(b, *t.nprim, t.sorted, s_d, s_dst, s_later, t.gb, t.lb, t.cnt);
  else step8_rows(b, nt, s_d, s_dst, t.mask + tk0, t.gb, t.lb, t.cnt);
}

template <bool kGlobal, bool kWorld>
__device__ __forceinline__ void plan_step(const KernelParams& p) {
  const Entry entry = enter_kernel(p, kWorld);
  Block b = entry.b;
  const unsigned epoch_now = entry.epoch_now;
  const int R = p.R, E = p.E, K = p.K, B = p.B, NvS = p.NvS;
  const int as = acum_stride(R), mw = mark_words(E);
  const Slice s = slice_of(b);
  const i64 i0 = s.tok0 * K;
  const int nt = static_cast<int>(s.tok1 - s.tok0), ne = nt * K;
  const bool sys = p.sys_scope != 0;
  const unsigned all_blocks = static_cast<unsigned>(R) * static_cast<unsigned>(p.bpr);
  const std::int32_t* brouting = p.routing[b.g] + i0;  // the block's first entry
  const int w0 = static_cast<int>(s.ws0 - i0), w1 = static_cast<int>(s.ws1 - i0);  // this warp's entries
  // The first batch of C1's routing loads goes out before the housekeeping.
  int ev0[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int li = w0 + 32 * u + b.lane;
    ev0[u] = li < w1 ? brouting[li] : -1;
  }
  trace_point(p, 0);
  const Tables t = carve(tables_base<kGlobal>(b), p);
  trace_point(p, 1);
  if (p.trace && b.tid == 0 && ev0[kUnroll - 1] != INT_MIN) {
    trace_point(p, 16);  // the debug trace only: thread 0's routing loads have arrived
  }

  // ---- C1 ----------------------------------------------------------------------
  count_and_rank(b, t, brouting, w0, w1, i0, ev0);
  b.epoch = share_epoch(epoch_now);
  const unsigned next = b.epoch + 1u;
  trace_point(p, 2);
  if (b.separate_launches()) {
    // A GPU world's ranks are separate launches: another rank may still be
    // in the previous step, reserving dup rows on this rank's dup_counts
    // or reading the gathered counts rank 0 zeroes. Everything below that
    // another rank's previous step touches waits until every block has
    // ended that step (with virtual ranks the launch boundary orders it).
    int late = 0;
    if (b.tid == 0) late = !poll_counter_acquire(sys, b.counter(kDone).poll_at, all_blocks * b.epoch, p.timeout_ns);
    if (__syncthreads_or(late)) {
      record_late(p, kDone);
      return;
    }
  }
  // Block 0 zeroes its rank's dup_counts, this step's reservation counters:
  // other ranks reserve on them only after the barrier, which follows this
  // block's arrival (a release).
  if (b.lb == 0 && b.tid == 0) {
    b.out()[p.out.dup_counts] = 0;
    b.out()[p.out.dup_counts + 1] = 0;
  }
  if (s.worker) publish_block_totals(b, t, s);
  const RankCounter gather = b.counter(kGather);
  arrive_one(sys, gather);
  trace_point(p, 3);

  // While the others arrive: thread 0 polls the counter at once, and warps
  // 1.. zero the plan's tables meanwhile. (With all threads zeroing first
  // and thread 0 polling after, the zeroing mostly ends after the last
  // arrival, and the poll's round trip comes on top.)
  int late = 0;  // thread 0's: the arrivals did not all come within timeout_ns
  if (b.warp == 0) {
    if (b.tid == 0) {
      // Acquire loads as the poll, no fence after it: the block is alone on
      // its SM, so the L1 invalidation each acquire brings costs none of
      // our blocks anything.
      late = !poll_counter_acquire(sys, gather.poll_at, all_blocks * next, p.timeout_ns);
      trace_point(p, 15);  // debug trace: thread 0 has seen every arrival
    }
  } else {
    const int zt = b.tid - 32;
    constexpr int zn = kThreads - 32;
    MOONEP_ROLLED
    for (int i = zt; i < E * as; i += zn) t.acum[i] = 0;
    MOONEP_ROLLED
    for (int i = zt; i < R * mw; i += zn) t.mark[i] = 0u;
    MOONEP_ROLLED
    for (int i = zt; i < R * B; i += zn) t.etc[i] = -1;
    MOONEP_ROLLED
    for (int i = zt; i < ne; i += zn) t.sorted[i] = -1;
    MOONEP_ROLLED
    for (int r = zt; r < R; r += zn) {
      t.sip[r] = b.out_of(r) + p.out.src_info;
      t.load[r] = 0;
      t.from[r] = -1;
      t.quota[r] = 0;
      t.ncand[r] = 0;
      t.cnt[r] = 0;
    }
    if (zt == 0) {
      *t.nprim = 0;
      // The rank's N_r, for DeviceRankPlan::entries (a load the block's
      // wait hides). A bad count is 0 here and recorded by the workers
      // (rank_tokens).
      if (b.lb == 0) b.out()[p.out.entries] = max(read_count(p, b.g), 0) * K;
    }
    if (b.mc() || b.rank == 0) {
      // The other parity's gathered counts (this block's copy: rank 0's, or
      // with multicast each rank's own) were last read in the step before;
      // zero them for the step after.
      std::int32_t* other = b.tpe_all(next);
      const i64 z0 = static_cast<i64>(b.lb) * zn + zt, zstride = static_cast<i64>(p.bpr) * zn;
      MOONEP_ROLLED
      for (i64 i = z0; i < static_cast<i64>(R) * E; i += zstride) other[i] = 0;
    }
  }
  if (__syncthreads_or(late)) {
    // A rank never came: the step is void (the host resets the counters);
    // the block ends before it stores anything into another rank.
    record_late(p, kGather);
    return;
  }
  trace_point(p, 4);

  // ---- B: the plan and the sort --------------------------------------------------
  plan_and_sort(b, t, s);
  trace_point(p, 9);

  // ---- C2 ----------------------------------------------------------------------
  step6_destinations(b, t, ne, b.rank * NvS + static_cast<int>(i0));
  __syncthreads();
  trace_point(p, 10);
  if constexpr (!kGlobal) {
    // Shared tables hold fewer than kDupCountEntries entries per block.
    dedup_tile(b, t, 0, nt, i0);
  } else {
    const int tile = (kDupCountEntries - 1) / K;
    MOONEP_ROLLED
    for (int tk0 = 0; tk0 < nt; tk0 += tile) {
      dedup_tile(b, t, tk0, min(tile, nt - tk0), i0);
      __syncthreads();
      // The next tile counts and lists from zero again.
      if (b.tid < R) t.cnt[b.tid] = 0;
      if (b.tid == 0) *t.nprim = 0;
      __syncthreads();
    }
  }
  trace_point(p, 13);
  // Off every other block's path: block 0 stores its rank's full layout.
  if (b.lb == 0) store_layout(b, t);
  trace_point(p, 14);
  if (b.lb == 0 && b.tid == 0) {
    *reinterpret_cast<volatile unsigned*>(b.loc() + p.loc.epoch) = next;
  }
  // GPU world: this block's part of the step (its stores into other ranks
  // included) is done.
  if (b.separate_launches()) arrive_one(sys, b.counter(kDone));
  trace_clock(p, kTracePoints - 1);
}

}  // namespace

__global__ void MOONEP_KERNEL_BOUNDS plan_kernel_shared_tables(const __grid_constant__ KernelParams p) {
  plan_step<false, false>(p);
}

__global__ void MOONEP_KERNEL_BOUNDS plan_kernel_global_tables(const __grid_constant__ KernelParams p) {
  plan_step<true, false>(p);
}

__global__ void MOONEP_KERNEL_BOUNDS plan_kernel_shared_tables_world(const __grid_constant__ KernelParams p) {
  plan_step<false, true>(p);
}

__global__ void MOONEP_KERNEL_BOUNDS plan_kernel_global_tables_world(const __grid_constant__ KernelParams p) {
  plan_step<true, true>(p);
}

}  // namespace moonep::cuda::impl
