// Private: a planning block's tables, carved as table_layout.hpp lays them
// out, from the block's shared memory or from its slice of the rank's
// global scratch. Every step reads and writes the block's own tables only,
// so the same code serves both placements.
#pragma once

#include "../table_layout.hpp"
#include "launch.cuh"

namespace moonep::cuda::impl {
namespace {

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
  int* nprim;     // steps 7-8: primaries with duplicates in the tile's list
};

// The block's tables from `sm`, the start of its dynamic shared memory or
// of its global slice (16-byte aligned either way).
__device__ Tables carve(int* sm, const KernelParams& p) {
  const TableRegions& l = p.tables;  // the host's table_layout
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

// acum[e][d-1]: e's entries computed on the ranks before d (0 for d = 0).
__device__ __forceinline__ int acum_before(const Tables& t, int as, int e, int d) {
  return d > 0 ? t.acum[e * as + d - 1] : 0;
}
// alloc[d][e] from the prefix table.
__device__ __forceinline__ int alloc_of(const Tables& t, int as, int e, int d) {
  return t.acum[e * as + d] - acum_before(t, as, e, d);
}

}  // namespace
}  // namespace moonep::cuda::impl
