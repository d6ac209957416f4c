// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 7 (docs/spec/planning.md): dedup within each token, on a tile of nt
// tokens of the block.
//
// In:  s_d[t*K + k] = entry k's destination rank (-1: none, a bad id),
//      s_x = its dst value (step 6, unflipped), s_cnt [R] zero.
// Out: the token's dst values stored to out_x (the rank's dst at the
//      tile's first entry), every entry after the first one bound for the
//      same rank flipped to -x-1; s_mask[t] bit k: entry k is a primary
//      with duplicates; s_cnt[d] counts d's dup groups and dup loffs (one
//      word, dup_count_word); on the fast path (K <= kRegK, R <= 32) each
//      primary's duplicates as a bitmask at the primary's entry in
//      s_later, and every primary with duplicates in s_list (tok*K |
//      kp << 16, counted in *s_nprim, zero on entry) for step8_list.
// What must stay true: a tile holds fewer than kDupCountEntries entries
// (both counts fit 16 bits; checked here); s_x keeps the unflipped values
// step 8 reports duplicates by.
#pragma once

#include "launch.cuh"

namespace moonep::cuda::impl {
namespace {

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
// instead of one per count.
__device__ __forceinline__ unsigned dup_count_word(int groups, int loffs) {
  return static_cast<unsigned>(groups) | static_cast<unsigned>(loffs) << 16;
}
__device__ __forceinline__ unsigned add_dup_counts(int* s_cnt, int d, int groups, int loffs) {
  return atomicAdd(reinterpret_cast<unsigned*>(s_cnt) + d, dup_count_word(groups, loffs));
}

__device__ void step7_dedup(const Block& b, int nt, const int* s_d, const int* s_x, unsigned* s_mask, int* s_cnt,
                            std::int32_t* out_x, unsigned* s_later, int* s_list, int* s_nprim) {
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
    // fetch. Whole warps go round (the list's warp scan); lanes past nt
    // hold no token.
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
      if (own) {
        int x[kRegK];
        load_token(s_x + base, K, x);
#pragma unroll
        for (int k = 0; k < kRegK; ++k) x[k] = ((dups >> k) & 1u) ? -x[k] - 1 : x[k];
        store_token(out_x + base, K, x);
      }
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
      int at = __shfl_sync(0xffffffffu, wbase, 0) + before;  // this token's first place in the list
      MOONEP_ROLLED
      for (unsigned m = mask; m; m &= m - 1u) {
        const int kp = __ffs(m) - 1, d = s_d[base + kp];
        unsigned later = 0;  // the primary's duplicates
#pragma unroll
        for (int k = 0; k < kRegK; ++k) later |= (((dups >> k) & 1u) && dd[k] == d) ? 1u << k : 0u;
        s_later[base + kp] = later;
        s_list[at++] = base | kp << 16;
        add_dup_counts(s_cnt, d, 1, __popc(later));
      }
      if (own) s_mask[tok] = mask;
    }
    return;
  }
  for (int tok = b.tid; tok < nt; tok += kThreads) {
    const int base = tok * K;
    unsigned mask = 0;
    if (K > 0) out_x[base] = s_x[base];
    for (int k = 1; k < K; ++k) {
      const int d = s_d[base + k];
      int prim = -1;
      for (int k2 = 0; d >= 0 && k2 < k; ++k2) {
        if (s_d[base + k2] == d) { prim = k2; break; }
      }
      out_x[base + k] = prim < 0 ? s_x[base + k] : -s_x[base + k] - 1;
      if (prim < 0) continue;
      add_dup_counts(s_cnt, d, (mask >> prim) & 1u ? 0 : 1, 1);
      mask |= 1u << prim;
    }
    s_mask[tok] = mask;
  }
}

}  // namespace
}  // namespace moonep::cuda::impl
