// The planning kernel: PLANNING.md steps 1-8 for every rank of the launch
// in one cooperative launch. Block group g (bpr blocks) is rank
// rank_base + g. Per step, per rank:
//
//   Phase A   prefill own src_info with -1, reset own dup counters (rank 0:
//             zero the alloc table); C1 pass 1: per-warp histograms of the
//             rank's entries; grid barrier; per-block bases (prefix over the
//             blocks before) and, in the last worker block, tokens_per_expert
//             pushed into rank 0's chunk; arrive at rank 0's gather counter.
//   C1 pass 2 stable ranking of every entry among the rank's entries of its
//             expert (warp-aggregated with __match_any_sync).
//   Phase B   rank 0 only: block 0 waits for every rank's tpe, runs steps
//             1-3 (totals, rank moves, expert split); grid barrier; every
//             block of rank 0 runs steps 4-5 for its ranks and pushes the
//             tables (acum, expert offsets, cum, cu_seqlens, ...) to every
//             rank; arrive at every rank's tables counter.
//   C2        wait for the tables; per tile of tokens: destinations by binary
//             search over acum, src_info written into the destination's
//             chunk, dedup within each token, dup rows reserved with one
//             atomic per (tile, destination) and written into the
//             destination's chunk; arrive at every rank's done counter.
//   Phase D   wait until every rank is done; copy the own chunk's slices and
//             the dup structures to this rank's outputs.
//
// Rank 0's block 0 owns no entries (when bpr > 1) so that its planning runs
// while the other blocks rank their entries. A bad expert id is recorded in
// DeviceStatus and skipped everywhere; every block still passes every
// barrier, so a bad step never hangs, and the next step starts clean.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "plan_kernel.hpp"
#include "sync_primitives.cuh"

namespace moonep::cuda::impl {
namespace {

using i64 = long long;

struct Block {
  const KernelParams& p;
  int g, lb, rank, tid, lane, warp;
  unsigned epoch;

  __device__ std::int32_t* chunk(int r) const { return p.sym_base + r * p.sym_stride; }
  __device__ std::int32_t* me() const { return chunk(rank); }
  __device__ std::int32_t* loc() const { return p.loc_base + g * p.loc_stride; }
  __device__ std::int32_t* out() const { return p.out_base + g * p.out_stride; }
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

// ---- pushes into the broadcast region of other ranks' chunks --------------
// dest >= 0: that rank only (unicast); dest < 0: every rank. With a
// multicast address every push is one multimem store that reaches all.
__device__ __forceinline__ void mc_store(std::int32_t* addr, int v) {
  asm volatile("multimem.st.relaxed.sys.global.f32 [%0], %1;" ::"l"(addr),
               "f"(__int_as_float(v))
               : "memory");
}
__device__ __forceinline__ void mc_store4(std::int32_t* addr, int4 v) {
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(addr),
               "f"(__int_as_float(v.x)), "f"(__int_as_float(v.y)), "f"(__int_as_float(v.z)),
               "f"(__int_as_float(v.w))
               : "memory");
}

__device__ __forceinline__ void push(const Block& b, int dest, i64 off, int v) {
  const KernelParams& p = b.p;
  if (p.mc_base) {
    mc_store(p.mc_base + off, v);
  } else if (dest >= 0) {
    b.chunk(dest)[off] = v;
  } else {
    for (int r = 0; r < p.R; ++r) b.chunk(r)[off] = v;
  }
}
__device__ __forceinline__ void push4(const Block& b, int dest, i64 off, int4 v) {
  const KernelParams& p = b.p;
  if (p.mc_base) {
    mc_store4(p.mc_base + off, v);
  } else if (dest >= 0) {
    *reinterpret_cast<int4*>(b.chunk(dest) + off) = v;
  } else {
    for (int r = 0; r < p.R; ++r) *reinterpret_cast<int4*>(b.chunk(r) + off) = v;
  }
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

__device__ __forceinline__ int pad_to(int count, int tp) {
  return count > 0 ? (count + tp - 1) / tp * tp : 0;
}

// ---- Phase B, steps 1-3 (block 0 of rank 0) -------------------------------
__device__ void plan_steps_1_to_3(const Block& b, int* sm) {
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

  // Step 1: cum (pushed row r to rank r+1, which needs it for its global
  // indices), total, load.
  const std::int32_t* tall = b.chunk(0) + p.sym.tpe_all;
  for (int e = b.tid; e < E; e += kThreads) {
    int run = 0;
    for (int r0 = 0; r0 < R; r0 += 8) {
      int v[8];  // loads first, so they are in flight together
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = r0 + u < R ? tall[static_cast<i64>(r0 + u) * E + e] : 0;
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int r = r0 + u;
        run += v[u];
        if (r + 1 < R) push(b, r + 1, p.sym.cum + static_cast<i64>(r) * E + e, run);
      }
    }
    s_rem[e] = run;
    atomicAdd(&s_load[e / epn], run);
  }
  __syncthreads();

  // Step 2: rank-level moves (one warp; at most R iterations since every
  // iteration fills one receiver for good).
  if (b.warp == 0) {
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
  __syncthreads();

  // Step 3: expert split, one warp per owner h. Every (receiver, expert)
  // pair is taken at most once (each take empties a quota or a remaining),
  // so the pairs are the receiver's remote experts (step 4's candidates).
  for (int h = b.warp; h < R; h += kWarps) {
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
        const int e = h * epn + mj;
        s_quota[qi] -= take;
        s_rem[e] -= take;
        alloc[static_cast<i64>(e) * R + qi] = take;
        const int c = s_ncand[qi]++;
        if (c < epn) {
          cand[(static_cast<i64>(qi) * epn + c) * 2] = e;
          cand[(static_cast<i64>(qi) * epn + c) * 2 + 1] = take;
        } else {
          internal_error(p);
        }
      }
      __syncwarp();
    }
    for (int j = b.lane; j < epn; j += 32) {
      const int e = h * epn + j;
      alloc[static_cast<i64>(e) * R + h] = s_rem[e];
    }
    // remote_stats[h][1]: copies made of h's experts = sum over h's
    // receivers of min(B, their remote experts).
    int copies = 0;
    for (int t = b.lane; t < R; t += 32) {
      if (s_from[t] == h) copies += min(p.B, s_ncand[t]);
    }
    copies = warp_sum(copies);
    if (b.lane == 0) push(b, h, p.sym.rs + 2 * h + 1, copies);
    __syncwarp();
  }
  __syncthreads();
  for (int t = b.tid; t < R; t += kThreads) ncand[t] = min(s_ncand[t], epn);
}

// ---- Phase B, steps 4-5 for rank d (one block of rank 0) ------------------
__device__ void plan_steps_4_5(const Block& b, int* sm, int d) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, B = p.B, epn = p.epn, tp = p.tp;
  const int Gp = (E + B + 3) & ~3;
  int* s_ce = sm;             // [epn] candidate experts
  int* s_cc = s_ce + epn;     // [epn] their remote counts
  int* s_mark = s_cc + epn;   // [E] 1 when picked into a copy slot
  int* s_eoff = s_mark + E;   // [E] group start of each expert on d
  int* s_etc = s_eoff + E;    // [B]
  int* s_scan = s_etc + B;    // [kWarps]
  int* s_alloc = s_scan + kWarps;  // [E] alloc[d][e]
  const std::int32_t* alloc = b.loc() + p.loc.alloc;
  const std::int32_t* cand = b.loc() + p.loc.cand;
  // All loads at once (no load depends on another): every candidate slot,
  // used or not, and d's column of alloc.
  const int nc = b.loc()[p.loc.ncand + d];
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
    sum += pad_to(ex >= 0 ? s_alloc[ex] : 0, tp);
  }
  int start = block_exclusive_scan(sum, s_scan);
  for (int gi = g0; gi < g1; ++gi) {
    const int ex = expert_of(gi);
    const int count = ex >= 0 ? s_alloc[ex] : 0;
    const int padded = pad_to(count, tp);
    if (ex >= 0) s_eoff[ex] = start;
    push(b, d, p.sym.cu + static_cast<i64>(d) * Gp + gi, start + padded);
    const bool fill = count > 0 && padded > count;
    push(b, d, p.sym.zfr + (static_cast<i64>(d) * Gp + gi) * 2, fill ? start + count : 0);
    push(b, d, p.sym.zfr + (static_cast<i64>(d) * Gp + gi) * 2 + 1, fill ? padded - count : 0);
    start += padded;
  }
  __syncthreads();

  // Every rank needs every rank's expert offsets (its entries may land
  // anywhere) and the whole experts_to_copy table.
  const i64 erow = p.sym.eoff + static_cast<i64>(d) * E;
  if ((E & 3) == 0) {
    for (int q = b.tid; q < E / 4; q += kThreads) {
      push4(b, -1, erow + 4 * q, make_int4(s_eoff[4 * q], s_eoff[4 * q + 1], s_eoff[4 * q + 2],
                                           s_eoff[4 * q + 3]));
    }
  } else {
    for (int e = b.tid; e < E; e += kThreads) push(b, -1, erow + e, s_eoff[e]);
  }
  for (int k = b.tid; k < B; k += kThreads) push(b, -1, p.sym.etc + static_cast<i64>(d) * B + k, s_etc[k]);
  if (b.tid == 0) push(b, d, p.sym.rs + 2 * d, nc);
  __syncthreads();
}

// acum[e][r] = prefix over ranks of alloc[r][e], for every rank.
__device__ void push_acum(const Block& b) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E;
  const std::int32_t* alloc = b.loc() + p.loc.alloc;
  // Counted from the last block, which has no step-5 rank when bpr > R.
  for (int e = (p.bpr - 1 - b.lb) * kThreads + b.tid; e < E; e += p.bpr * kThreads) {
    const std::int32_t* row = alloc + static_cast<i64>(e) * R;
    const i64 off = p.sym.acum + static_cast<i64>(e) * R;
    int run = 0;
    if ((R & 3) == 0) {
      for (int r = 0; r < R; r += 4) {
        int4 v;
        v.x = (run += row[r]);
        v.y = (run += row[r + 1]);
        v.z = (run += row[r + 2]);
        v.w = (run += row[r + 3]);
        push4(b, -1, off + r, v);
      }
    } else {
      for (int r = 0; r < R; ++r) push(b, -1, off + r, run += row[r]);
    }
  }
}

// ---- C1: per-warp histograms and stable ranking ----------------------------
struct Slice {
  bool worker;
  int w;          // worker index
  i64 tok0, tok1; // tokens of this block
  i64 ws0, ws1;   // entries of this warp
};

__device__ Slice slice_of(const Block& b) {
  const KernelParams& p = b.p;
  Slice s;
  s.worker = p.bpr == 1 || b.lb > 0;
  s.w = p.bpr == 1 ? 0 : b.lb - 1;
  if (!s.worker) {
    s.tok0 = s.tok1 = s.ws0 = s.ws1 = 0;
    return s;
  }
  s.tok0 = static_cast<i64>(s.w) * p.S / p.nworkers;
  s.tok1 = static_cast<i64>(s.w + 1) * p.S / p.nworkers;
  const i64 e0 = s.tok0 * p.K, n = (s.tok1 - s.tok0) * p.K;
  s.ws0 = e0 + n * b.warp / kWarps;
  s.ws1 = e0 + n * (b.warp + 1) / kWarps;
  return s;
}

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
__device__ void c2_destinations(const Block& b, const Slice& s, int* sm) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, K = p.K, NvS = p.NvS;
  // Staged tables first (16-byte aligned), then the tile.
  const int staged = p.stage_tables ? ((2 * E * R + E + 3) & ~3) : 0;
  int* s_dst = sm + staged;                           // [kTileEntries]
  int* s_d = s_dst + kTileEntries;                    // [kTileEntries]
  unsigned* s_mask = reinterpret_cast<unsigned*>(s_d + kTileEntries);  // [tile_tokens]
  int* s_ng = reinterpret_cast<int*>(s_mask + p.tile_tokens);           // [R]
  int* s_nl = s_ng + R;
  int* s_gb = s_nl + R;
  int* s_lb = s_gb + R;
  const std::int32_t* me = b.me();
  const std::int32_t* acum = me + p.sym.acum;
  const std::int32_t* eoff = me + p.sym.eoff;
  const std::int32_t* cum = b.rank > 0 ? me + p.sym.cum + static_cast<i64>(b.rank - 1) * E : nullptr;
  if (p.stage_tables && s.tok1 > s.tok0) {
    // The lookups below are random per entry: serve them from shared
    // memory (one coalesced copy) rather than from L2.
    int* s_acum = sm;
    int* s_eoff = s_acum + E * R;
    int* s_cum = s_eoff + E * R;
    const int n4 = (E * R) / 4;  // E*R is a multiple of 4 when staging
    for (int q = b.tid; q < n4; q += kThreads) {
      reinterpret_cast<int4*>(s_acum)[q] = reinterpret_cast<const int4*>(acum)[q];
      reinterpret_cast<int4*>(s_eoff)[q] = reinterpret_cast<const int4*>(eoff)[q];
    }
    for (int e = b.tid; e < E; e += kThreads) s_cum[e] = cum ? cum[e] : 0;
    acum = s_acum;
    eoff = s_eoff;
    cum = s_cum;
    __syncthreads();
  }
  const std::int32_t* topk = p.topk[b.g];
  const std::int32_t* pos = b.loc() + p.loc.pos;
  std::int32_t* out_dst = b.out() + p.out.dst;

  for (i64 t = s.tok0; t < s.tok1; t += p.tile_tokens) {
    const int nt = static_cast<int>(min(static_cast<i64>(p.tile_tokens), s.tok1 - t));
    const i64 i0 = t * K;
    const int ne = nt * K;
    for (int r = b.tid; r < R; r += kThreads) { s_ng[r] = 0; s_nl[r] = 0; }

    // Step 6 for every entry of the tile.
    for (int lbase = 0; lbase < ne; lbase += kThreads * kUnroll) {
    int ev[kUnroll], pv[kUnroll];  // loads first, so they are in flight together
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int li = lbase + u * kThreads + b.tid;
      ev[u] = li < ne ? topk[i0 + li] : -1;
      pv[u] = li < ne ? pos[i0 + li] : 0;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int li = lbase + u * kThreads + b.tid;
      if (li >= ne) break;
      const i64 i = i0 + li;
      const int e = ev[u];
      int v = -1, d = -1;
      if (static_cast<unsigned>(e) < static_cast<unsigned>(E)) {
        const int G = (cum ? cum[e] : 0) + pv[u];
        const std::int32_t* a = acum + static_cast<i64>(e) * R;
        int lo = 0, hi = R;  // first d with acum[e][d] > G
        while (lo < hi) {
          const int mid = (lo + hi) >> 1;
          if (a[mid] > G) hi = mid; else lo = mid + 1;
        }
        if (lo < R) {
          const int before = lo > 0 ? a[lo - 1] : 0;
          const int loff = eoff[static_cast<i64>(lo) * E + e] + G - before;
          if (loff >= 0 && loff < NvS) {
            d = lo;
            v = d * NvS + loff;
            b.chunk(d)[p.sym.src_info + loff] = static_cast<int>(b.rank * NvS + i);
          }
        }
        if (d < 0) internal_error(p);
      }
      s_dst[li] = v;
      s_d[li] = d;
    }
    }
    __syncthreads();

    // Step 7 per token: later entries bound for a rank already used are
    // stored as -dst-1; count the dup groups/loffs per destination.
    for (int tok = b.tid; tok < nt; tok += kThreads) {
      const int base = tok * K;
      unsigned mask = 0;  // bit k: entry k is a primary with duplicates
      for (int k = 1; k < K; ++k) {
        const int d = s_d[base + k];
        if (d < 0) continue;
        int prim = -1;
        for (int k2 = 0; k2 < k; ++k2) {
          if (s_d[base + k2] == d) { prim = k2; break; }
        }
        if (prim < 0) continue;
        s_dst[base + k] = -s_dst[base + k] - 1;
        atomicAdd(&s_nl[d], 1);
        if (!((mask >> prim) & 1u)) {
          mask |= 1u << prim;
          atomicAdd(&s_ng[d], 1);
        }
      }
      s_mask[tok] = mask;
    }
    __syncthreads();

    // One reservation per destination for the whole tile.
    for (int d = b.tid; d < R; d += kThreads) {
      if (s_ng[d] > 0) {
        unsigned* cg = b.ctr(d, kDupGroups);
        unsigned* cl = b.ctr(d, kDupLoffs);
        const unsigned ng = static_cast<unsigned>(s_ng[d]), nl = static_cast<unsigned>(s_nl[d]);
        s_gb[d] = static_cast<int>(p.sys_scope ? atomicAdd_system(cg, ng) : atomicAdd(cg, ng));
        s_lb[d] = static_cast<int>(p.sys_scope ? atomicAdd_system(cl, nl) : atomicAdd(cl, nl));
      }
      s_ng[d] = 0;
      s_nl[d] = 0;
    }
    __syncthreads();

    // Step 8: rows (primary_loff, dup_start, dup_n) and the duplicates in
    // increasing k, written into the destination's chunk.
    for (int tok = b.tid; tok < nt; tok += kThreads) {
      const int base = tok * K;
      unsigned mask = s_mask[tok];
      while (mask) {
        const int kp = __ffs(mask) - 1;
        mask &= mask - 1u;
        const int d = s_d[base + kp];
        int n = 0;
        for (int k = kp + 1; k < K; ++k) n += s_d[base + k] == d ? 1 : 0;
        const int row = s_gb[d] + atomicAdd(&s_ng[d], 1);
        const int start = s_lb[d] + atomicAdd(&s_nl[d], n);
        if (row >= NvS || start + n > NvS) {
          internal_error(p);
          continue;
        }
        std::int32_t* dc = b.chunk(d);
        dc[p.sym.dup_groups + 3 * static_cast<i64>(row)] = s_dst[base + kp] - d * NvS;
        dc[p.sym.dup_groups + 3 * static_cast<i64>(row) + 1] = start;
        dc[p.sym.dup_groups + 3 * static_cast<i64>(row) + 2] = n;
        int j = start;
        for (int k = kp + 1; k < K; ++k) {
          if (s_d[base + k] == d) dc[p.sym.dup_loffs + j++] = (-s_dst[base + k] - 1) - d * NvS;
        }
      }
    }
    for (int li = b.tid; li < ne; li += kThreads) out_dst[i0 + li] = s_dst[li];
    __syncthreads();
  }
}

// ---- Phase D ---------------------------------------------------------------
__device__ void copy_words(const std::int32_t* src, std::int32_t* dst, i64 n, i64 t0, i64 nthr) {
  for (i64 i = t0; i < n; i += nthr) dst[i] = src[i];
}
// n a multiple of 4, both pointers 16-byte aligned.
__device__ void copy_words4(const std::int32_t* src, std::int32_t* dst, i64 n, i64 t0, i64 nthr) {
  const int4* s4 = reinterpret_cast<const int4*>(src);
  int4* d4 = reinterpret_cast<int4*>(dst);
  for (i64 i = t0; i < n / 4; i += nthr) d4[i] = s4[i];
}

__device__ void write_outputs(const Block& b) {
  const KernelParams& p = b.p;
  const int R = p.R, E = p.E, B = p.B, NvS = p.NvS;
  const i64 Gp = (E + B + 3) & ~3;
  const i64 t0 = static_cast<i64>(b.lb) * kThreads + b.tid, nthr = static_cast<i64>(p.bpr) * kThreads;
  const std::int32_t* me = b.me();
  std::int32_t* out = b.out();
  const i64 nvs4 = (NvS + 3) & ~3;
  copy_words4(me + p.sym.src_info, out + p.out.src_info, nvs4, t0, nthr);
  copy_words4(me + p.sym.cu + b.rank * Gp, out + p.out.cu, Gp, t0, nthr);
  copy_words4(me + p.sym.zfr + b.rank * 2 * Gp, out + p.out.zfr, 2 * Gp, t0, nthr);
  copy_words(me + p.sym.etc, out + p.out.etc, static_cast<i64>(R) * B, t0, nthr);
  const int ng = static_cast<int>(*reinterpret_cast<volatile unsigned*>(b.ctr(b.rank, kDupGroups)));
  const int nl = static_cast<int>(*reinterpret_cast<volatile unsigned*>(b.ctr(b.rank, kDupLoffs)));
  const bool ok = ng >= 0 && nl >= 0 && ng <= NvS && nl <= NvS;
  if (ok) {
    copy_words(me + p.sym.dup_groups, out + p.out.dup_groups, 3 * static_cast<i64>(ng), t0, nthr);
    copy_words(me + p.sym.dup_loffs, out + p.out.dup_loffs, nl, t0, nthr);
  }
  if (t0 == 0) {
    if (!ok) internal_error(p);
    out[p.out.dup_counts] = ok ? ng : 0;
    out[p.out.dup_counts + 1] = ok ? nl : 0;
    out[p.out.rs] = me[p.sym.rs + 2 * b.rank];
    out[p.out.rs + 1] = me[p.sym.rs + 2 * b.rank + 1];
  }
}

}  // namespace

__device__ __forceinline__ void trace_point(const KernelParams& p, int k) {
  if (p.trace && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    p.trace[static_cast<i64>(blockIdx.x) * kTracePoints + k] = t;
  }
}

__global__ void __launch_bounds__(kThreads, 3) plan_kernel(const __grid_constant__ KernelParams p) {
  extern __shared__ int4 smem4[];
  int* sm = reinterpret_cast<int*>(smem4);
  __shared__ unsigned s_epoch;
  // Issued now, needed first at the grid barrier: the load overlaps Phase A
  // and C1 pass 1.
  const unsigned epoch_now = threadIdx.x == 0 ? *reinterpret_cast<volatile unsigned*>(
                                                    p.loc_base + (blockIdx.x / p.bpr) * p.loc_stride + p.loc.epoch)
                                              : 0u;

  const int g = blockIdx.x / p.bpr;
  Block b{p, g, static_cast<int>(blockIdx.x % p.bpr), p.rank_base + g, static_cast<int>(threadIdx.x),
          static_cast<int>(threadIdx.x & 31), static_cast<int>(threadIdx.x >> 5), 0u};
  const unsigned all_blocks = static_cast<unsigned>(p.R) * static_cast<unsigned>(p.bpr);
  unsigned* gbar = reinterpret_cast<unsigned*>(b.loc() + p.loc.gbar);
  const i64 t0 = static_cast<i64>(b.lb) * kThreads + b.tid, nthr = static_cast<i64>(p.bpr) * kThreads;
  const bool sys = p.sys_scope != 0;
  trace_point(p, 0);

  // ---- Phase A: housekeeping for this step --------------------------------
  {
    const i64 nvs4 = (p.NvS + 3) & ~3;
    int4* si = reinterpret_cast<int4*>(b.me() + p.sym.src_info);
    for (i64 q = t0; q < nvs4 / 4; q += nthr) si[q] = make_int4(-1, -1, -1, -1);
    if (b.lb == 0 && b.tid == 0) {
      *b.ctr(b.rank, kDupGroups) = 0u;
      *b.ctr(b.rank, kDupLoffs) = 0u;
    }
    if (b.rank == 0) {
      const i64 n4 = (static_cast<i64>(p.E) * p.R + 3) / 4;
      int4* a = reinterpret_cast<int4*>(b.loc() + p.loc.alloc);
      for (i64 q = t0; q < n4; q += nthr) a[q] = make_int4(0, 0, 0, 0);
    }
  }

  // ---- C1 pass 1: histograms ----------------------------------------------
  const Slice s = slice_of(b);
  int* s_hist = sm;  // [kWarps][E]
  for (int i = b.tid; i < kWarps * p.E; i += kThreads) s_hist[i] = 0;
  __syncthreads();
  c1_pass<false>(b, s, s_hist + b.warp * p.E);
  if (b.tid == 0) s_epoch = epoch_now;
  __syncthreads();
  b.epoch = s_epoch;
  const unsigned next = b.epoch + 1u;
  trace_point(p, 1);
  // hist[e][w] (row padded to nwp, a multiple of 4): block totals, read
  // back one 16-byte vector at a time so each thread's bases cost about
  // one L2 round trip.
  std::int32_t* hist = b.loc() + p.loc.hist;
  const int nwp = (p.nworkers + 3) & ~3;
  if (s.worker) {
    for (int e = b.tid; e < p.E; e += kThreads) {
      int run = 0;
      for (int w = 0; w < kWarps; ++w) {
        const int c = s_hist[w * p.E + e];
        s_hist[w * p.E + e] = run;
        run += c;
      }
      hist[static_cast<i64>(e) * nwp + s.w] = run;
    }
  }
  grid_sync(gbar, p.bpr, b.lb == 0);
  trace_point(p, 2);

  // Bases of this block (entries of earlier blocks); the last worker block
  // also has the rank's tokens_per_expert and sends it to rank 0.
  if (s.worker) {
    const bool last = s.w == p.nworkers - 1;
    const std::int32_t* given = p.tpe[b.g];
    for (int e = b.tid; e < p.E; e += kThreads) {
      const int4* row = reinterpret_cast<const int4*>(hist + static_cast<i64>(e) * nwp);
      int base = 0, total = 0;
#pragma unroll 8
      for (int q = 0; q < nwp / 4; ++q) {
        const int4 v = row[q];
        const int c[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int w = 4 * q + j;
          if (w < s.w) base += c[j];
          if (w < p.nworkers) total += c[j];
        }
      }
      for (int w = 0; w < kWarps; ++w) s_hist[w * p.E + e] += base;
      if (last) {
        b.chunk(0)[p.sym.tpe_all + static_cast<i64>(b.rank) * p.E + e] = total;
        if (given && given[e] != total) record(&p.status->bad_tpe, b.rank, e);
      }
    }
  }
  arrive_one(sys, b.ctr(0, kGather));
  trace_point(p, 3);

  // ---- C1 pass 2: stable ranking ------------------------------------------
  __syncthreads();
  c1_pass<true>(b, s, s_hist + b.warp * p.E);
  __syncthreads();
  trace_point(p, 4);

  // ---- Phase B: rank 0 plans and broadcasts -------------------------------
  if (b.rank == 0) {
    unsigned* bflag = reinterpret_cast<unsigned*>(b.loc() + p.loc.bflag);
    if (b.lb == 0) {
      wait_counter(sys, b.ctr(0, kGather), all_blocks * next);
      trace_point(p, 5);
      plan_steps_1_to_3(b, sm);
      __syncthreads();
      if (b.tid == 0) {
        __threadfence();
        st_release_gpu(bflag, next);  // steps 1-3 done (alloc, cand, ncand)
      }
      trace_point(p, 6);
    } else {
      wait_counter(false, bflag, next);
      trace_point(p, 7);
    }
    for (int d = b.lb; d < p.R; d += p.bpr) plan_steps_4_5(b, sm, d);
    push_acum(b);
    arrive_all(sys, p.R, [&](int r) { return b.ctr(r, kTables); });
    trace_point(p, 8);
  }
  wait_counter(sys, b.ctr(b.rank, kTables), static_cast<unsigned>(p.bpr) * next);
  trace_point(p, 9);

  // ---- C2 -----------------------------------------------------------------
  c2_destinations(b, s, sm);
  trace_point(p, 10);
  arrive_all(sys, p.R, [&](int r) { return b.ctr(r, kDone); });
  wait_counter(sys, b.ctr(b.rank, kDone), all_blocks * next);
  trace_point(p, 11);

  // ---- Phase D ------------------------------------------------------------
  write_outputs(b);
  trace_point(p, 12);
  if (b.lb == 0 && b.tid == 0) {
    *reinterpret_cast<volatile unsigned*>(b.loc() + p.loc.epoch) = next;
  }
}

__global__ void empty_kernel() {}

std::int64_t shared_bytes(int R, int E, int B, int tile_tokens, bool stage_tables) {
  const std::int64_t epn = E / R;
  std::int64_t words = static_cast<std::int64_t>(kWarps) * E;                  // C1
  words = std::max<std::int64_t>(words, E + 5LL * R);                            // steps 1-3
  words = std::max<std::int64_t>(words, 2 * epn + 3LL * E + B + kWarps);         // steps 4-5
  const std::int64_t c2 = 2LL * kTileEntries + tile_tokens + 4LL * R;
  words = std::max<std::int64_t>(words, c2 + (stage_tables ? (2LL * E * R + E + 3) / 4 * 4 : 0));  // C2
  return words * 4;
}

}  // namespace moonep::cuda::impl
