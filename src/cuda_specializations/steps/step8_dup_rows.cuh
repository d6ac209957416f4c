// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 8 (docs/spec/planning.md): the dedup structures, written into each
// destination rank's outputs, for a tile of the block's tokens.
//
// In:  step 7's s_mask / s_later / s_list and s_cnt (each destination's
//      dup groups and loffs of the tile), s_dst (unflipped dst values),
//      s_d (destinations).
// Out: one reservation per destination on its dup_counts (the reservation
//      counters, zeroed by the destination's block 0 before the barrier),
//      then the tile's rows (primary_loff, dup_start, dup_n) and duplicate
//      loffs in increasing k in the reserved ranges.
// What must stay true: rows are reserved atomically, so their order may
// vary from run to run (the contract compares dup groups as sets); a
// reservation beyond NvS would mean inconsistent counts, and is flagged,
// never written.
#pragma once

#include "step7_dedup.cuh"

namespace moonep::cuda::impl {
namespace {

// One reservation per destination for the whole tile (thread d for
// destination d) on the destination's dup_counts. Returns (rows, loffs)
// bases in registers (the atomics' results are needed only by step 8) and
// re-zeroes s_cnt.
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

// Row `row` of destination d: (primary_loff, dup_start, dup_n); returns
// where the group's n duplicate loffs go (null, and an internal error,
// when the reservation overran d's arrays).
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

// One primary (entry kp of the token at base, bound for d; later: its
// duplicates' k bits): its row and its duplicates' loffs, numbered within
// the tile's reservation on d by s_cnt (one atomic for both).
__device__ __forceinline__ void emit_primary(const Block& b, int d, int base, int kp, unsigned later,
                                             const int* s_dst, const int* s_gb, const int* s_lb, int* s_cnt) {
  const int n = __popc(later);
  const unsigned c = add_dup_counts(s_cnt, d, 1, n);
  const int row = s_gb[d] + static_cast<int>(c & 0xffffu);
  const int start = s_lb[d] + static_cast<int>(c >> 16);
  std::int32_t* out = emit_dup_row(b, d, s_dst[base + kp], n, row, start);
  if (!out) return;
  MOONEP_ROLLED
  for (int j = 0; later; later &= later - 1u, ++j) out[j] = s_dst[base + __ffs(later) - 1] - d * b.p.NvS;
}

// The fast path (K <= kRegK, R <= 32): from step7_dedup's list, one
// primary per thread (a warp no longer runs as many rounds as its busiest
// token has primaries).
__device__ void step8_list(const Block& b, int nprim, const int* s_list, const int* s_d, const int* s_dst,
                           const unsigned* s_later, const int* s_gb, const int* s_lb, int* s_cnt) {
  MOONEP_ROLLED
  for (int i = b.tid; i < nprim; i += kThreads) {
    const int v = s_list[i], base = v & 0xffff, kp = v >> 16;
    emit_primary(b, s_d[base + kp], base, kp, s_later[base + kp], s_dst, s_gb, s_lb, s_cnt);
  }
}

// Every other shape: one token per thread, each primary's duplicates found
// again from the destinations (K <= 32, as s_mask's bits).
__device__ void step8_rows(const Block& b, int nt, const int* s_d, const int* s_dst, const unsigned* s_mask,
                           const int* s_gb, const int* s_lb, int* s_cnt) {
  const int K = b.p.K;
  for (int tok = b.tid; tok < nt; tok += kThreads) {
    const int base = tok * K;
    unsigned mask = s_mask[tok];
    while (mask) {
      const int kp = __ffs(mask) - 1;
      mask &= mask - 1u;
      const int d = s_d[base + kp];
      unsigned later = 0;
      for (int k = kp + 1; k < K; ++k) later |= s_d[base + k] == d ? 1u << k : 0u;
      emit_primary(b, d, base, kp, later, s_dst, s_gb, s_lb, s_cnt);
    }
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
