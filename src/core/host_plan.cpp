// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Plan comparison: exact for every output but the dup structures, whose row
// order may vary (docs/spec/planning.md step 8) and are compared as sets of
// groups.
#include <algorithm>
#include <map>
#include <sstream>

#include "moonep/host_plan.hpp"

namespace moonep {
namespace {

std::string compare_array(const char* name, const std::vector<std::int32_t>& a,
                          const std::vector<std::int32_t>& b) {
  std::ostringstream m;
  if (a.size() != b.size()) {
    m << name << ": length " << a.size() << " vs " << b.size();
    return m.str();
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      m << name << "[" << i << "]: " << a[i] << " vs " << b[i];
      return m.str();
    }
  }
  return "";
}

// primary loff -> its duplicates in row order; "" in *why unless malformed.
std::map<std::int32_t, std::vector<std::int32_t>> dup_sets(const HostRankPlan& p,
                                                           std::string* why) {
  std::map<std::int32_t, std::vector<std::int32_t>> out;
  const std::size_t rows = p.dup_groups.size() / 3;
  for (std::size_t g = 0; g < rows; ++g) {
    const std::int32_t primary = p.dup_groups[3 * g], start = p.dup_groups[3 * g + 1],
                       n = p.dup_groups[3 * g + 2];
    if (start < 0 || n < 1 || static_cast<std::size_t>(start) + n > p.dup_loffs.size()) {
      *why = "dup_groups row " + std::to_string(g) + " points outside dup_loffs";
      return out;
    }
    std::vector<std::int32_t> dups(p.dup_loffs.begin() + start, p.dup_loffs.begin() + start + n);
    if (!out.emplace(primary, dups).second) {
      *why = "dup_groups names primary slot " + std::to_string(primary) + " twice";
      return out;
    }
  }
  return out;
}

}  // namespace

TokensPerRank tokens_or_full(const Config& c, const TokensPerRank* given) {
  return given ? *given : TokensPerRank(static_cast<std::size_t>(c.ranks > 0 ? c.ranks : 0), c.tokens);
}

bool is_ragged(const Config& c, const TokensPerRank* given) {
  if (!given) return false;
  for (const std::int32_t s : *given)
    if (s != c.tokens) return true;
  return false;
}

std::string plan_difference(const HostRankPlan& a, const HostRankPlan& b) {
  // Every whole field exactly, in table order; the prefixed ones (the dup
  // structures, plan_field_table_consistent) as sets below.
  for (std::size_t i = 0; i < impl::kPlanFieldCount; ++i) {
    if (impl::kPlanFields[i].held != impl::FieldHeld::whole) continue;
    const auto member = impl::kHostPlanMembers[i];
    std::string d = compare_array(impl::kPlanFields[i].name, a.*member, b.*member);
    if (!d.empty()) return d;
  }
  std::string why;
  const auto sa = dup_sets(a, &why);
  if (!why.empty()) return "first plan: " + why;
  const auto sb = dup_sets(b, &why);
  if (!why.empty()) return "second plan: " + why;
  for (const auto& [primary, dups] : sa) {
    auto it = sb.find(primary);
    if (it == sb.end()) return "dup group of primary slot " + std::to_string(primary) + " missing in second plan";
    if (it->second != dups) return "dup group of primary slot " + std::to_string(primary) + " differs";
  }
  if (sa.size() != sb.size()) return "second plan has extra dup groups";
  return "";
}

std::string plan_difference(const HostPlan& a, const HostPlan& b) {
  // Plans of different problems differ even where their arrays happen to
  // coincide (e.g. K=1 S=4 and K=2 S=2 without duplicates).
  if (describe(a.config) != describe(b.config)) {
    return "configs differ: " + describe(a.config) + " vs " + describe(b.config);
  }
  // Absent counts and counts of S everywhere are the same (full) step.
  const TokensPerRank ta = tokens_or_full(a.config, a.tokens_per_rank ? &*a.tokens_per_rank : nullptr);
  const TokensPerRank tb = tokens_or_full(b.config, b.tokens_per_rank ? &*b.tokens_per_rank : nullptr);
  const std::string tokens = compare_array("tokens_per_rank", ta, tb);
  if (!tokens.empty()) return tokens;
  if (a.ranks.size() != b.ranks.size()) {
    return "plans have " + std::to_string(a.ranks.size()) + " vs " +
           std::to_string(b.ranks.size()) + " ranks";
  }
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    std::string d = plan_difference(a.ranks[r], b.ranks[r]);
    if (!d.empty()) return "rank " + std::to_string(r) + ": " + d;
  }
  return "";
}

}  // namespace moonep
