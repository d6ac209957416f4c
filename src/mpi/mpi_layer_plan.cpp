// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::MpiLayerPlan (moonep/mpi_layer.hpp) and its checks: one rank's
// plan as pointers, and the bad-input checks of docs/spec/layer.md for the
// fields this rank's part of an operation reads, so that no plan makes the
// layer read or write outside a buffer, its own or a peer's.
#include "mpi/mpi_layer_checks.hpp"

#include <string>

namespace moonep {

MpiLayerPlan::MpiLayerPlan(const Plan<Kokkos::HostSpace>& plan) : config(plan.config) {
  if (plan.ranks.size() != 1) return;  // not one process's plan: refused by the checks (rank -1)
  const RankPlanView<Kokkos::HostSpace>& p = plan.ranks[0];
  rank = p.rank;
  dst = p.dst.data();
  dst_len = static_cast<std::int64_t>(p.dst.extent(0));
  entries = p.entries.extent(0) > 0 ? p.entries(0) : dst_len;
  src_info = p.src_info.data();
  src_info_len = static_cast<std::int64_t>(p.src_info.extent(0));
  zero_fill_ranges = p.zero_fill_ranges.data();
  zero_fill_rows = static_cast<std::int64_t>(p.zero_fill_ranges.extent(0));
  dup_groups = p.dup_groups.data();
  dup_group_rows = static_cast<std::int64_t>(p.dup_groups.extent(0));
  dup_loffs = p.dup_loffs.data();
  dup_loffs_len = static_cast<std::int64_t>(p.dup_loffs.extent(0));
  dup_counts = p.dup_counts.data();
  dup_counts_len = static_cast<std::int64_t>(p.dup_counts.extent(0));
  cu_seqlens = p.cu_seqlens.data();
  cu_seqlens_len = static_cast<std::int64_t>(p.cu_seqlens.size());
  experts_to_copy = p.experts_to_copy.data();
  experts_to_copy_len = static_cast<std::int64_t>(p.experts_to_copy.size());
}

MpiLayerPlan::MpiLayerPlan(const HostPlan& plan, int r) : config(plan.config) {
  if (r < 0 || static_cast<std::size_t>(r) >= plan.ranks.size()) return;  // refused by the checks (rank -1)
  const HostRankPlan& p = plan.ranks[static_cast<std::size_t>(r)];
  auto size = [](const std::vector<std::int32_t>& v) { return static_cast<std::int64_t>(v.size()); };
  rank = r;
  dst = p.dst.data();
  dst_len = entries = size(p.dst);
  src_info = p.src_info.data();
  src_info_len = size(p.src_info);
  zero_fill_ranges = p.zero_fill_ranges.data();
  zero_fill_rows = size(p.zero_fill_ranges) / 2;
  dup_groups = p.dup_groups.data();
  dup_group_rows = size(p.dup_groups) / 3;
  dup_loffs = p.dup_loffs.data();
  dup_loffs_len = size(p.dup_loffs);
  dup_counts = p.dup_counts.data();
  dup_counts_len = size(p.dup_counts);
  cu_seqlens = p.cu_seqlens.data();
  cu_seqlens_len = size(p.cu_seqlens);
  experts_to_copy = p.experts_to_copy.data();
  experts_to_copy_len = size(p.experts_to_copy);
}

namespace layer {

namespace {
std::string at(const char* field, std::int64_t i) { return std::string(field) + "[" + std::to_string(i) + "] = "; }
}  // namespace

std::string mpi_plan_error(const MpiLayerPlan& p, const Config& c, int my_rank) {
  const bool same = p.config.ranks == c.ranks && p.config.experts == c.experts && p.config.topk == c.topk &&
                    p.config.tokens == c.tokens && p.config.copy_slots == c.copy_slots &&
                    p.config.token_padding == c.token_padding;
  if (!same) return "the plan is of " + describe(p.config) + ", the layer of " + describe(c);
  if (p.rank != my_rank)
    return "the plan is of rank " + std::to_string(p.rank) + ", this process is rank " + std::to_string(my_rank) +
           " (give the plan of a Planner over the same world, or rank " + std::to_string(my_rank) + " of a HostPlan)";
  const std::int64_t nvs = c.slots(), R = c.ranks, K = c.topk;
  if (p.entries < 0 || p.entries > p.dst_len || p.entries > c.entries() || p.entries % K != 0)
    return "the plan's dst holds " + std::to_string(p.dst_len) + " values for " + std::to_string(p.entries) +
           " entries, expected a multiple of K up to S*K = " + std::to_string(c.entries());
  if (p.src_info_len != nvs)
    return "the plan's src_info holds " + std::to_string(p.src_info_len) + " values, expected NvS = " +
           std::to_string(nvs);
  if (p.zero_fill_rows != c.groups())
    return "the plan's zero_fill_ranges holds " + std::to_string(p.zero_fill_rows) + " ranges, expected E+B = " +
           std::to_string(c.groups());
  if (p.dup_counts_len < 2 || p.dup_counts[0] < 0 || p.dup_counts[0] > p.dup_group_rows || p.dup_counts[1] < 0 ||
      p.dup_counts[1] > p.dup_loffs_len)
    return "the plan's dup_counts do not fit its dup_groups and dup_loffs";
  for (std::int64_t i = 0; i < p.entries; ++i) {
    const std::int64_t code = p.dst[i], c_ = code >= 0 ? code : -code - 1;
    if (c_ >= R * nvs) return at("dst", i) + std::to_string(code) + " is outside the world's R*NvS slots";
  }
  for (std::int64_t s = 0; s < nvs; ++s) {
    const std::int64_t src = p.src_info[s];
    if (src >= 0 && (src >= R * nvs || src % nvs >= c.entries()))
      return at("src_info", s) + std::to_string(src) + " names no entry of a rank";
  }
  for (std::int64_t g = 0; g < p.zero_fill_rows; ++g) {
    const std::int64_t from = p.zero_fill_ranges[2 * g], n = p.zero_fill_ranges[2 * g + 1];
    if (from < 0 || n < 0 || from + n > nvs)
      return at("zero_fill_ranges", g) + "(" + std::to_string(from) + ", " + std::to_string(n) +
             ") is outside 0..NvS = 0.." + std::to_string(nvs);
  }
  for (std::int64_t j = 0; j < p.dup_counts[0]; ++j) {
    const std::int64_t primary = p.dup_groups[3 * j], start = p.dup_groups[3 * j + 1], n = p.dup_groups[3 * j + 2];
    if (primary < 0 || primary >= nvs || start < 0 || n < 0 || start + n > p.dup_counts[1])
      return "dup_groups[" + std::to_string(j) + "] is out of range";
  }
  for (std::int64_t q = 0; q < p.dup_counts[1]; ++q)
    if (p.dup_loffs[q] < 0 || p.dup_loffs[q] >= nvs)
      return at("dup_loffs", q) + std::to_string(p.dup_loffs[q]) + " is outside 0..NvS";
  return "";
}

}  // namespace layer
}  // namespace moonep
