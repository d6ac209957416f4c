// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// plan_difference: exact on every output but the dup structures, which are
// compared as sets of (primary, duplicates in k order) groups because their
// row order may vary (docs/spec/planning.md step 8).
#include "catch2_compat.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "moonep/host_plan.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace {

using V = std::vector<std::int32_t>;

moonep::Config config(int R, int E, int K, int S, int B, int tp) {
  moonep::Config c;
  c.ranks = R; c.experts = E; c.topk = K; c.tokens = S; c.copy_slots = B; c.token_padding = tp;
  return c;
}

// Hand case 1 (test_reference_hand_cases.cpp): rank 0's dup rows are
// {0:[2]}, {1:[3]}, {6:[7]}; rank 1's {0:[4]}, {2:[6]}, {7:[1]}.
const moonep::Config kConfig = config(2, 4, 2, 4, 1, 1);
const moonep::Routing kRouting = {{0, 1, 0, 1, 1, 0, 2, 0}, {0, 1, 3, 0, 1, 1, 0, 2}};

bool mentions(const std::string& why, const std::string& part) {
  return why.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("plan_difference: equal plans, and each changed output is named") {
  const auto a = moonep::plan_reference(kConfig, kRouting);
  CHECK(moonep::plan_difference(a, a) == "");
  CHECK(moonep::plan_difference(a, moonep::plan_reference(kConfig, kRouting)) == "");

  SECTION("a changed dst names rank, index and both values") {
    auto b = a;
    b.ranks[1].dst[3] = -16;  // was -15
    const auto why = moonep::plan_difference(a, b);
    CHECK(why == "rank 1: dst[3]: -15 vs -16");
    CHECK(moonep::plan_difference(a.ranks[1], b.ranks[1]) == "dst[3]: -15 vs -16");
  }
  SECTION("every exact output") {
    using Member = V moonep::HostRankPlan::*;
    const std::vector<std::pair<const char*, Member>> fields = {
        {"cu_seqlens", &moonep::HostRankPlan::cu_seqlens},
        {"zero_fill_ranges", &moonep::HostRankPlan::zero_fill_ranges},
        {"experts_to_copy", &moonep::HostRankPlan::experts_to_copy},
        {"remote_stats", &moonep::HostRankPlan::remote_stats},
        {"src_info", &moonep::HostRankPlan::src_info},
        {"dup_counts", &moonep::HostRankPlan::dup_counts},
    };
    for (const auto& [name, member] : fields) {
      auto b = a;
      (b.ranks[0].*member).back() += 1;
      const auto why = moonep::plan_difference(a, b);
      INFO(name << ": " << why);
      CHECK(mentions(why, std::string("rank 0: ") + name + "["));
      auto c = a;
      (c.ranks[1].*member).pop_back();
      CHECK(mentions(moonep::plan_difference(a, c), std::string(name) + ": length"));
    }
  }
  SECTION("different configs or rank counts") {
    auto b = a;
    b.config.token_padding = 2;
    CHECK(mentions(moonep::plan_difference(a, b), "config"));
    auto c = a;
    c.ranks.pop_back();
    CHECK(mentions(moonep::plan_difference(a, c), "ranks"));
  }
}

TEST_CASE("plan_difference compares dup groups as sets") {
  const auto a = moonep::plan_reference(kConfig, kRouting);
  REQUIRE(a.ranks[0].dup_counts == V{3, 3});

  SECTION("the same groups in another row order are equal") {
    auto b = a;
    auto& g = b.ranks[0].dup_groups;
    // Reverse the rows; dup_loffs untouched, starts travel with their rows.
    for (int x = 0, y = 2; x < y; ++x, --y)
      for (int j = 0; j < 3; ++j) std::swap(g[3 * x + j], g[3 * y + j]);
    REQUIRE(g != a.ranks[0].dup_groups);
    CHECK(moonep::plan_difference(a, b) == "");
  }
  SECTION("the same groups with dup_loffs laid out in another order are equal") {
    auto b = a;
    auto& p = b.ranks[1];
    // Rebuild rank 1's structures with the rows' duplicate blocks reversed.
    std::vector<std::pair<std::int32_t, V>> rows;
    for (int r = 0; r < p.dup_counts[0]; ++r) {
      const int start = p.dup_groups[3 * r + 1], n = p.dup_groups[3 * r + 2];
      rows.push_back({p.dup_groups[3 * r], V(p.dup_loffs.begin() + start, p.dup_loffs.begin() + start + n)});
    }
    std::reverse(rows.begin(), rows.end());
    p.dup_groups.clear();
    p.dup_loffs.clear();
    for (const auto& [primary, dups] : rows) {
      p.dup_groups.insert(p.dup_groups.end(), {primary, static_cast<std::int32_t>(p.dup_loffs.size()),
                                               static_cast<std::int32_t>(dups.size())});
      p.dup_loffs.insert(p.dup_loffs.end(), dups.begin(), dups.end());
    }
    REQUIRE(p.dup_loffs != a.ranks[1].dup_loffs);
    CHECK(moonep::plan_difference(a, b) == "");
  }
  SECTION("a changed duplicate slot differs") {
    auto b = a;
    b.ranks[0].dup_loffs[1] += 1;
    CHECK(mentions(moonep::plan_difference(a, b), "rank 0: dup group of primary slot"));
  }
  SECTION("a changed primary slot differs") {
    auto b = a;
    b.ranks[1].dup_groups[0] = 5;  // no group has primary 5 in a
    const auto why = moonep::plan_difference(a, b);
    CHECK(mentions(why, "rank 1"));
    CHECK(mentions(why, "dup"));
  }
  SECTION("duplicates of one group in another order differ (they follow k)") {
    const auto c = config(1, 2, 3, 2, 1, 3);  // hand case 5: groups {6:[0,7]}, {1:[2,3]}
    const moonep::Routing routing = {{1, 0, 1, 0, 0, 0}};
    const auto p = moonep::plan_reference(c, routing);
    REQUIRE(p.ranks[0].dup_counts == V{2, 4});
    auto q = p;
    std::swap(q.ranks[0].dup_loffs[0], q.ranks[0].dup_loffs[1]);
    CHECK(mentions(moonep::plan_difference(p, q), "differs"));
  }
  SECTION("a group missing or extra is found even with equal dup_counts") {
    auto b = a;
    b.ranks[0].dup_groups.resize(6);  // drop the last row, keep dup_counts
    CHECK(mentions(moonep::plan_difference(a, b), "missing in second plan"));
    CHECK(mentions(moonep::plan_difference(b, a), "extra dup groups"));
  }
  SECTION("a malformed row is reported, not read out of bounds") {
    auto b = a;
    b.ranks[0].dup_groups[1] = 100;
    CHECK(mentions(moonep::plan_difference(a, b), "second plan: dup_groups row 0 points outside dup_loffs"));
    CHECK(mentions(moonep::plan_difference(b, a), "first plan"));
  }
}

TEST_CASE("plan_difference separates plans of a bigger skewed step") {
  const auto c = config(4, 16, 4, 64, 2, 4);
  const auto routing = moonep::synthetic_routing(c, 2.0, 5);
  const auto a = moonep::plan_reference(c, routing);
  auto changed = routing;
  std::swap(changed[2][0], changed[2][1]);  // same tokens_per_expert, other order
  if (changed[2][0] == changed[2][1]) std::swap(changed[2][0], changed[2][4]);
  const auto b = moonep::plan_reference(c, changed);
  // Ranks 0 and 1 plan as before, but rank 2's entries (and the src_info of
  // wherever they land) move.
  CHECK(a.ranks[0].dst == b.ranks[0].dst);
  CHECK(a.ranks[1].dst == b.ranks[1].dst);
  CHECK(moonep::plan_difference(a, b) != "");
  CHECK(mentions(moonep::plan_difference(a.ranks[2], b.ranks[2]), "dst[0]"));
}
