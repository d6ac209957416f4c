// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// unit_tests/support/plan_invariants.hpp — a checker of everything a plan
// must satisfy whatever backend produced it, derived from docs/spec/planning.md
// alone (it never re-runs the planning steps 2-3, whose choices only the
// hand-computed cases pin down).
//
// Any backend's test can call it: add support/plan_invariants.cpp to the
// sources of its moonep_add_test(...) call and
//   #include "support/plan_invariants.hpp"
//   CHECK(check_plan_invariants(config, routing, plan) == "");
#pragma once

#include <string>

#include "moonep/config.hpp"
#include "moonep/host_plan.hpp"

// "" when the plan of `routing` satisfies every invariant below, otherwise
// one line naming the first violation (rank, array, index, values).
//
// Checked, in this order:
//  - shapes of every array (dup_groups/dup_loffs as the prefixes named by
//    dup_counts), routing well formed;
//  - experts_to_copy: identical on every rank; ids in [-1, E); no rank copies
//    its own expert or one expert twice; no picked slot after a -1 slot;
//  - every dst decodes to a (rank, slot) inside [0, R*NvS); src_info at that
//    slot points back to the entry (so slots are distinct); entries of one
//    expert are ordered by (source rank, flat position) -> (rank, slot);
//  - each rank r receives exactly CAP_r entries; src_info holds exactly CAP_r
//    non-negative slots, the others -1; every filled slot lies in the group
//    of the expert of the entry it names (tokens conserved per expert);
//  - layout: group g holds expert g unless picked (then empty) and group E+b
//    holds experts_to_copy[d][b]; each group's entries fill [start,
//    start+count), its padded size is round_up(count, tp) (0 if empty);
//    cu_seqlens non-decreasing, ending at most at NvS; zero_fill_ranges;
//  - a rank receives remote experts of at most one owner; a rank whose own
//    load is at most CAP keeps all its experts' entries;
//  - remote_stats[0] counts remote experts with entries on the rank,
//    remote_stats[1] counts copies made of the rank's experts; the copy
//    choice is the greedy of step 4 (largest remote count first, ties to the
//    larger expert id, min(B, remote experts) picks);
//  - dedup: within a token the first entry per destination rank is
//    non-negative, every later one negative;
//  - dup structures: rows in range, each dup_loffs index used once, and the
//    set of (primary, duplicates in k order) equals the one derived from dst.
//
// tokens_per_rank (R counts s_r) makes the step ragged
// (docs/spec/planning.md "Ragged steps"): routing[r] and dst then hold
// s_r*K entries and rank r must receive CAP_r = T div R + (r < T mod R),
// T = sum s_r*K; absent, every rank holds S tokens and CAP_r = S*K.
std::string check_plan_invariants(const moonep::Config& config, const moonep::Routing& routing,
                                  const moonep::HostPlan& plan,
                                  const moonep::TokensPerRank* tokens_per_rank = nullptr);
