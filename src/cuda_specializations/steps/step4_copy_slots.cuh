// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Step 4 (docs/spec/planning.md): which experts each destination copies,
// one warp per destination d (steps_4_5 in step5_layout.cuh calls it).
//
// In:  d's candidates t.cand / t.ncand (step 3: its remote experts and
//      their counts), t.etc preset to -1, t.mark zeroed.
// Out: t.etc[d][b] = the expert in copy slot b; t.mark bit e of d set for
//      every picked expert; t.cslot[d][i] = candidate i's slot (-1: not
//      copied). Returns the lane's share of the padded entries of d's
//      uncopied candidates (step 5 lays them out before the copy slots).
// What must stay true: the B largest remote counts win, ties to the
// largest expert id; a candidate's slot is the number of candidates that
// beat it, so slots are dense from 0 and no two candidates share one.
// Only candidates can be remote experts with entries on d (one donor per
// receiver), so no other expert needs looking at.
#pragma once

#include "tables.cuh"

namespace moonep::cuda::impl {
namespace {

__device__ __forceinline__ int step4_copy_slots(const Block& b, const Tables& t, int d) {
  const KernelParams& p = b.p;
  const int E = p.E, B = p.B, epn = p.epn;
  const int mw = mark_words(E);
  const int nc = min(t.ncand[d], epn);
  const int* cd = t.cand + 2 * d * epn;
  int* slot = t.cslot + d * epn;
  int uncopied = 0;
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
  return uncopied;
}

}  // namespace
}  // namespace moonep::cuda::impl
