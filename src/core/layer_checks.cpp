// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The reference layer's plan checks (docs/spec/layer.md "Bad input"): a plan
// that passes can be applied without any index leaving its buffer.
#include "core/layer_checks.hpp"

#include "moonep/layer_reference.hpp"
#include "moonep/reference.hpp"

namespace moonep {

namespace {

[[noreturn]] void bad_plan(int rank, const std::string& what) {
  throw InputError("plan rank " + std::to_string(rank) + ": " + what);
}

std::string at(const char* field, std::int64_t index) {
  return std::string(field) + "[" + std::to_string(index) + "]";
}

void check_length(int rank, const char* field, std::size_t got, std::int64_t want) {
  if (static_cast<std::int64_t>(got) != want)
    bad_plan(rank, std::string(field) + " holds " + std::to_string(got) + " values, expected " +
                       std::to_string(want) + " (a plan of another configuration?)");
}

void check_range(int rank, const char* field, std::int64_t index, std::int64_t value, std::int64_t lo,
                 std::int64_t hi) {
  if (value < lo || value > hi)
    bad_plan(rank, at(field, index) + " = " + std::to_string(value) + " is outside " + std::to_string(lo) +
                       ".." + std::to_string(hi));
}

void check_rank_plan(const Config& c, int rank, const HostRankPlan& p, std::int32_t tokens,
                     const std::vector<std::int32_t>& all_tokens) {
  const std::int64_t nvs = c.slots(), groups = c.groups(), K = c.topk;
  check_length(rank, "dst", p.dst.size(), tokens * K);
  check_length(rank, "cu_seqlens", p.cu_seqlens.size(), groups);
  check_length(rank, "zero_fill_ranges", p.zero_fill_ranges.size(), 2 * groups);
  check_length(rank, "experts_to_copy", p.experts_to_copy.size(), std::int64_t{c.ranks} * c.copy_slots);
  check_length(rank, "src_info", p.src_info.size(), nvs);
  check_length(rank, "dup_counts", p.dup_counts.size(), 2);
  check_range(rank, "dup_counts", 0, p.dup_counts[0], 0, nvs);
  check_range(rank, "dup_counts", 1, p.dup_counts[1], 0, nvs);
  check_length(rank, "dup_groups", p.dup_groups.size(), 3 * std::int64_t{p.dup_counts[0]});
  check_length(rank, "dup_loffs", p.dup_loffs.size(), p.dup_counts[1]);
  const std::int64_t last = std::int64_t{c.ranks} * nvs - 1;
  for (std::size_t i = 0; i < p.dst.size(); ++i)
    check_range(rank, "dst", i, p.dst[i] >= 0 ? p.dst[i] : -std::int64_t{p.dst[i]} - 1, 0, last);
  for (std::int64_t g = 0; g < groups; ++g) {
    check_range(rank, "cu_seqlens", g, p.cu_seqlens[g], g == 0 ? 0 : p.cu_seqlens[g - 1], nvs);
    const std::int64_t off = p.zero_fill_ranges[2 * g], n = p.zero_fill_ranges[2 * g + 1];
    check_range(rank, "zero_fill_ranges", 2 * g, off, 0, nvs);
    check_range(rank, "zero_fill_ranges", 2 * g + 1, n, 0, nvs - off);
  }
  for (std::size_t b = 0; b < p.experts_to_copy.size(); ++b)
    check_range(rank, "experts_to_copy", b, p.experts_to_copy[b], -1, c.experts - 1);
  for (std::int64_t s = 0; s < nvs; ++s) {
    const std::int32_t src = p.src_info[s];
    if (src < 0) continue;
    check_range(rank, "src_info", s, src, 0, last);
    const std::int64_t r = src / nvs, i = src % nvs;
    if (i >= all_tokens[r] * K)
      bad_plan(rank, at("src_info", s) + " = " + std::to_string(src) + " names entry " + std::to_string(i) +
                         " of rank " + std::to_string(r) + ", which holds " +
                         std::to_string(all_tokens[r] * K));
  }
  for (std::int64_t j = 0; j < p.dup_counts[0]; ++j) {
    check_range(rank, "dup_groups", 3 * j, p.dup_groups[3 * j], 0, nvs - 1);
    check_range(rank, "dup_groups", 3 * j + 1, p.dup_groups[3 * j + 1], 0, p.dup_counts[1]);
    check_range(rank, "dup_groups", 3 * j + 2, p.dup_groups[3 * j + 2], 0,
                p.dup_counts[1] - p.dup_groups[3 * j + 1]);
  }
  for (std::int64_t j = 0; j < p.dup_counts[1]; ++j) check_range(rank, "dup_loffs", j, p.dup_loffs[j], 0, nvs - 1);
}

}  // namespace

namespace layer {

std::vector<std::int32_t> plan_tokens(const HostPlan& plan) {
  return tokens_or_full(plan.config, plan.tokens_per_rank ? &*plan.tokens_per_rank : nullptr);
}

void check_width(const char* op, const char* name, std::int64_t value) {
  if (value < 1)
    throw InputError(std::string(op) + ": " + name + " must be at least 1, got " + std::to_string(value));
}

}  // namespace layer

void check_layer_plan(const HostPlan& plan) {
  const Config& c = plan.config;
  validate(c);
  if (static_cast<std::int64_t>(plan.ranks.size()) != c.ranks)
    throw InputError("plan: holds " + std::to_string(plan.ranks.size()) + " ranks, its configuration " +
                     std::to_string(c.ranks));
  if (plan.tokens_per_rank) validate_tokens_per_rank(c, *plan.tokens_per_rank);
  const std::vector<std::int32_t> tokens = layer::plan_tokens(plan);
  for (int r = 0; r < c.ranks; ++r) check_rank_plan(c, r, plan.ranks[r], tokens[r], tokens);
}

namespace layer {
std::string uncopied_expert_error(const Config& c, int d, const std::int32_t* cu) {
  const int epn = c.experts_per_rank();
  for (int g = 0; g < c.experts; ++g) {
    const std::int32_t slots = cu[g] - (g == 0 ? 0 : cu[g - 1]);
    if (slots > 0 && g / epn != d)
      return "rank " + std::to_string(d) + " would run expert " + std::to_string(g) + " (" +
             std::to_string(slots) + " slots) that it neither owns nor holds in a copy slot " + "(copy_slots " +
             std::to_string(c.copy_slots) + " < experts per rank " + std::to_string(epn) +
             "; plan with copy_slots >= " + std::to_string(epn) + ")";
  }
  return "";
}
}  // namespace layer

void check_experts_runnable(const HostPlan& plan) {
  const Config& c = plan.config;
  for (int d = 0; d < c.ranks; ++d) {
    const std::string error = layer::uncopied_expert_error(c, d, plan.ranks[d].cu_seqlens.data());
    if (!error.empty()) throw InputError(error);
  }
}

}  // namespace moonep
