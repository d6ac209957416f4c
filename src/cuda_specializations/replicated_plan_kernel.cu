// The replicated-planning kernel: docs/spec/planning.md steps 1-8 for R virtual ranks
// on one GPU in one cooperative launch, with ONE cross-block barrier per
// step. Every block computes the whole plan (steps 1-5, a few KB of
// tables) in its own shared memory from the gathered counts, instead of
// rank 0 computing it and handing tables to the others (plan_kernel.cu).
// The planning is redundant but short and local; what it removes is the
// serial chain of hand-offs (counts -> rank 0 -> acum -> every rank's
// offsets -> every block's staging) that dominated the rank-0 kernel's
// step. Blocks 1..bpr-1 of a rank own a slice of its tokens each; block 0
// (when bpr > 1) owns none, and stores the rank's full layout while the
// others run C2.
//
// Per step, per block:
//   A   block 0: zero the rank's dup_counts, the reservation counters
//       others add to later. No block barrier. No src_info prefill: block
//       0 writes -1 exactly where no entry lands (C2).
//   C1  each warp zeroes its own histogram row and peer words, then one
//       pass over the block's entries: per-warp histograms and each
//       entry's rank among the warp's entries of its expert (the lanes
//       holding the same expert found by a shared atomicOr into the warp's
//       word of that expert), in shared memory;
//       block totals stored for later blocks' bases (the rank's
//       [worker][E] rows: whole lines per block) and added with atomics
//       into the gathered tokens_per_expert (double-buffered by step
//       parity); arrive at the one counter every block of every rank
//       waits on. While waiting: warps 1.. zero the plan's tables, and
//       thread 0 polls the counter meanwhile (acquire loads).
//   B   after the barrier, four windows between block barriers: step 1
//       (the gathered counts: cum of the ranks before, totals, load) on
//       half the warps while the others compute the sort keys and the
//       earlier blocks' counts; step 2 by warp 0; step 3 and acum (one
//       warp per owner); steps 4-5 over each destination's own and
//       candidate experts only (one warp per destination). Beside step 3
//       (beside step 2 when R >= kWarps leaves no warp idle there) the
//       other warps sort the block's entries by expert (slot key[e] + warp
//       base + rank: a contiguous range per expert, `sorted` / `sexp`).
//       Block 0 of rank d stores d's experts_to_copy and remote_stats. The
//       sort used to run while waiting, on the last arriving block's
//       critical path.
//   C2  step 6 over the entries in expert order: destination and loff
//       (search of acum, the expert offsets: both in shared memory) and
//       the src_info store (consecutive words per (expert, destination)
//       run; each destination's src_info pointer from a table filled
//       while waiting); step 7 per token (the token's dst values stored
//       from its registers, duplicates flipped; each primary's duplicates
//       as a bitmask for step 8), one dup-row reservation per
//       destination, step 8 rows; block 0 stores cu_seqlens, the
//       zero-fill ranges and src_info -1 in the padding and tail slots.
//       The kernel's end publishes everything.
//
// The host launches one block per SM at most (plan_kernel.hpp says why).
// A bad expert id is recorded in DeviceStatus and skipped everywhere;
// every block passes the one barrier, so a bad step never hangs, and the
// next step starts clean. The wait at that barrier is bounded
// (KernelParams::timeout_ns): past it the block records it
// (DeviceStatus::late) and ends before any store into another rank. The host uses this kernel when its shared memory
// (which grows with E*R and with the entries per block) fits and all
// R*bpr blocks are co-resident; plan_kernel.cu covers every other shape.
// docs/design/cuda_planner.md says why the kernel is laid out this way.
#include <climits>
#include <cstdint>

#include "kernel_common.cuh"
#include "replicated_layout.hpp"
#include "sync_primitives.cuh"

namespace moonep::cuda::impl {
namespace {

// Shared memory of one block, carved as replicated_layout.hpp sizes it.
struct Tables {
  int* ent;       // [ne] expert of each entry (-1: bad id)
  int* pos;       // [ne] rank among the warp's entries of its expert (C1); then dst
  int* sorted;    // [ne] entries in expert order (-1: no entry)
  int* sexp;      // [ne] expert of each slot of `sorted`
  int* dd;        // [ne] destination rank of each entry
  unsigned* mask; // [nt] step 7 primaries with duplicates
  int* base;      // [E] rank-wide index of the block's first entry of e
  int* key;       // [E] block-local slot of the block's first entry of e
  int* rem;       // [E] totals, then what each owner keeps
  int* bb;        // [E] the rank's entries of e in the blocks before this one
  int* hist;      // [kWarps][E] per-warp counts (C1), then exclusive warp bases
  int* eoff;      // [R][E] d's slot of e's entry with global index G is eoff[d][e] + G (hist's space, steps 4-5 on)
  int* acum;      // [E][acum_stride] alloc, then its prefix over ranks
  int* cand;      // [R][epn][2] each receiver's (expert, count) takes
  int* cslot;     // [R][epn] copy slot of each candidate (-1: not copied)
  int* etc;       // [R][B] experts_to_copy
  unsigned* mark; // [R][mark_words] experts picked into d's copy slots
  unsigned* peer; // [kWarps][E] C1: lanes of the round holding e (sorted .. bb's space)
  std::int32_t** sip; // [R] each destination's src_info
  int *load, *bal, *from, *quota, *ncand, *copies, *cnt, *gb, *lb, *scan;
  int* nprim;     // steps 7-8: primaries with duplicates in the block's list
};

__device__ Tables carve(int* sm, const KernelParams& p) {
  const ReplicatedRegions& l = p.repl;  // the host's replicated_layout
  Tables t;
  t.ent = sm + l.ent;
  t.pos = sm + l.pos;
  t.sorted = sm + l.sorted;
  t.sexp = sm + l.sexp;
  t.dd = sm + l.dd;
  t.mask = reinterpret_cast<unsigned*>(sm + l.mask);
  t.base = sm + l.base;
  t.key = sm + l.key;
  t.rem = sm + l.rem;
  t.bb = sm + l.bb;
  t.hist = sm + l.hist;
  t.eoff = t.hist;
  t.acum = sm + l.acum;
  t.cand = sm + l.cand;
  t.cslot = sm + l.cslot;
  t.etc = sm + l.etc;
  t.mark = reinterpret_cast<unsigned*>(sm + l.mark);
  t.peer = reinterpret_cast<unsigned*>(sm + l.peer);
  t.sip = reinterpret_cast<std::int32_t**>(sm + l.sip);
  int* small = sm + l.small;
  const int R4 = (p.R + 3) & ~3;
  t.load = small;
  t.bal = t.load + R4;
  t.from = t.bal + R4;
  t.quota = t.from + R4;
  t.ncand = t.quota + R4;
  t.copies = t.ncand + R4;
  t.cnt = t.copies + R4;  // steps 7-8: dup groups and loffs per destination, one word
  t.gb = t.cnt + R4;
  t.lb = t.gb + R4;
  t.scan = t.lb + R4;
  t.nprim = t.scan + kWarps;
  return t;
}

// alloc[d][e] from the prefix table.
// acum[e][d-1]: e's entries computed on the ranks before d (0 for d = 0).
__device__ __forceinline__ int acum_before(const Tables& t, int as, int e, int d) {
  return d > 0 ? t.acum[e * as + d - 1] : 0;
}
__device__ __forceinline__ int alloc_of(const Tables& t, int as, int e, int d) {
  return t.acum[e * as + d] - acum_before(t, as, e, d);
}

// Step 4 and d's expert offsets, for destination d by one warp. Rank d's
// non-empty groups are at most its own epn experts and its candidates (the
// remote experts it took from its one donor), so the offsets follow from
// those alone, in group order: own experts (groups d*epn..) and uncopied
// candidates (groups at their expert ids, in the donor's range, before or
// after d's) first, copy slots E+b last. Only (d, e) pairs with entries
// need an offset; the full E+B walk of cu_seqlens is store_layout's, for
// rank d only.
__device__ void steps_4_5_warp(const Block& b, const Tables& t, int d) {
  const KernelParams& p = b.p;
  const int E = p.E, B = p.B, epn = p.epn, as = acum_stride(p.R);
  const int mw = mark_words(E);
  const int nc = min(t.ncand[d], epn);
  const int* cd = t.cand + 2 * d * epn;
  int* slot = t.cslot + d * epn;  // copy slot of each candidate, -1: not copied
  // Step 4: the B largest remote counts, ties to the largest expert id; a
  // candidate's slot is the number of candidates that beat it.
  int uncopied = 0;  // padded entries of this lane's uncopied candidates
  MOONEP_ROLLED
  for (int i = b.lane; i < nc; i += 32) {
    const int ce = cd[2 * i], cc = cd[2 * i + 1];
    int beaten_by = 0;
    for (int j = 0; j < nc; ++j) {
      const int je = cd[2 * j], jc = cd[2 * j + 1];
      beaten_by += (jc > cc || (jc == cc && je > ce)) ? 1 : 0;
    }
    if (beaten_by < B) {
      t.etc[d * B + beaten_by] = ce;
      atomicOr(&t.mark[d * mw + (ce >> 5)], 1u << (ce & 31));
      slot[i] = beaten_by;
    } else {
      slot[i] = -1;
      uncopied += pad_to(p, cc);
    }
  }
  if (p.trace && d == 0 && uncopied != INT_MIN) trace_point(p, 19);  // debug trace: step 4 done (d = 0)
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
    int incl = v;
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, incl, o);
      if (b.lane >= o) incl += n;
    }
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

// Step 5 outputs of this block's rank d (block 0 only): cu_seqlens and the
// zero-fill ranges over all E+B groups, each thread a contiguous run of
// groups, one block-wide scan. Also src_info -1 in every slot no entry
// lands on this step: each group's padding and the tail after the last
// group (entry slots are all written by step 6, of some rank's blocks), so
// no block prefills the whole src_info before the barrier.
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
    MOONEP_ROLLED
    for (int x = start + count; x < end; ++x) si[x] = -1;
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

// ---- B: the plan (steps 1-5) and the sort of the block's entries ------------
// After the barrier, in four windows between block barriers:
//   1. warps 0..H-1 (H = kWarps / 2): step 1; warp H: the sort keys; warps
//      H+1..: the earlier blocks' counts of each expert (bb);
//   2. warp 0: step 2; the other warps: bb into base and the block's
//      entries into expert order (all of them at R >= kWarps; else those
//      of the first half of the C1 warps, on the warps beside warp 0's
//      scheduler);
//   3. step 3, one warp per owner (at R < kWarps, warps R.. sort the
//      rest of the block's entries meanwhile);
//   4. steps 4-5, one warp per destination.
// The sort is needed only from step 6 on: beside steps 1-3 it is off the
// critical path (before the barrier it was on the last arriving block's),
// and it uses warps planning leaves idle. Every barrier is the whole
// block's: with a named barrier per warp group, compute-sanitizer's
// racecheck reports hazards between accesses that __syncthreads orders,
// so the sanitizer could no longer vouch for the kernel.

// Window 1, by one warp: key[e], the block's count of e (block totals),
// becomes e's first slot in `sorted` (lane l sums a run of experts, the
// warp scans the lane sums).
__device__ void sort_keys_warp(const Block& b, const Tables& t) {
  const int E = b.p.E, per = (E + 31) / 32;
  const int e0 = min(E, b.lane * per), e1 = min(E, e0 + per);
  int sum = 0;
#pragma unroll 4
  for (int e = e0; e < e1; ++e) sum += t.key[e];
  int incl = sum;
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, incl, o);
    if (b.lane >= o) incl += n;
  }
  int slot = incl - sum;
#pragma unroll 4
  for (int e = e0; e < e1; ++e) {
    const int c = t.key[e];
    t.key[e] = slot;
    slot += c;
  }
}

// Window 1, by threads [first, first + n): bb[e], the rank's entries of e
// in the blocks before this one (their counts in the rank's per-block rows
// [nworkers][E], readable after the barrier). A thread takes experts e and
// e + n together, up to 16 blocks' loads of each in flight: at the
// headline (E = 256 on 224 threads) every expert is then one round trip
// to L2 instead of two for the threads holding two experts. A warp's loads
// are 32 consecutive words of one row.
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
// warp is number idx of n), in a window where most warps are idle: every
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

// Steps 1-5 into the block's shared tables and the sort, in the windows
// above; block 0 of rank d also stores d's experts_to_copy and
// remote_stats.
__device__ void plan_and_sort(const Block& b, const Tables& t, const Slice& s) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, epn = p.epn, as = acum_stride(R);
  constexpr int H = kWarps / 2;
  // Window 1.
  if (b.warp < H) {
    // Step 1, one expert per thread: cum of the ranks before this one,
    // total, and this rank's count (checked against a given
    // tokens_per_expert).
    const std::int32_t* tall = b.tpe_all(b.epoch);
    const std::int32_t* given = b.lb == 0 ? p.tpe[b.g] : nullptr;
    MOONEP_ROLLED
    for (int e = b.tid; e < E; e += 32 * H) {
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
      add_to_load(t.load, epn, e, total);
    }
  } else if (s.worker) {
    if (b.warp == H) sort_keys_warp(b, t);
    else block_bases(b, t, s, 32 * (H + 1), kThreads - 32 * (H + 1));
  }
  __syncthreads();
  trace_point(p, 5);
  // Window 2. base[e] += bb[e]: step 6's G = base[e] + j - key[e] is then
  // the rank-wide index of the entry in slot j.
  // All the entries are sorted here when step 3 leaves no warp idle (R >=
  // kWarps). When it leaves warps idle (R < kWarps), the first half of
  // the C1 warps' entries are sorted here, by the warps that do not share
  // warp 0's scheduler (warp w issues on sub-partition w % 4; sorting on
  // all of warps 1.. slows step 2, which warp 0 runs), the rest in window
  // 3: the whole sort beside step 3 outlasts step 3 itself, so it is split
  // to end with it.
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
  // Window 3: step 3 (one warp per owner) into the shared alloc, and
  // acum[e][r], its prefix over ranks in place, of the owner's experts by
  // the same warp (an expert's alloc comes from its owner's split alone;
  // odd row stride: the rows of 32 consecutive experts fall in distinct
  // banks).
  if (sort_in_3 && b.warp >= R && s.worker) sort_entries(b, t, s, b.warp - R, kWarps - R, kHalf, kWarps);
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
  __syncthreads();
  trace_point(p, 7);
  // Window 4: steps 4-5, one warp per destination (the per-warp counts of
  // C1 are done with: eoff takes their place).
  MOONEP_ROLLED
  for (int d = b.warp; d < R; d += kWarps) steps_4_5_warp(b, t, d);
  __syncthreads();
  if (b.lb == 0) {
    // Every rank's output holds the whole experts_to_copy table.
    MOONEP_ROLLED
    for (int i = b.tid; i < R * p.B; i += kThreads) b.out()[p.out.experts_to_copy + i] = t.etc[i];
    if (b.tid == 0) {
      b.out()[p.out.remote_stats] = min(t.ncand[b.rank], epn);
      b.out()[p.out.remote_stats + 1] = t.copies[b.rank];
    }
  }
}

}  // namespace

__global__ void MOONEP_KERNEL_BOUNDS replicated_plan_kernel(const __grid_constant__ KernelParams p) {
  int* sm = dynamic_smem();
  const Entry entry = enter_kernel(p);
  Block b = entry.b;
  const unsigned epoch_now = entry.epoch_now;
  const int R = p.R, E = p.E, K = p.K, B = p.B, NvS = p.NvS;
  const int as = acum_stride(R), mw = mark_words(E);
  // Block 0 of a rank owns no tokens when bpr > 1 (nworkers = bpr - 1): it
  // plans like every block and stores the rank's full layout while the
  // other blocks run C2.
  const Slice s = slice_of(b);
  const i64 i0 = s.tok0 * K;
  const int nt = static_cast<int>(s.tok1 - s.tok0), ne = nt * K;
  const bool sys = p.sys_scope != 0;
  // C1 indexes the block's entries from its first one, in 32 bits (a
  // block's entries fit shared memory): 64-bit entry indices cost a carry
  // and a second compare at every use in C1's rounds.
  const std::int32_t* btopk = p.topk[b.g] + i0;  // the block's first entry
  const int w0 = static_cast<int>(s.ws0 - i0), w1 = static_cast<int>(s.ws1 - i0);  // this warp's entries
  // The first batch of C1's routing loads goes out before the housekeeping.
  int ev0[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int li = w0 + 32 * u + b.lane;
    ev0[u] = li < w1 ? btopk[li] : -1;
  }
  trace_point(p, 0);
  const Tables t = carve(sm, p);

  // ---- A: housekeeping -----------------------------------------------------
  // Other ranks write into this rank's src_info and reserve on its
  // dup_counts only after the barrier, which is after this block's
  // arrival (a release).
  // src_info needs no prefill: store_layout writes -1 exactly where no
  // entry lands.
  // No block barrier: each warp zeroes its own histogram row and peer
  // words in C1, the only shared memory it touches before the totals.
  zero_dup_counts(b);
  trace_point(p, 1);
  if (p.trace && b.tid == 0 && ev0[kUnroll - 1] != INT_MIN) {
    trace_point(p, 16);  // the debug trace only: thread 0's routing loads have arrived
  }

  // ---- C1: histograms and ranks within each warp ------------------------------
  // The lanes of a round holding the same expert e (its peers) are found
  // through the warp's word of e in t.peer: every lane ORs its bit into
  // it, then reads it back (OR commutes, so the word is the same whatever
  // order the atomics take), and the round's first peer clears it. One
  // shared atomic and one load per round instead of a ballot per bit of
  // the id, which took about twice as long.
  {
    int* row = t.hist + b.warp * E;
    unsigned* peer = t.peer + b.warp * E;
    const unsigned lt = (1u << b.lane) - 1u;
    // Each warp zeroes its own words: zeroed with the block's housekeeping
    // (A), behind a block barrier, they hold up the first routing loads.
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
        ev[u] = base0 == w0 ? ev0[u] : (li < w1 ? btopk[li] : -1);
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
          // would be one more shared round trip on the round's chain.
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
  b.epoch = share_epoch(epoch_now);
  const unsigned next = b.epoch + 1u;
  trace_point(p, 2);

  // Block totals: warp rows become exclusive warp bases; the block's count
  // of e goes to the rank's hist[w][e] (worker-major: the block's row is
  // consecutive words, its stores whole lines; expert-major rows, which
  // let later blocks load their bases as 16-byte vectors, make the
  // arrival's release wait for every block's scattered stores into the
  // same lines) and into the gathered counts.
  if (s.worker) {
    std::int32_t* ghist = b.loc() + p.loc.hist + static_cast<i64>(s.w) * E;
    std::int32_t* tall = b.tpe_all(b.epoch) + static_cast<i64>(b.rank) * E;
    MOONEP_ROLLED
    for (int e = b.tid; e < E; e += kThreads) {
      // Every warp's count first, then the bases: the compiler cannot tell
      // that hist[w * E + e] and hist[(w + 1) * E + e] differ (E is not a
      // constant), so in one loop each load would wait for the store
      // before it, kWarps shared round trips on every block's way to its
      // arrival.
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
      if (run > 0) atomicAdd(tall + e, run);
      t.key[e] = run;
    }
  }
  const unsigned all_blocks = static_cast<unsigned>(R) * static_cast<unsigned>(p.bpr);
  unsigned* gather = b.ctr(0, kGather);
  arrive_one(sys, gather);
  trace_point(p, 3);

  // While the others arrive: thread 0 polls the counter at once, and
  // warps 1.. zero the plan's tables meanwhile. (With all threads zeroing
  // first and thread 0 polling after, the zeroing mostly ends after the
  // last arrival, and the poll's round trip comes on top.)
  int late = 0;  // thread 0's: the arrivals did not all come within timeout_ns
  if (b.warp == 0) {
    if (b.tid == 0) {
      // Acquire loads as the poll, no fence after it (faster than relaxed
      // polls and a fence.acq_rel): the block is alone on its SM, so the L1
      // invalidation each acquire brings costs none of our blocks anything.
      late = !poll_counter_acquire(sys, gather, all_blocks * next, p.timeout_ns);
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
    if (zt == 0) *t.nprim = 0;
    if (b.rank == 0) {
      // The other parity's gathered counts were last read in the step
      // before (an earlier launch); zero them for the step after.
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

  // ---- B: the plan and the sort ---------------------------------------------------
  plan_and_sort(b, t, s);
  trace_point(p, 9);

  // ---- C2 ----------------------------------------------------------------------
  // Step 6 in expert order (slot j of `sorted`; its rank among the block's
  // entries of e is j - key[e]): destination d (first with acum[e][d] > G),
  // loff, dst, and the src_info store, where a run of one expert's entries
  // bound for one destination lands on consecutive words. Neighbouring
  // lanes mostly share an expert, so the table lookups are broadcasts
  // rather than bank conflicts. A thread's kUnroll slots go through each
  // stage together (the search is a fixed ladder of steps), so their
  // dependent shared loads overlap instead of queueing one slot after the
  // other.
  const int top = search_top(R);
  const int src0 = b.rank * NvS + static_cast<int>(i0);  // src_info value of the block's entry 0
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
    // d = how many acum[e][d] are <= G (acum is non-decreasing over d).
    for (int step = top; step > 0; step >>= 1) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = lo[u] + step;
        if (c <= R && t.acum[ex[u] * as + c - 1] <= G[u]) lo[u] = c;
      }
    }
    // The stores, with as few instructions per slot as possible: d's
    // src_info pointer from a table, the source index from one base, one
    // error flag for all slots (step 6 issues some 75 instructions per slot
    // on 16 warps: its time is as much issue as latency).
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
  __syncthreads();
  trace_point(p, 10);
  // Step 7 stores each token's dst values (duplicates flipped) from its
  // registers; t.pos keeps them unflipped for step 8.
  int* s_dst = t.pos;
  // Each primary's duplicates go to ent (free after step 6) and the
  // primaries to a list in sorted (also free), for step 8.
  unsigned* s_later = reinterpret_cast<unsigned*>(t.ent);
  step7_dedup<true>(b, nt, t.dd, s_dst, t.mask, t.cnt, b.out() + p.out.dst + i0, s_later, t.sorted, t.nprim);
  __syncthreads();
  const Reservation res = reserve_dup_rows(b, t.cnt);
  trace_point(p, 11);
  trace_point(p, 12);
  if (b.tid < R) {
    t.gb[b.tid] = res.rows;
    t.lb[b.tid] = res.loffs;
  }
  __syncthreads();
  if (K <= kRegK && R <= 32) step8_list(b, *t.nprim, t.sorted, t.dd, s_dst, s_later, t.gb, t.lb, t.cnt);
  else step8_rows<true>(b, nt, t.dd, s_dst, t.mask, t.gb, t.lb, t.cnt);
  trace_point(p, 13);
  // Off every other block's path: block 0 stores its rank's full layout.
  if (b.lb == 0) store_layout(b, t);
  trace_point(p, 14);
  if (b.lb == 0 && b.tid == 0) {
    *reinterpret_cast<volatile unsigned*>(b.loc() + p.loc.epoch) = next;
  }
  trace_clock(p, kTracePoints - 1);
}

std::int64_t replicated_shared_bytes(int R, int E, int B, int K, int block_tokens) {
  return replicated_layout(R, E, B, K, block_tokens).words * 4;
}

}  // namespace moonep::cuda::impl
