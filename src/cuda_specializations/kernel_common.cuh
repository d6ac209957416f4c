// Private: device code both planning kernels share (plan_kernel.cu, where
// rank 0 plans and publishes tables, and replicated_plan_kernel.cu, where
// every block plans for itself): the per-block view of the launch, error
// recording, the debug trace, warp/block reductions, docs/spec/planning.md steps 2-3
// on shared arrays, and steps 7-8 (dedup) on a tile of tokens.
// Included by .cu files only; everything has internal linkage.
#pragma once

#include <climits>
#include <cstdint>

#include "plan_kernel.hpp"

// Before a loop of code that runs once per launch (most of the planning
// kernels): keep it rolled. The kernels run once per step and are most
// likely more code than an SM's instruction cache holds, so what they
// execute is fetched anew at each launch; a loop unrolled for a trip count
// it rarely reaches (one or two trips at the headline) costs fetch time
// and gains nothing (measured: rolled was faster at the headline).
#define MOONEP_ROLLED _Pragma("unroll 1")

namespace moonep::cuda::impl {
namespace {

using i64 = long long;

struct Block {
  const KernelParams& p;
  int g, lb, rank, tid, lane, warp;
  unsigned epoch;

  __device__ std::int32_t* chunk(int r) const { return p.sym_base + r * p.sym_stride; }
  __device__ std::int32_t* loc() const { return p.loc_base + g * p.loc_stride; }
  // Rank 0's scratch (alloc, cand, ncand of steps 1-3, read by every
  // rank's steps 4-5).
  __device__ std::int32_t* loc0() const { return p.loc_base + (0 - p.rank_base) * p.loc_stride; }
  __device__ std::int32_t* out() const { return p.out_base + g * p.out_stride; }
  // Output buffer of rank r (virtual ranks: all in one allocation).
  __device__ std::int32_t* out_of(int r) const { return p.out_base + (r - p.rank_base) * p.out_stride; }
  // The one copy of the planning tables every rank reads (rank 0's chunk).
  __device__ std::int32_t* tab() const { return chunk(0); }
  // Gathered tokens_per_expert [R][E] of this step (parity of the epoch).
  __device__ std::int32_t* tpe_all(unsigned step) const {
    return chunk(0) + p.sym.tpe_all + static_cast<i64>(step & 1u) * p.sym.tpe_half;
  }
  __device__ unsigned* ctr(int r, int which) const {
    return reinterpret_cast<unsigned*>(chunk(r) + p.sym.ctrl + which * kCtrlStride);
  }
};

__device__ __forceinline__ void record(unsigned long long* word, int rank, i64 index) {
  atomicMin(word, (static_cast<unsigned long long>(rank) << 32) |
                      static_cast<unsigned long long>(static_cast<unsigned>(index)));
}
__device__ __forceinline__ void internal_error(const KernelParams& p) {
  atomicOr(&p.status->internal, 1u);
}
// A block gave up waiting on counter `which` (wait_counter returned false
// to all its threads): thread 0 records it; the block then ends.
__device__ __forceinline__ void record_late(const KernelParams& p, Ctrl which) {
  if (threadIdx.x == 0) atomicOr(&p.status->late, 1u << which);
}

__device__ __forceinline__ void trace_point(const KernelParams& p, int k) {
  if (p.trace && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    p.trace[static_cast<i64>(blockIdx.x) * kTracePoints + k] = t;
  }
}
// The SM a block runs on (slot kTracePoints - 3), to see co-residency.
__device__ __forceinline__ void trace_sm(const KernelParams& p) {
  if (p.trace && threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    p.trace[static_cast<i64>(blockIdx.x) * kTracePoints + kTracePoints - 3] = id;
  }
}
// SM clock stamps (kTracePoints-2: start, kTracePoints-1: end) so the
// benchmark can report the clock the step ran at.
__device__ __forceinline__ void trace_clock(const KernelParams& p, int k) {
  if (p.trace && threadIdx.x == 0) {
    p.trace[static_cast<i64>(blockIdx.x) * kTracePoints + k] = clock64();
  }
}

// Entry of both kernels: the debug stamps, the issue of this rank's epoch
// load (the value is needed only after C1, so its latency overlaps it;
// share_epoch() hands it to the block later) and the block's view of the
// launch.
struct Entry {
  Block b;
  unsigned epoch_now;  // thread 0's load of the rank's epoch; 0 elsewhere
};
__device__ __forceinline__ Entry enter_kernel(const KernelParams& p) {
  trace_clock(p, kTracePoints - 2);
  trace_sm(p);
  const int g = blockIdx.x / p.bpr;
  const unsigned epoch_now =
      threadIdx.x == 0 ? *reinterpret_cast<volatile unsigned*>(p.loc_base + g * p.loc_stride + p.loc.epoch) : 0u;
  return Entry{Block{p, g, static_cast<int>(blockIdx.x % p.bpr), p.rank_base + g, static_cast<int>(threadIdx.x),
                     static_cast<int>(threadIdx.x & 31), static_cast<int>(threadIdx.x >> 5), 0u},
               epoch_now};
}

// The launch's dynamic shared memory as int32 words (16-byte aligned).
__device__ __forceinline__ int* dynamic_smem() {
  extern __shared__ int4 smem4[];
  return reinterpret_cast<int*>(smem4);
}

// Thread 0's epoch (enter_kernel) to every thread of the block; a block
// barrier.
__device__ __forceinline__ unsigned share_epoch(unsigned epoch_now) {
  __shared__ unsigned s_epoch;
  if (threadIdx.x == 0) s_epoch = epoch_now;
  __syncthreads();
  return s_epoch;
}

// Block 0 of a rank zeroes its dup_counts, this step's reservation
// counters. Other ranks reserve on them only after the barrier that
// follows this block's arrival (a release).
__device__ __forceinline__ void zero_dup_counts(const Block& b) {
  if (b.lb == 0 && b.tid == 0) {
    b.out()[b.p.out.dup_counts] = 0;
    b.out()[b.p.out.dup_counts + 1] = 0;
  }
}

// round_up(count, tp) for 0 <= count < 2^31. The quotient is a multiply by
// the host's tp_magic = floor((2^64 - 1) / tp) + 1 (0 for tp = 1), exact
// for every 32-bit dividend and tp < 2^31 (the error term stays below
// 2^-32 < 1/tp): a few instructions where a division by a runtime value
// is about twenty, and the kernels inline it in many places of code that
// runs once per launch, where its size is fetch time.
__device__ __forceinline__ int pad_to(const KernelParams& p, int count) {
  if (count <= 0) return 0;
  const unsigned n = static_cast<unsigned>(count) + static_cast<unsigned>(p.tp - 1);
  const unsigned q = p.tp_magic ? static_cast<unsigned>(__umul64hi(n, p.tp_magic)) : n;
  return static_cast<int>(q) * p.tp;
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

// ---- warp / block reductions ----------------------------------------------
// Largest value, ties to the lowest index (idx INT_MAX = none): two
// single-instruction warp reductions (sm_80+) instead of a shuffle ladder,
// since steps 2-3 run these in a serial loop on the critical path.
__device__ __forceinline__ void warp_argmax_low(int& v, int& i) {
  const int m = __reduce_max_sync(0xffffffffu, v);
  i = static_cast<int>(__reduce_min_sync(0xffffffffu, v == m ? static_cast<unsigned>(i) : 0xffffffffu));
  v = m;
}
// Smallest value, ties to the lowest index.
__device__ __forceinline__ void warp_argmin_low(int& v, int& i) {
  const int m = __reduce_min_sync(0xffffffffu, v);
  i = static_cast<int>(__reduce_min_sync(0xffffffffu, v == m ? static_cast<unsigned>(i) : 0xffffffffu));
  v = m;
}
__device__ __forceinline__ int warp_sum(int v) { return __reduce_add_sync(0xffffffffu, v); }

// Exclusive prefix over the block's threads (all threads must call).
__device__ int block_exclusive_scan(int v, int* s_scan) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  if (lane == 31) s_scan[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = lane < kWarps ? s_scan[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    if (lane < kWarps) s_scan[lane] = w;  // inclusive warp totals
  }
  __syncthreads();
  const int before = warp > 0 ? s_scan[warp - 1] : 0;
  __syncthreads();  // s_scan may be reused by the caller right away
  return before + incl - v;
}


// ---- Step 1 helpers (both kernels) ------------------------------------------
// Expert e's counts of ranks r0..r0+7 (0 past R) in the gathered
// tokens_per_expert table [R][E]: the loads first, so they are in flight
// together.
__device__ __forceinline__ void rank_counts8(const std::int32_t* tall, int E, int R, int e, int r0, int (&v)[8]) {
#pragma unroll
  for (int u = 0; u < 8; ++u) v[u] = r0 + u < R ? tall[static_cast<i64>(r0 + u) * E + e] : 0;
}
// load[e / epn] += total, e's total over the ranks.
__device__ __forceinline__ void add_to_load(int* s_load, int epn, int e, int total) {
  if (epn % 32 == 0) {
    // A warp's 32 experts belong to one rank: one shared atomic per warp.
    const int w = warp_sum(total);
    if ((threadIdx.x & 31) == 0) atomicAdd(&s_load[e / epn], w);
  } else {
    atomicAdd(&s_load[e / epn], total);
  }
}

// ---- Step 2: rank-level moves (warp 0 of the block) -----------------------
// In: s_load [R]. Out: s_from[r] (donor of receiver r, -1: none) and
// s_quota[r] (what r receives), both preset by the caller to -1 / 0.
// s_bal [R] is scratch for R > 32. At most R iterations: each one fills a
// receiver for good.
__device__ void plan_rank_moves(const Block& b, const int* s_load, int* s_bal, int* s_from, int* s_quota) {
  const KernelParams& p = b.p;
  const int R = p.R;
  if (b.warp != 0) return;
  if (R <= 32) {
    // Lane r holds rank r's balance in a register: no shared round trips
    // (the loop is on the critical path). When every balance + N fits 25
    // bits (R*N < 2^25; balances lie in [-N, (R-1)*N]), each argmax /
    // argmin is ONE warp reduction over (balance + N) << 7 with the index in
    // the low bits (127 - r for the max, r for the min: ties to the lowest
    // rank either way); otherwise two reductions each.
    const bool packed = static_cast<i64>(R) * p.N < (1LL << 25);
    const int r = b.lane;
    int bal = r < R ? s_load[r] - p.N : 0, from = -1, quota = 0;
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
  for (int r = b.lane; r < R; r += 32) s_bal[r] = s_load[r] - p.N;
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

// ---- Step 3: expert split, one warp per owner h ---------------------------
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
// window 3's critical path); each
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
      // path of window 3, and four slots per lane quadruple its selects.
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

// ---- C1 slices: which entries a block and each of its warps own -------------
// The first bpr - nworkers blocks of a rank own none (they plan instead).
struct Slice {
  bool worker;
  int w;          // worker index
  i64 tok0, tok1; // tokens of this block
  i64 ws0, ws1;   // entries of this warp
};

// First entry of warp w's share of the block's slice (w = kWarps: the end).
__device__ __forceinline__ i64 warp_entries_begin(const Slice& s, int K, int w) {
  const i64 e0 = s.tok0 * K, n = (s.tok1 - s.tok0) * K;
  return e0 + n * w / kWarps;
}

__device__ Slice slice_of(const Block& b) {
  const KernelParams& p = b.p;
  const int lead = p.bpr - p.nworkers;
  Slice s;
  s.worker = b.lb >= lead;
  s.w = b.lb - lead;
  if (!s.worker) {
    s.tok0 = s.tok1 = s.ws0 = s.ws1 = 0;
    return s;
  }
  // In 32 bits where (w + 1) * S fits, as it does at any real size: a
  // 64-bit division is a long subroutine, and this is on every worker's
  // way to its first routing loads (the phase trace shows workers
  // reaching them after the planning blocks, which skip this).
  const unsigned long long end = static_cast<unsigned long long>(s.w + 1) * static_cast<unsigned>(p.S);
  if (end <= 0xffffffffull) {
    const unsigned nw = static_cast<unsigned>(p.nworkers);
    s.tok0 = static_cast<unsigned>(s.w) * static_cast<unsigned>(p.S) / nw;
    s.tok1 = static_cast<unsigned>(end) / nw;
  } else {
    s.tok0 = static_cast<i64>(s.w) * p.S / p.nworkers;
    s.tok1 = static_cast<i64>(s.w + 1) * p.S / p.nworkers;
  }
  s.ws0 = warp_entries_begin(s, p.K, b.warp);
  s.ws1 = warp_entries_begin(s, p.K, b.warp + 1);
  return s;
}

// ---- Steps 7-8 on a tile of nt tokens ---------------------------------------
// A token's K (<= kRegK) destinations / dst values in registers: two 16-byte
// shared loads when K == 8 instead of dependent scalar loads at stride K
// words (8-way bank conflicts at K = 8). Slots k >= K read as -1. Rows must
// be 16-byte aligned.
constexpr int kRegK = 8;
__device__ __forceinline__ void load_token(const int* row, int K, int (&v)[kRegK]) {
  if (K == kRegK) {
    const int4 a = reinterpret_cast<const int4*>(row)[0], c = reinterpret_cast<const int4*>(row)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = c.x; v[5] = c.y; v[6] = c.z; v[7] = c.w;
  } else {
#pragma unroll
    for (int k = 0; k < kRegK; ++k) v[k] = k < K ? row[k] : -1;
  }
}

// load_token's counterpart: the token's K values to a row (global or
// shared), two 16-byte stores when K == kRegK.
__device__ __forceinline__ void store_token(std::int32_t* row, int K, const int (&v)[kRegK]) {
  if (K == kRegK) {
    reinterpret_cast<int4*>(row)[0] = make_int4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<int4*>(row)[1] = make_int4(v[4], v[5], v[6], v[7]);
  } else {
#pragma unroll
    for (int k = 0; k < kRegK; ++k) {
      if (k < K) row[k] = v[k];
    }
  }
}

// Steps 7-8 count each destination's dup groups and dup loffs in ONE
// shared word, s_cnt[d] = loffs << 16 | groups: one atomic per primary
// instead of one per count. A call covers fewer than 2^16 entries (the
// rank-0 kernel's tiles hold kTileEntries, a replicated block's entries
// fit its shared memory), so both counts fit 16 bits; step 7 flags an
// internal error otherwise.
constexpr int kDupCountEntries = 1 << 16;
static_assert(kTileEntries < kDupCountEntries, "a tile's dup counts must fit 16 bits");
__device__ __forceinline__ unsigned dup_count_word(int groups, int loffs) {
  return static_cast<unsigned>(groups) | static_cast<unsigned>(loffs) << 16;
}
__device__ __forceinline__ unsigned add_dup_counts(int* s_cnt, int d, int groups, int loffs) {
  return atomicAdd(reinterpret_cast<unsigned*>(s_cnt) + d, dup_count_word(groups, loffs));
}

// Step 7 per token: s_d[t*K + k] is entry k's destination rank (-1: none),
// s_x the value to flip. Later entries bound for a rank already used are
// duplicates, their value flipped to -x-1; s_cnt [R] counts dup groups and
// dup loffs per destination (add_dup_counts); s_mask[t] bit k: entry k is
// a primary with duplicates. kDstOut = false flips s_x in place; kDstOut = true leaves
// s_x as it is and stores the token's flipped values to out_x (the rank's
// dst at the tile's first entry; 16-byte aligned rows at K == kRegK): a
// token's values go out from its registers instead of a shared round trip
// per duplicate and a separate pass over the tile.
// With s_later (fast path only), each primary's duplicates as a bitmask
// at the primary's entry, for step8_rows.
// With s_list (fast path only; s_later too), every primary with duplicates
// also goes to a list, tok * K | kp << 16 (fewer than 2^16 entries, as
// checked on entry), counted in *s_nprim (zero on entry), so that step8_list can
// give each thread one primary instead of each thread one token's.
template <bool kDstOut>
__device__ void step7_dedup(const Block& b, int nt, const int* s_d, int* s_x, unsigned* s_mask, int* s_cnt,
                            std::int32_t* out_x = nullptr, unsigned* s_later = nullptr, int* s_list = nullptr,
                            int* s_nprim = nullptr) {
  const int K = b.p.K;
  if (nt * K >= kDupCountEntries) {
    if (b.tid == 0) internal_error(b.p);
    return;
  }
  if (K <= kRegK && b.p.R <= 32) {
    // Registers and bitmasks over destinations (R <= 32); every loop over
    // a token's entries is either a short unrolled scan of compares or a
    // rolled loop over set bits, so the code stays small: steps 7-8 run
    // once per launch, and a large unrolled body stalls on instruction
    // fetch (seen with ncu). Whole warps go
    // round (the list's warp scan); lanes past nt hold no token.
    MOONEP_ROLLED
    for (int tok0 = b.warp * 32; tok0 < nt; tok0 += kThreads) {
      const int tok = tok0 + b.lane, base = tok * K;
      const bool own = tok < nt;
      int dd[kRegK];
      if (own) {
        load_token(s_d + base, K, dd);
      } else {
#pragma unroll
        for (int k = 0; k < kRegK; ++k) dd[k] = -1;
      }
      unsigned seen = 0, dupdest = 0, dups = 0;  // destinations seen / with duplicates; duplicate entries
#pragma unroll
      for (int k = 0; k < kRegK; ++k) {
        const unsigned bit = dd[k] >= 0 ? 1u << dd[k] : 0u;
        if (seen & bit) {
          dups |= 1u << k;
          dupdest |= bit;
        }
        seen |= bit;
      }
      unsigned mask = 0;  // primaries with duplicates: first entries of a destination in dupdest
#pragma unroll
      for (int k = 0; k < kRegK; ++k) {
        const unsigned bit = dd[k] >= 0 ? 1u << dd[k] : 0u;
        if (!((dups >> k) & 1u) && (dupdest & bit)) mask |= 1u << k;
      }
      if constexpr (kDstOut) {
        if (own) {
          int x[kRegK];
          load_token(s_x + base, K, x);
#pragma unroll
          for (int k = 0; k < kRegK; ++k) x[k] = ((dups >> k) & 1u) ? -x[k] - 1 : x[k];
          store_token(out_x + base, K, x);
        }
      } else {
        MOONEP_ROLLED
        for (unsigned m = dups; m; m &= m - 1u) {
          const int k = __ffs(m) - 1;
          s_x[base + k] = -s_x[base + k] - 1;
        }
      }
      int at = 0;  // this token's first place in the list
      if (s_list) {
        // The warp's exclusive scan of the lanes' primary counts by one
        // ballot per bit of the count (at most kRegK / 2 = 4: three bits),
        // independent of each other, instead of a chain of five shuffles.
        static_assert(kRegK / 2 < 8, "a token's primaries with duplicates fit three bits");
        const int n = __popc(mask);
        const unsigned lt = (1u << b.lane) - 1u;
        const unsigned b0 = __ballot_sync(0xffffffffu, n & 1), b1 = __ballot_sync(0xffffffffu, n & 2),
                       b2 = __ballot_sync(0xffffffffu, n & 4);
        const int before = __popc(b0 & lt) + 2 * __popc(b1 & lt) + 4 * __popc(b2 & lt);
        const int total = __popc(b0) + 2 * __popc(b1) + 4 * __popc(b2);
        int wbase = 0;
        if (b.lane == 0 && total > 0) wbase = atomicAdd(s_nprim, total);
        at = __shfl_sync(0xffffffffu, wbase, 0) + before;
      }
      MOONEP_ROLLED
      for (unsigned m = mask; m; m &= m - 1u) {
        const int kp = __ffs(m) - 1, d = s_d[base + kp];
        unsigned later = 0;  // the primary's duplicates
#pragma unroll
        for (int k = 0; k < kRegK; ++k) later |= (((dups >> k) & 1u) && dd[k] == d) ? 1u << k : 0u;
        if (s_later) s_later[base + kp] = later;
        if (s_list) s_list[at++] = base | kp << 16;
        add_dup_counts(s_cnt, d, 1, __popc(later));
      }
      if (own) s_mask[tok] = mask;
    }
    return;
  }
  for (int tok = b.tid; tok < nt; tok += kThreads) {
    const int base = tok * K;
    unsigned mask = 0;
    if (kDstOut && K > 0) out_x[base] = s_x[base];
    for (int k = 1; k < K; ++k) {
      const int d = s_d[base + k];
      int prim = -1;
      for (int k2 = 0; d >= 0 && k2 < k; ++k2) {
        if (s_d[base + k2] == d) { prim = k2; break; }
      }
      if (kDstOut) out_x[base + k] = prim < 0 ? s_x[base + k] : -s_x[base + k] - 1;
      if (prim < 0) continue;
      if (!kDstOut) s_x[base + k] = -s_x[base + k] - 1;
      add_dup_counts(s_cnt, d, (mask >> prim) & 1u ? 0 : 1, 1);
      mask |= 1u << prim;
    }
    s_mask[tok] = mask;
  }
}

// One reservation per destination for the whole tile (thread d for
// destination d) on the destination's dup_counts, which are the
// reservation counters. Returns (rows, loffs) bases in registers (the
// atomics' results are needed only by step 8) and re-zeroes s_cnt.
struct Reservation { int rows = 0, loffs = 0; };
__device__ __forceinline__ Reservation reserve_dup_rows(const Block& b, int* s_cnt) {
  static_assert(kMaxGroups <= kThreads, "one destination per thread");
  Reservation res;
  if (b.tid < b.p.R) {
    const unsigned c = static_cast<unsigned>(s_cnt[b.tid]);
    const int ng = static_cast<int>(c & 0xffffu), nl = static_cast<int>(c >> 16);
    if (ng > 0) {
      // (rows, loffs) as one 64-bit word (rows low; offsets are multiples
      // of 4 words, so it is aligned): one atomic, one round trip.
      auto* cnt = reinterpret_cast<unsigned long long*>(b.out_of(b.tid) + b.p.out.dup_counts);
      const unsigned long long old =
          atomicAdd(cnt, (static_cast<unsigned long long>(nl) << 32) | static_cast<unsigned>(ng));
      res.rows = static_cast<int>(old & 0xffffffffull);
      res.loffs = static_cast<int>(old >> 32);
    }
    s_cnt[b.tid] = 0;
  }
  return res;
}

// Step 8's row `row` of destination d: (primary_loff, dup_start, dup_n);
// returns where the group's n duplicate loffs go (null, and an internal
// error, when the reservation overran d's arrays).
__device__ __forceinline__ std::int32_t* emit_dup_row(const Block& b, int d, int primary, int n, int row, int start) {
  const KernelParams& p = b.p;
  const int NvS = p.NvS;
  if (row >= NvS || start + n > NvS) {
    internal_error(p);
    return nullptr;
  }
  std::int32_t* dc = b.out_of(d);
  dc[p.out.dup_groups + 3 * static_cast<i64>(row)] = primary - d * NvS;
  dc[p.out.dup_groups + 3 * static_cast<i64>(row) + 1] = start;
  dc[p.out.dup_groups + 3 * static_cast<i64>(row) + 2] = n;
  return dc + p.out.dup_loffs + start;
}

// Step 8 for one primary (entry kp of the token at base, bound for d;
// later: its duplicates' k bits): its row and its duplicates' dst values
// (global loffs; kFlipped: s_dst holds them flipped to -dst-1), numbered
// within the block's reservation on d by s_cnt (one atomic for both).
template <bool kFlipped>
__device__ __forceinline__ void emit_primary(const Block& b, int d, int base, int kp, unsigned later,
                                             const int* s_dst, const int* s_gb, const int* s_lb, int* s_cnt) {
  const int n = __popc(later);
  const unsigned c = add_dup_counts(s_cnt, d, 1, n);
  const int row = s_gb[d] + static_cast<int>(c & 0xffffu);
  const int start = s_lb[d] + static_cast<int>(c >> 16);
  std::int32_t* out = emit_dup_row(b, d, s_dst[base + kp], n, row, start);
  if (!out) return;
  MOONEP_ROLLED
  for (int j = 0; later; later &= later - 1u, ++j) {
    const int x = s_dst[base + __ffs(later) - 1];
    out[j] = (kFlipped ? -x - 1 : x) - d * b.p.NvS;
  }
}

// Step 8 from step7_dedup's list of primaries: one primary per thread
// (a warp no longer runs as many rounds as its busiest token has
// primaries). s_dst holds unflipped dst values (step7_dedup<true>);
// s_gb/s_lb the reservation bases; s_cnt zero on entry.
__device__ void step8_list(const Block& b, int nprim, const int* s_list, const int* s_d, const int* s_dst,
                           const unsigned* s_later, const int* s_gb, const int* s_lb, int* s_cnt) {
  MOONEP_ROLLED
  for (int i = b.tid; i < nprim; i += kThreads) {
    const int v = s_list[i], base = v & 0xffff, kp = v >> 16;
    emit_primary<false>(b, s_d[base + kp], base, kp, s_later[base + kp], s_dst, s_gb, s_lb, s_cnt);
  }
}

// Step 8: rows (primary_loff, dup_start, dup_n) and the duplicates in
// increasing k, written into the destination's outputs (each primary's
// duplicates from s_later where step7_dedup stored them). s_dst holds the
// dst values, duplicates flipped to -dst-1 unless kDstOut (step7_dedup's
// parameter of the same name); s_gb/s_lb the reservation bases; s_cnt
// zero on entry.
template <bool kDstOut>
__device__ void step8_rows(const Block& b, int nt, const int* s_d, const int* s_dst, const unsigned* s_mask,
                           const int* s_gb, const int* s_lb, int* s_cnt, const unsigned* s_later = nullptr) {
  const KernelParams& p = b.p;
  const int K = p.K;
  if (K <= kRegK && p.R <= 32) {
    // One rolled body per primary (see step7_dedup): its duplicates are a
    // bitmask of later entries with the same destination.
    MOONEP_ROLLED
    for (int tok = b.tid; tok < nt; tok += kThreads) {
      unsigned mask = s_mask[tok];
      if (!mask) continue;
      const int base = tok * K;
      int dd[kRegK];
      if (!s_later) load_token(s_d + base, K, dd);
      MOONEP_ROLLED
      for (; mask; mask &= mask - 1u) {
        const int kp = __ffs(mask) - 1;
        const int d = s_d[base + kp];
        unsigned later = 0;
        if (s_later) {
          later = s_later[base + kp];
        } else {
#pragma unroll
          for (int k = 0; k < kRegK; ++k) later |= (k > kp && dd[k] == d) ? 1u << k : 0u;
        }
        emit_primary<!kDstOut>(b, d, base, kp, later, s_dst, s_gb, s_lb, s_cnt);
      }
    }
    return;
  }
  for (int tok = b.tid; tok < nt; tok += kThreads) {
    const int base = tok * K;
    unsigned mask = s_mask[tok];
    while (mask) {
      const int kp = __ffs(mask) - 1;
      mask &= mask - 1u;
      const int d = s_d[base + kp];
      unsigned later = 0;  // K <= 32, as s_mask's bits
      for (int k = kp + 1; k < K; ++k) later |= s_d[base + k] == d ? 1u << k : 0u;
      emit_primary<!kDstOut>(b, d, base, kp, later, s_dst, s_gb, s_lb, s_cnt);
    }
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
