// The planning kernel: docs/spec/planning.md steps 1-8 for R virtual ranks on one
// GPU in one cooperative launch. Block group g (bpr blocks) is rank g. All
// ranks share one GPU, so the planning tables are written once (into rank
// 0's chunk) and read by every rank, and every result is written straight
// into the destination rank's output buffer: no broadcast copies, no final
// all-ranks barrier, no copy-out phase. Per step, per rank:
//
//   Phase A   prefill own src_info output with -1, zero own dup_counts
//             (rank 0: zero the alloc table); C1 pass 1: per-warp
//             histograms of the rank's entries; block totals added with
//             atomics into the gathered tokens_per_expert (double-buffered
//             by step parity) and written for the bases; arrive at rank 0's
//             gather counter. Rank 0 can plan as soon as every block has
//             counted: the rank's grid barrier is off its critical path.
//   C1 pass 2 grid barrier (blocks without entries arrive and go on);
//             per-block bases (prefix over the blocks before) and sort keys
//             (a contiguous slot range per expert, kept in shared memory
//             for C2); stable ranking of every entry among the rank's
//             entries of its expert (warp-aggregated with __match_any_sync).
//   Phase B   rank 0's block 0 waits for every block's counts, runs
//             steps 1-3 (totals, rank moves, expert split), pushes acum
//             and arrives at every rank's acum counter. Then block 0 of
//             every rank d runs steps 4-5 for d (cu_seqlens, zero-fill
//             ranges, experts_to_copy, remote_stats straight into the
//             outputs; d's expert offsets into the tables) and arrives at
//             every rank's tables counter.
//   C2        wait for acum; check the given tokens_per_expert; per tile of
//             tokens: step 6a destinations by binary search over acum,
//             dedup within each token (step 7), dup rows reserved with one
//             atomic per (tile, destination) on the destination's
//             dup_counts -- all while steps 4-5 run; then wait for the
//             expert offsets: step 6b loff and src_info into the
//             destination's output (entries walked by expert, so the
//             stores hit consecutive words), step 8 dup rows into its
//             outputs. The kernel's end publishes everything.
//
// Every rank's block 0 owns no entries (when bpr > 1) so that its planning
// (steps 1-3 on rank 0, steps 4-5 on every rank) runs beside the other
// blocks' C1 and C2. A bad expert id is recorded in
// DeviceStatus and skipped everywhere; every block still passes every
// barrier, so a bad step never hangs, and the next step starts clean.
// Every wait for another rank is bounded (KernelParams::timeout_ns): past
// it the block records the counter (DeviceStatus::late) and ends at once,
// storing nothing more, and the host resets the counters. Only cross-rank
// waits can time out: grid_sync, the one barrier within a rank, comes
// before the first of them, when every block of the launch is resident.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernel_common.cuh"
#include "sync_primitives.cuh"

namespace moonep::cuda::impl {
namespace {


// C2's staged tables: eoff [R][E], acum [E][acum_stride] (plan_kernel.hpp),
// cum [E]; rounded to 16 bytes.
__host__ __device__ inline std::int64_t staged_words(int R, int E) {
  return (static_cast<std::int64_t>(E) * acum_stride(R) + static_cast<std::int64_t>(E) * R + E + 3) & ~3LL;
}

// Shared memory of the phases (words; each phase reuses it from the start),
// then C1's per-block sort keys, kept from C1 pass 2 to C2 (key_words).
// The host sizes the launch with the same two functions.
__host__ __device__ inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }
__host__ __device__ inline std::int64_t phase_words(int R, int E, int B, int tile_tokens, bool stage_tables) {
  const std::int64_t epn = E / R;
  std::int64_t words = static_cast<std::int64_t>(kWarps) * E;       // C1
  words = max64(words, E + 5LL * R);                                 // steps 1-3
  words = max64(words, 2 * epn + 3LL * E + B + kWarps);              // steps 4-5
  const std::int64_t c2 = 3LL * kTileEntries + tile_tokens + 3LL * R;
  return max64(words, c2 + (stage_tables ? staged_words(R, E) : 0));  // C2
}
// key [E], count [E], scan scratch [kWarps].
__host__ __device__ inline std::int64_t key_words(int E) { return 2LL * E + kWarps; }

// Phase A, the rank's blocks together (thread t0 of nthr): src_info all -1
// (slots no entry lands on stay -1) and dup_counts zeroed. Other ranks
// write into these only after the barrier that follows this block's
// arrival (a release).
__device__ __forceinline__ void prefill_outputs(const Block& b, i64 t0, i64 nthr) {
  const KernelParams& p = b.p;
  const i64 nvs4 = (p.NvS + 3) & ~3;
  int4* si = reinterpret_cast<int4*>(b.out() + p.out.src_info);
  for (i64 q = t0; q < nvs4 / 4; q += nthr) si[q] = make_int4(-1, -1, -1, -1);
  zero_dup_counts(b);
}

// ---- Phase B, steps 1-3 (block 0 of rank 0) -------------------------------
__device__ void plan_steps_1_to_3(const Block& b, int* sm, unsigned step) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, epn = p.epn;
  int* s_rem = sm;           // [E] total, then what the owner keeps
  int* s_load = s_rem + E;   // [R]
  int* s_bal = s_load + R;   // [R]
  int* s_from = s_bal + R;   // [R] donor of each receiver (-1: none)
  int* s_quota = s_from + R; // [R] z[donor][receiver], consumed by step 3
  int* s_ncand = s_quota + R;// [R] remote experts of each receiver
  std::int32_t* alloc = b.loc() + p.loc.alloc;  // [E][R], zeroed in Phase A
  std::int32_t* cand = b.loc() + p.loc.cand;    // [R][epn][2] (expert, count)
  std::int32_t* ncand = b.loc() + p.loc.ncand;  // [R]

  for (int i = b.tid; i < R; i += kThreads) {
    s_load[i] = 0;
    s_from[i] = -1;
    s_quota[i] = 0;
    s_ncand[i] = 0;
  }
  __syncthreads();

  // Step 1: cum (row r, read by rank r+1 for its global indices), total,
  // load.
  const std::int32_t* tall = b.tpe_all(step);
  std::int32_t* cum = b.tab() + p.sym.cum;
  for (int e = b.tid; e < E; e += kThreads) {
    int run = 0;
    for (int r0 = 0; r0 < R; r0 += 8) {
      int v[8];
      rank_counts8(tall, E, R, e, r0, v);
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int r = r0 + u;
        run += v[u];
        if (r + 1 < R) cum[static_cast<i64>(r) * E + e] = run;
      }
    }
    s_rem[e] = run;
    add_to_load(s_load, epn, e, run);
  }
  __syncthreads();
  trace_point(p, 6);

  // Step 2: rank-level moves (warp 0).
  plan_rank_moves(b, s_load, s_bal, s_from, s_quota);
  __syncthreads();
  trace_point(p, 7);

  // Step 3: expert split into rank 0's alloc and candidate lists.
  plan_expert_split(
      b, s_rem, s_from, s_quota, s_ncand,
      [&](int e, int t, int c, int take) {
        alloc[static_cast<i64>(e) * R + t] = take;
        cand[(static_cast<i64>(t) * epn + c) * 2] = e;
        cand[(static_cast<i64>(t) * epn + c) * 2 + 1] = take;
      },
      [&](int e, int h, int keep) { alloc[static_cast<i64>(e) * R + h] = keep; },
      [&](int h, int copies) { b.out_of(h)[p.out.remote_stats + 1] = copies; }, [](int) {});
  __syncthreads();
  for (int t = b.tid; t < R; t += kThreads) ncand[t] = min(s_ncand[t], epn);
}

// ---- Phase B, steps 4-5 for rank d (one block of rank 0) ------------------
__device__ void plan_steps_4_5(const Block& b, int* sm, int d) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, B = p.B, epn = p.epn;
  std::int32_t* od = b.out_of(d);
  int* s_ce = sm;             // [epn] candidate experts
  int* s_cc = s_ce + epn;     // [epn] their remote counts
  int* s_mark = s_cc + epn;   // [E] 1 when picked into a copy slot
  int* s_eoff = s_mark + E;   // [E] group start of each expert on d
  int* s_etc = s_eoff + E;    // [B]
  int* s_scan = s_etc + B;    // [kWarps]
  int* s_alloc = s_scan + kWarps;  // [E] alloc[d][e]
  const std::int32_t* alloc = b.loc0() + p.loc.alloc;
  const std::int32_t* cand = b.loc0() + p.loc.cand;
  // All loads at once (no load depends on another): every candidate slot,
  // used or not, and d's column of alloc.
  const int nc = b.loc0()[p.loc.ncand + d];
  for (int i = b.tid; i < epn; i += kThreads) {
    s_ce[i] = cand[(static_cast<i64>(d) * epn + i) * 2];
    s_cc[i] = cand[(static_cast<i64>(d) * epn + i) * 2 + 1];
  }
  for (int e = b.tid; e < E; e += kThreads) {
    s_alloc[e] = alloc[static_cast<i64>(e) * R + d];
    s_mark[e] = 0;
  }
  for (int k = b.tid; k < B; k += kThreads) s_etc[k] = -1;
  __syncthreads();

  // Step 4: the B largest remote counts, ties to the largest expert id;
  // a candidate's slot is the number of candidates that beat it.
  for (int i = b.tid; i < nc; i += kThreads) {
    const int ce = s_ce[i], cc = s_cc[i];
    int beaten_by = 0;
    for (int j = 0; j < nc; ++j) {
      beaten_by += (s_cc[j] > cc || (s_cc[j] == cc && s_ce[j] > ce)) ? 1 : 0;
    }
    if (beaten_by < B) {
      s_etc[beaten_by] = ce;
      s_mark[ce] = 1;
    }
  }
  __syncthreads();

  // Step 5: layout, each thread a contiguous run of groups.
  const int G = E + B;
  const int per = (G + kThreads - 1) / kThreads;
  const int g0 = min(G, b.tid * per), g1 = min(G, g0 + per);
  auto expert_of = [&](int gi) { return gi < E ? (s_mark[gi] ? -1 : gi) : s_etc[gi - E]; };
  int sum = 0;
  for (int gi = g0; gi < g1; ++gi) {
    const int ex = expert_of(gi);
    sum += pad_to(p, ex >= 0 ? s_alloc[ex] : 0);
  }
  int start = block_exclusive_scan(sum, s_scan);
  for (int gi = g0; gi < g1; ++gi) {
    const int ex = expert_of(gi);
    if (ex >= 0) s_eoff[ex] = start;
    start = store_group(p, od, gi, start, ex >= 0 ? s_alloc[ex] : 0);
  }
  __syncthreads();

  // Every rank needs every rank's expert offsets (its entries may land
  // anywhere; one copy in the tables) and the whole experts_to_copy table
  // (into every rank's output).
  std::int32_t* erow = b.tab() + p.sym.eoff + static_cast<i64>(d) * E;
  if ((E & 3) == 0) {
    for (int q = b.tid; q < E / 4; q += kThreads) {
      reinterpret_cast<int4*>(erow)[q] =
          make_int4(s_eoff[4 * q], s_eoff[4 * q + 1], s_eoff[4 * q + 2], s_eoff[4 * q + 3]);
    }
  } else {
    for (int e = b.tid; e < E; e += kThreads) erow[e] = s_eoff[e];
  }
  for (int i = b.tid; i < R * B; i += kThreads) {
    b.out_of(i / B)[p.out.experts_to_copy + static_cast<i64>(d) * B + i % B] = s_etc[i % B];
  }
  if (b.tid == 0) od[p.out.remote_stats] = nc;
  __syncthreads();
}

// acum[e][r] = prefix over ranks of alloc[r][e], into the tables (block 0
// of rank 0, right after step 3: destinations need nothing else).
__device__ void push_acum(const Block& b) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E;
  const std::int32_t* alloc = b.loc() + p.loc.alloc;
  for (int e = b.tid; e < E; e += kThreads) {
    const std::int32_t* row = alloc + static_cast<i64>(e) * R;
    std::int32_t* dstrow = b.tab() + p.sym.acum + static_cast<i64>(e) * R;
    int run = 0;
    if ((R & 3) == 0) {
      for (int r = 0; r < R; r += 4) {
        int4 v;
        v.x = (run += row[r]);
        v.y = (run += row[r + 1]);
        v.z = (run += row[r + 2]);
        v.w = (run += row[r + 3]);
        *reinterpret_cast<int4*>(dstrow + r) = v;
      }
    } else {
      for (int r = 0; r < R; ++r) dstrow[r] = (run += row[r]);
    }
  }
}

// ---- C1: per-warp histograms and stable ranking ----------------------------
// Pass 1 (rank = false) adds the warp's counts to its histogram row; pass 2
// (rank = true) turns the row, now holding the warp's bases, into each
// entry's index among the rank's entries of its expert (written to pos).
template <bool kRank>
__device__ void c1_pass(const Block& b, const Slice& s, int* row) {
  const KernelParams& p = b.p;
  const std::int32_t* topk = p.topk[b.g];
  std::int32_t* pos = b.loc() + p.loc.pos;
  const unsigned lt = (1u << b.lane) - 1u;
  for (i64 base0 = s.ws0; base0 < s.ws1; base0 += 32 * kUnroll) {
    int ev[kUnroll];  // loads first, so they are in flight together
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const i64 i = base0 + 32 * u + b.lane;
      ev[u] = i < s.ws1 ? topk[i] : -1;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
    const i64 base = base0 + 32 * u;
    if (base >= s.ws1) break;
    const i64 i = base + b.lane;
    int e = ev[u];
    if (i < s.ws1 && static_cast<unsigned>(e) >= static_cast<unsigned>(p.E)) {
      if (!kRank) record(&p.status->bad_entry, b.rank, i);
      e = -1;
    }
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const bool leader = b.lane == __ffs(peers) - 1;
    if (kRank) {
      const int r = e >= 0 ? row[e] + __popc(peers & lt) : -1;
      __syncwarp();
      if (e >= 0 && leader) row[e] += __popc(peers);
      if (i < s.ws1) pos[i] = r;
    } else if (e >= 0 && leader) {
      row[e] += __popc(peers);
    }
    __syncwarp();
    }
  }
}

// ---- C2: destinations, src_info, dedup, dup structures ---------------------
// Two table stages: destinations (acum, cum; published right after step 3)
// and offsets (eoff; after every rank's steps 4-5). Step 6a (destination
// and offset within the (expert, destination) share), step 7 and the dup
// reservations need only the first, so they overlap steps 4-5; step 6b
// (loff, src_info) and step 8 follow wait_offsets().
template <class WaitAcum, class WaitOffsets>
__device__ bool c2_destinations(const Block& b, const Slice& s, int* sm, WaitAcum wait_acum,
                                WaitOffsets wait_offsets) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, K = p.K, NvS = p.NvS;
  // Staged tables first (16-byte aligned), then the tile.
  const int staged = p.stage_tables ? static_cast<int>(staged_words(R, E)) : 0;
  int as = R;  // row stride of acum (odd when staged: random rows spread over the banks)
  int* s_dst = sm + staged;                           // [kTileEntries]
  int* s_d = s_dst + kTileEntries;                    // [kTileEntries]
  int* s_e = s_d + kTileEntries;                      // [kTileEntries] expert of each entry
  unsigned* s_mask = reinterpret_cast<unsigned*>(s_e + kTileEntries);  // [tile_tokens]
  int* s_cnt = reinterpret_cast<int*>(s_mask + p.tile_tokens);          // [R] dup groups and loffs, one word
  int* s_gb = s_cnt + R;
  int* s_lb = s_gb + R;
  const std::int32_t* tab = b.tab();
  const std::int32_t* acum = tab + p.sym.acum;
  const std::int32_t* eoff = tab + p.sym.eoff;
  const std::int32_t* cum = b.rank > 0 ? tab + p.sym.cum + static_cast<i64>(b.rank - 1) * E : nullptr;
  const std::int32_t* topk = p.topk[b.g];
  const std::int32_t* pos = b.loc() + p.loc.pos;
  // The first batch of the first tile needs nothing from the planning:
  // its loads go out before the wait and land while rank 0 plans.
  int pe[kUnroll], pp[kUnroll];
  {
    const i64 i0 = s.tok0 * K;
    const int ne = static_cast<int>(min(static_cast<i64>(p.tile_tokens), s.tok1 - s.tok0)) * K;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int li = u * kThreads + b.tid;
      pe[u] = li < ne ? topk[i0 + li] : -1;
      pp[u] = li < ne ? pos[i0 + li] : 0;
    }
  }
  if (!wait_acum()) return false;
  // Step 6b in the order of the sort keys (see C1) when the block's entries
  // are one tile: its scattered src_info stores then hit consecutive words.
  // s_e then holds, per slot, (expert << 12) | entry (-1: no entry).
  static_assert(kTileEntries <= 4096, "entry index in 12 bits");
  const bool sorted = s.tok1 > s.tok0 && s.tok1 - s.tok0 <= p.tile_tokens && E <= (1 << 19);
  const int* s_key = sm + phase_words(R, E, p.B, max(1, kTileEntries / K), p.stage_tables != 0);
  if (sorted) {
    for (int j = b.tid; j < (s.tok1 - s.tok0) * K; j += kThreads) s_e[j] = -1;
  }
  int* s_eoff = sm;  // first: its 16-byte stores need E*R % 4 == 0 only
  if (p.stage_tables && s.tok1 > s.tok0) {
    // The lookups below are random per entry: serve them from shared
    // memory (one coalesced copy) rather than from L2.
    const int rs = acum_stride(R);
    int* s_acum = s_eoff + E * R;
    int* s_cum = s_acum + E * rs;
    const int n4 = (E * R) / 4;  // E*R is a multiple of 4 when staging
    for (int q = b.tid; q < n4; q += kThreads) {
      const int4 v = reinterpret_cast<const int4*>(acum)[q];
      const int c[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * q + j;
        s_acum[(i / R) * rs + i % R] = c[j];
      }
    }
    as = rs;
    for (int e = b.tid; e < E; e += kThreads) s_cum[e] = cum ? cum[e] : 0;
    acum = s_acum;
    cum = s_cum;
  }
  if (sorted || (p.stage_tables && s.tok1 > s.tok0)) __syncthreads();
  std::int32_t* out_dst = b.out() + p.out.dst;
  bool have_offsets = false;

  for (i64 t = s.tok0; t < s.tok1; t += p.tile_tokens) {
    const int nt = static_cast<int>(min(static_cast<i64>(p.tile_tokens), s.tok1 - t));
    const i64 i0 = t * K;
    const int ne = nt * K;
    for (int r = b.tid; r < R; r += kThreads) s_cnt[r] = 0;

    // Step 6a for every entry of the tile: destination d and the entry's
    // offset within d's share of its expert (s_dst until step 6b).
    for (int lbase = 0; lbase < ne; lbase += kThreads * kUnroll) {
    int ev[kUnroll], pv[kUnroll];  // loads first, so they are in flight together
    if (t == s.tok0 && lbase == 0) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) { ev[u] = pe[u]; pv[u] = pp[u]; }
    } else {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int li = lbase + u * kThreads + b.tid;
        ev[u] = li < ne ? topk[i0 + li] : -1;
        pv[u] = li < ne ? pos[i0 + li] : 0;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int li = lbase + u * kThreads + b.tid;
      if (li >= ne) break;
      const int e = ev[u];
      int v = -1, d = -1;
      if (static_cast<unsigned>(e) < static_cast<unsigned>(E)) {
        const int G = (cum ? cum[e] : 0) + pv[u];
        const std::int32_t* a = acum + static_cast<i64>(e) * as;
        int lo = 0, hi = R;  // first d with acum[e][d] > G
        while (lo < hi) {
          const int mid = (lo + hi) >> 1;
          if (a[mid] > G) hi = mid; else lo = mid + 1;
        }
        if (lo < R) {
          d = lo;
          v = G - (lo > 0 ? a[lo - 1] : 0);
        } else {
          internal_error(p);
        }
      }
      s_dst[li] = v;
      s_d[li] = d;
      if (!sorted) {
        s_e[li] = e;
      } else if (static_cast<unsigned>(e) < static_cast<unsigned>(E)) {
        const int slot = s_key[e] + pv[u];
        if (slot >= 0 && slot < ne) s_e[slot] = (e << 12) | li;
        else internal_error(p);
      }
    }
    }
    __syncthreads();
    trace_point(p, 13);

    // Step 7 per token, then one dup-row reservation per destination.
    step7_dedup<false>(b, nt, s_d, s_dst, s_mask, s_cnt);
    __syncthreads();
    const Reservation res = reserve_dup_rows(b, s_cnt);
    trace_point(p, 14);

    if (!have_offsets) {
      if (!wait_offsets()) return false;
      if (p.stage_tables) {
        const int n4 = (E * R) / 4;
        for (int q = b.tid; q < n4; q += kThreads) {
          reinterpret_cast<int4*>(s_eoff)[q] = reinterpret_cast<const int4*>(eoff)[q];
        }
        eoff = s_eoff;
        __syncthreads();
      }
      have_offsets = true;
      trace_point(p, 12);
    }
    // Step 6b: loff from the expert offsets, src_info into the
    // destination's output, s_dst the dst value (-dst-1 for duplicates).
    for (int j = b.tid; j < ne; j += kThreads) {
      int li = j, e;
      if (sorted) {
        const int key = s_e[j];
        if (key < 0) continue;
        li = key & 4095;
        e = key >> 12;
      } else {
        e = s_e[j];
      }
      const int d = s_d[li];
      if (d < 0) continue;
      const int x = s_dst[li];
      const bool dup = x < 0;
      const int loff = eoff[static_cast<i64>(d) * E + e] + (dup ? -x - 1 : x);
      if (loff < 0 || loff >= NvS) {
        internal_error(p);
        s_dst[li] = -1;
        continue;
      }
      const int v = d * NvS + loff;
      b.out_of(d)[p.out.src_info + loff] = static_cast<int>(b.rank * NvS + i0 + li);
      s_dst[li] = dup ? -v - 1 : v;
    }
    if (b.tid < R) {
      s_gb[b.tid] = res.rows;
      s_lb[b.tid] = res.loffs;
    }
    __syncthreads();

    step8_rows<false>(b, nt, s_d, s_dst, s_mask, s_gb, s_lb, s_cnt);
    for (int li = b.tid; li < ne; li += kThreads) out_dst[i0 + li] = s_dst[li];
    __syncthreads();
  }
  return true;
}

}  // namespace

__global__ void MOONEP_KERNEL_BOUNDS plan_kernel(const __grid_constant__ KernelParams p) {
  int* sm = dynamic_smem();
  const Entry entry = enter_kernel(p);
  Block b = entry.b;
  const unsigned epoch_now = entry.epoch_now;
  const unsigned all_blocks = static_cast<unsigned>(p.R) * static_cast<unsigned>(p.bpr);
  unsigned* gbar = reinterpret_cast<unsigned*>(b.loc() + p.loc.gbar);
  const i64 t0 = static_cast<i64>(b.lb) * kThreads + b.tid, nthr = static_cast<i64>(p.bpr) * kThreads;
  const bool sys = p.sys_scope != 0;
  trace_point(p, 0);

  // ---- Phase A: housekeeping for this step --------------------------------
  // Other ranks write into this rank's src_info and reserve on its
  // dup_counts only after the tables arrive, which is after this block's
  // gather arrival (a release) below.
  prefill_outputs(b, t0, nthr);
  {
    if (b.rank == 0) {
      const i64 n4 = (static_cast<i64>(p.E) * p.R + 3) / 4;
      int4* a = reinterpret_cast<int4*>(b.loc() + p.loc.alloc);
      for (i64 q = t0; q < n4; q += nthr) a[q] = make_int4(0, 0, 0, 0);
    }
  }

  // ---- C1 pass 1: histograms, counts gathered ------------------------------
  const Slice s = slice_of(b);
  int* s_hist = sm;  // [kWarps][E]
  for (int i = b.tid; i < kWarps * p.E; i += kThreads) s_hist[i] = 0;
  __syncthreads();
  c1_pass<false>(b, s, s_hist + b.warp * p.E);
  b.epoch = share_epoch(epoch_now);
  const unsigned next = b.epoch + 1u;
  trace_point(p, 1);
  // Block totals: hist[e][w] (row padded to nwp, a multiple of 4) for the
  // bases, and added into the gathered tokens_per_expert of this step
  // (zeroed during the step before; see below).
  std::int32_t* hist = b.loc() + p.loc.hist;
  const int nwp = (p.nworkers + 3) & ~3;
  if (s.worker) {
    std::int32_t* tall = b.tpe_all(b.epoch) + static_cast<i64>(b.rank) * p.E;
    for (int e = b.tid; e < p.E; e += kThreads) {
      int run = 0;
      for (int w = 0; w < kWarps; ++w) {
        const int c = s_hist[w * p.E + e];
        s_hist[w * p.E + e] = run;
        run += c;
      }
      hist[static_cast<i64>(e) * nwp + s.w] = run;
      if (run > 0) atomicAdd(tall + e, run);
    }
  }
  arrive_one(sys, b.ctr(0, kGather));
  trace_point(p, 2);

  // ---- C1 pass 2: bases and stable ranking ---------------------------------
  // A block without entries needs no bases: it does not wait (rank 0's
  // block 0 goes straight on to wait for the gathered counts).
  grid_sync(gbar, p.bpr, b.lb == 0, s.worker);
  trace_point(p, 3);
  // Sort keys for C2: the block's entries of expert e take the slots
  // key[e] + pos, a contiguous range per expert (pos is the entry's rank
  // among the rank's entries of e, and the block's are base..base+cnt-1).
  int* s_key = sm + phase_words(p.R, p.E, p.B, max(1, kTileEntries / p.K), p.stage_tables != 0);
  int* s_cnt = s_key + p.E;
  if (s.worker) {
    int mine = 0;
    for (int e = b.tid; e < p.E; e += kThreads) {
      const int4* row = reinterpret_cast<const int4*>(hist + static_cast<i64>(e) * nwp);
      int base = 0, cnt = 0;
#pragma unroll 8
      for (int q = 0; q < nwp / 4; ++q) {
        const int4 v = row[q];
        const int c[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (4 * q + j < s.w) base += c[j];
          if (4 * q + j == s.w) cnt = c[j];
        }
      }
      for (int w = 0; w < kWarps; ++w) s_hist[w * p.E + e] += base;
      s_key[e] = base;
      s_cnt[e] = cnt;
      mine += cnt;
    }
    int slot = block_exclusive_scan(mine, s_cnt + p.E);
    for (int e = b.tid; e < p.E; e += kThreads) {
      s_key[e] = slot - s_key[e];
      slot += s_cnt[e];
    }
  }
  __syncthreads();
  c1_pass<true>(b, s, s_hist + b.warp * p.E);
  __syncthreads();
  trace_point(p, 4);

  // ---- Phase B: rank 0 plans ----------------------------------------------
  if (b.rank == 0) {
    // The other parity's gathered counts were last read in the step before;
    // zero them for the step after.
    {
      std::int32_t* other = b.tpe_all(next);
      for (i64 i = t0; i < static_cast<i64>(p.R) * p.E; i += nthr) other[i] = 0;
    }
    if (b.lb == 0) {
      if (!wait_counter(sys, b.ctr(0, kGather), all_blocks * next, p.timeout_ns)) {
        record_late(p, kGather);
        return;
      }
      trace_point(p, 5);
      plan_steps_1_to_3(b, sm, b.epoch);
      __syncthreads();
      push_acum(b);
      // Steps 1-3 done (alloc, cand, ncand, cum) and acum out: every
      // rank's steps 4-5 and C2's destinations may start.
      arrive_all(sys, p.R, [&](int r) { return b.ctr(r, kAcum); });
      trace_point(p, 8);
    }
  }
  // ---- Phase B': steps 4-5 for rank d by block 0 of rank d ----------------
  // (block 0 owns no entries when bpr > 1, so they run beside C2.)
  if (b.lb == 0) {
    if (b.rank != 0 && !wait_counter(sys, b.ctr(b.rank, kAcum), next, p.timeout_ns)) {
      record_late(p, kAcum);
      return;
    }
    trace_point(p, 9);
    plan_steps_4_5(b, sm, b.rank);
    arrive_all(sys, p.R, [&](int r) { return b.ctr(r, kTables); });
    trace_point(p, 10);
  }
  // ---- C2 -----------------------------------------------------------------
  const bool met = c2_destinations(
      b, s, sm,
      [&] {
        if (!wait_counter(sys, b.ctr(b.rank, kAcum), next, p.timeout_ns)) {
          record_late(p, kAcum);
          return false;
        }
        trace_point(p, 11);
        if (b.lb == 0 && p.tpe[b.g]) {
          // The given tokens_per_expert must match the counted one.
          const std::int32_t* given = p.tpe[b.g];
          const std::int32_t* tall = b.tpe_all(b.epoch) + static_cast<i64>(b.rank) * p.E;
          for (int e = b.tid; e < p.E; e += kThreads) {
            if (given[e] != tall[e]) record(&p.status->bad_tpe, b.rank, e);
          }
        }
        return true;
      },
      [&] {
        if (wait_counter(sys, b.ctr(b.rank, kTables), static_cast<unsigned>(p.R) * next, p.timeout_ns)) return true;
        record_late(p, kTables);
        return false;
      });
  if (!met) return;  // a rank never came: the step is void, the host resets
  trace_point(p, 15);
  if (b.lb == 0 && b.tid == 0) {
    *reinterpret_cast<volatile unsigned*>(b.loc() + p.loc.epoch) = next;
  }
  trace_clock(p, kTracePoints - 1);
}

std::int64_t shared_bytes(int R, int E, int B, int tile_tokens, bool stage_tables) {
  return (phase_words(R, E, B, tile_tokens, stage_tables) + key_words(E)) * 4;
}

}  // namespace moonep::cuda::impl
