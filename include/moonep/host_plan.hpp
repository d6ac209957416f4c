// moonep/host_plan.hpp — a plan in host memory (std::vector), the common
// currency of the reference planner, the file formats and the tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"

namespace moonep {

// Routing of every rank: routing[r] holds S*K expert ids, token major.
using Routing = std::vector<std::vector<std::int32_t>>;
// Optional tokens_per_expert of every rank: tpe[r][e].
using TokensPerExpert = std::vector<std::vector<std::int32_t>>;

// One rank's plan, docs/spec/planning.md "A rank's plan". Arrays are
// flat, row major. dup_groups and dup_loffs hold only their valid prefixes
// (dup_counts[0] rows of 3, dup_counts[1] entries).
struct HostRankPlan {
  std::vector<std::int32_t> dst;               // [N]
  std::vector<std::int32_t> cu_seqlens;        // [E+B]
  std::vector<std::int32_t> zero_fill_ranges;  // [E+B][2]
  std::vector<std::int32_t> experts_to_copy;   // [R][B]
  std::vector<std::int32_t> remote_stats;      // [2]
  std::vector<std::int32_t> src_info;          // [NvS]
  std::vector<std::int32_t> dup_groups;        // [dup_counts[0]][3]
  std::vector<std::int32_t> dup_loffs;         // [dup_counts[1]]
  std::vector<std::int32_t> dup_counts;        // [2]
};

struct HostPlan {
  Config config;
  std::vector<HostRankPlan> ranks;
};

// "" when a and b are the same plan (dup structures compared as sets of
// (primary, [duplicates...]) groups, since their row order may vary);
// otherwise one line naming the first difference, e.g.
// "dst[17]: 4113 vs 4114".
std::string plan_difference(const HostRankPlan& a, const HostRankPlan& b);
std::string plan_difference(const HostPlan& a, const HostPlan& b);

}  // namespace moonep
