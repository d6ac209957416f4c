// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/host_plan.hpp — a plan in host memory (std::vector), the common
// currency of the reference planner, the file formats and the tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/impl/plan_fields.hpp"

namespace moonep {

// Routing of every rank: routing[r] holds s_r*K expert ids, token major
// (s_r = S unless the step is ragged).
using Routing = std::vector<std::vector<std::int32_t>>;
// Optional tokens_per_expert of every rank: tpe[r][e].
using TokensPerExpert = std::vector<std::vector<std::int32_t>>;
// Optional tokens_per_rank of a ragged step (docs/spec/planning.md "Ragged
// steps"): R counts s_r, each in 0..S. Absent means every rank holds S.
using TokensPerRank = std::vector<std::int32_t>;

// s_r of every rank: *tokens_per_rank when given, else S for each.
TokensPerRank tokens_or_full(const Config& config, const TokensPerRank* tokens_per_rank);
// True when tokens_per_rank is given and some s_r differs from S (a step
// with every s_r = S is a full step, whether or not the counts are given).
bool is_ragged(const Config& config, const TokensPerRank* tokens_per_rank);

// One rank's plan, docs/spec/planning.md "A rank's plan": one flat,
// row-major vector per output, named and shaped as MOONEP_PLAN_FIELDS
// (moonep/impl/plan_fields.hpp) says: dst [N_r], cu_seqlens [E+B],
// zero_fill_ranges [E+B][2], experts_to_copy [R][B], remote_stats [2],
// src_info [NvS], dup_groups [dup_counts[0]][3], dup_loffs [dup_counts[1]],
// dup_counts [2]. dup_groups and dup_loffs hold only their valid prefixes.
struct HostRankPlan {
#define MOONEP_HOST_PLAN_MEMBER(name, ...) std::vector<std::int32_t> name;
  MOONEP_PLAN_FIELDS(MOONEP_HOST_PLAN_MEMBER)
#undef MOONEP_HOST_PLAN_MEMBER
};

namespace impl {
// HostRankPlan's members in the order of kPlanFields. (Through an alias:
// nvcc's front end writes the plain declarator back with parentheses that
// GCC then warns about.)
using HostPlanMember = std::vector<std::int32_t> HostRankPlan::*;
inline constexpr HostPlanMember kHostPlanMembers[] = {
#define MOONEP_HOST_PLAN_POINTER(name, ...) &HostRankPlan::name,
    MOONEP_PLAN_FIELDS(MOONEP_HOST_PLAN_POINTER)
#undef MOONEP_HOST_PLAN_POINTER
};
static_assert(sizeof(kHostPlanMembers) / sizeof(kHostPlanMembers[0]) == kPlanFieldCount);
}  // namespace impl

struct HostPlan {
  Config config;
  std::vector<HostRankPlan> ranks;
  // The step's tokens_per_rank when it was given (ranks[r].dst then holds
  // tokens_per_rank[r]*K entries); absent for a full step.
  std::optional<TokensPerRank> tokens_per_rank;
};

// "" when a and b are the same plan (dup structures compared as sets of
// (primary, [duplicates...]) groups, since their row order may vary);
// otherwise one line naming the first difference, e.g.
// "dst[17]: 4113 vs 4114".
std::string plan_difference(const HostRankPlan& a, const HostRankPlan& b);
std::string plan_difference(const HostPlan& a, const HostPlan& b);

}  // namespace moonep
