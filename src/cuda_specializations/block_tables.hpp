// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the one definition of a planning block's tables, as an X-macro
// list (no code): table_layout.hpp places them, kernel_params.hpp's
// TableRegions carries their offsets to the kernel, steps/tables.cuh's
// Tables carves them. A region is added, resized or shared here, in one
// line, and nowhere else; table_layout.hpp says what must stay true of the
// placement.
#pragma once

// The tables, in layout order: T(name, element type, extent in elements)
// and S(name, element type, extent, the region whose space it shares).
// Extents are expressions of R, E, B (the configuration), nt (the block's
// most tokens) and ne = nt*K (its most entries), which the users of the
// list define, and of kernel_params.hpp's kWarps and acum_stride and
// table_layout.hpp's mark_words.
#define MOONEP_BLOCK_TABLES(T, S)                                                                          \
  T(ent, int, ne)              /* expert of each entry (-1: bad id) */                                     \
  T(pos, int, ne)              /* rank among the warp's entries of its expert (C1); then dst */            \
  T(sorted, int, ne)           /* entries in expert order (-1: no entry) */                                \
  T(sexp, int, ne)             /* expert of each slot of `sorted` */                                       \
  T(dd, int, ne)               /* destination rank of each entry */                                        \
  T(mask, unsigned, nt)        /* step 7: primaries with duplicates */                                     \
  T(base, int, E)              /* rank-wide index of the block's first entry of e */                       \
  T(key, int, E)               /* block-local slot of the block's first entry of e */                      \
  T(rem, int, E)               /* totals, then what each owner keeps */                                    \
  T(bb, int, E)                /* the rank's entries of e in the blocks before this one */                 \
  S(peer, unsigned, kWarps * E, sorted) /* C1 only: lanes of the round holding e (sorted .. bb unused) */  \
  T(hist, int, kWarps * E)     /* C1: per-warp counts, then exclusive warp bases */                        \
  S(eoff, int, R * E, hist)    /* steps 4-5 on: d's slot of e's entry G is eoff[d][e] + G */               \
  T(acum, int, E * acum_stride(R)) /* alloc [E][acum_stride], then its prefix over ranks */                \
  T(cand, int, 2 * E)          /* [R][epn][2] each receiver's (expert, count) takes */                     \
  T(cslot, int, E)             /* [R][epn] copy slot of each candidate (-1: not copied) */                 \
  T(etc, int, R * B)           /* [R][B] experts_to_copy */                                                \
  T(mark, unsigned, R * mark_words(E)) /* experts picked into d's copy slots */                            \
  T(load, int, R)              /* step 1: each rank's load (its experts' entries) */                                              \
  T(bal, int, R)               /* step 2: scratch for R > 32 */                                      \
  T(from, int, R)              /* step 2: each receiver's donor (-1: none) */                                          \
  T(quota, int, R)             /* step 2: what each receiver takes from its donor */                                          \
  T(ncand, int, R)             /* step 3: takes per receiver (step 4's candidates) */                                       \
  T(copies, int, R)            /* step 3: copies made of each owner's experts */                                      \
  T(cnt, int, R)               /* steps 7-8: dup groups and loffs per destination, one word */             \
  T(gb, int, R)                /* step 8: the block's first dup group per destination */                  \
  T(lb, int, R)                /* step 8: the block's first dup loff per destination */                   \
  T(scan, int, kWarps)         /* step 5: the block scan's scratch */                                                    \
  T(nprim, int, 1)             /* steps 7-8: primaries with duplicates in the tile's list */               \
  T(sip, std::int32_t*, R)     /* each destination's src_info */
