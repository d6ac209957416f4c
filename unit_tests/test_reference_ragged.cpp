// Ragged steps (docs/spec/planning.md "Ragged steps") in the reference
// planner: plans worked out by hand from the spec in the comments above each
// case (the expected arrays come from those derivations, never from running
// the planner), the validation of the counts, and a seeded sweep checking
// every invariant with CAP_r.
//
//  case R1  R=2 E=4 K=2 S=4 B=1 tp=1, s = [4, 0]     a rank with no tokens
//                                                    still receives CAP_1 = 4
//  case R2  R=3 E=3 K=1 S=4 B=1 tp=1, s = [1, 4, 2]  one full rank; T mod R
//                                                    = 1 puts the remainder
//                                                    on rank 0
//  case R3  R=4 E=4 K=2 S=2 B=1 tp=1, s = [1, 2, 0, 2]  T mod R = 2: ranks 0
//                                                    and 1 take one more;
//                                                    three receivers of one
//                                                    donor, dedup on each
//  case R4  R=2 E=2 K=2 S=3 B=1 tp=2, s = [0, 0]     an empty step
//
// Notation as in test_reference_hand_cases.cpp: tpe, cum, total, load,
// balance, z, alloc, acum of the spec; T = sum s_r*K, CAP_r = T div R +
// (r < T mod R); dst = d*NvS + loff; src_info = r*NvS + i; a duplicate is
// stored as -dst-1.
#include "catch2_compat.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "support/plan_invariants.hpp"
#include "support/ragged_steps.hpp"

namespace {

using moonep::Config;
using moonep::HostPlan;
using moonep::Routing;
using moonep::TokensPerRank;
using V = std::vector<std::int32_t>;
using DupSets = std::map<std::int32_t, V>;  // primary loff -> duplicate loffs

struct RankExpect {
  V dst, cu_seqlens, remote_stats, src_info;
  DupSets dups;
};

DupSets dup_sets(const moonep::HostRankPlan& p) {
  DupSets out;
  for (std::size_t row = 0; row + 2 < p.dup_groups.size(); row += 3) {
    const std::int32_t start = p.dup_groups[row + 1], n = p.dup_groups[row + 2];
    REQUIRE(start >= 0);
    REQUIRE(static_cast<std::size_t>(start) + n <= p.dup_loffs.size());
    out[p.dup_groups[row]] = V(p.dup_loffs.begin() + start, p.dup_loffs.begin() + start + n);
  }
  return out;
}

// The plan against the hand-computed one (tp = 1 cases and the empty step:
// zero_fill_ranges are all zero), then the invariant checker and the
// reference HostPlanner.
void check_plan(const Config& c, const Routing& routing, const TokensPerRank& tokens, const V& experts_to_copy,
                const std::vector<RankExpect>& want) {
  const HostPlan plan = moonep::plan_reference(c, routing, nullptr, &tokens);
  REQUIRE(plan.tokens_per_rank);
  CHECK(*plan.tokens_per_rank == tokens);
  REQUIRE(plan.ranks.size() == want.size());
  for (std::size_t d = 0; d < want.size(); ++d) {
    INFO("rank " << d);
    const auto& p = plan.ranks[d];
    const auto& x = want[d];
    CHECK(p.dst == x.dst);
    CHECK(p.cu_seqlens == x.cu_seqlens);
    CHECK(p.zero_fill_ranges == V(2 * static_cast<std::size_t>(c.groups()), 0));
    CHECK(p.experts_to_copy == experts_to_copy);
    CHECK(p.remote_stats == x.remote_stats);
    CHECK(p.src_info == x.src_info);
    std::int32_t n_dups = 0;
    for (const auto& g : x.dups) n_dups += static_cast<std::int32_t>(g.second.size());
    CHECK(p.dup_counts == V{static_cast<std::int32_t>(x.dups.size()), n_dups});
    CHECK(dup_sets(p) == x.dups);
  }
  CHECK(check_plan_invariants(c, routing, plan, &tokens) == "");
  // The matching tokens_per_expert changes nothing; neither does the
  // HostPlanner path.
  const auto tpe = moonep::count_tokens_per_expert(c, routing);
  CHECK(moonep::plan_difference(moonep::plan_reference(c, routing, &tpe, &tokens), plan) == "");
  auto planner = moonep::make_host_planner(moonep::Backend::reference, c);
  planner->load(routing, nullptr, &tokens);
  planner->step();
  CHECK(moonep::plan_difference(planner->result(), plan) == "");
}

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

// Case R1: R=2 E=4 K=2 S=4 B=1 tp=1, s = [4, 0]. epn=2, NvS=8.
//  N = [8, 0], T = 8, CAP = [4, 4].
//  rank 0's routing is hand case 1's: tpe[0] = [4,3,1,0] (e0 at i0,2,5,7;
//  e1 at i1,3,4; e2 at i6); tpe[1] = 0.
//  total = [4,3,1,0], load = [7,1], balance = [7-4, 1-4] = [3,-3]
//  step 2: move 3 from 0 to 1, z[0][1] = 3; balances 0: stop.
//  step 3 h=0: quota[1]=3, remaining [4,3] -> j=0 takes 3: alloc[1][0]=3,
//          alloc[0][0]=1.
//  alloc[0] = [1,3,0,0], alloc[1] = [3,0,1,0]
//  step 4: rank 0 no remote entries -> [0,.], slot -1; rank 1 remote e0=3
//          -> copies e0, remote_stats[1][0]=1, remote_stats[0][1]=1.
//  step 5 rank 0: g0 e0 [0,1), g1 e1 [1,4) -> cu [1,4,4,4,4].
//         rank 1: g0 picked, g1 0, g2 e2 [0,1), g3 0, g4 e0 [1,4)
//          -> cu [0,0,1,1,4]; offsets e2=0, e0=1.
//  step 6: acum e0 = [1,4], e1 = [3,3], e2 = [0,1].
//   i0 e0 G0 -> d0 0 | i1 e1 G0 -> d0 1 | i2 e0 G1 -> d1 1+0 = 9 |
//   i3 e1 G1 -> d0 2 | i4 e1 G2 -> d0 3 | i5 e0 G2 -> d1 1+1 = 10 |
//   i6 e2 G0 -> d1 0 = 8 | i7 e0 G3 -> d1 1+2 = 11
//   src_info[0] = [0,1,3,4,-1..], src_info[1] = [6,2,5,7,-1..]
//  step 7: tokens (0,1) both on d0 -> i1 = -2; (9,2) (3,10) keep;
//          (8,11) both on d1 -> i7 = -12.
//  step 8: rank 0 {0:[1]}, rank 1 {0:[3]}.
TEST_CASE("ragged case R1: a rank with no tokens still receives its share") {
  const Config c{2, 4, 2, 4, 1, 1};
  const Routing routing = {{0, 1, 0, 1, 1, 0, 2, 0}, {}};
  check_plan(c, routing, {4, 0}, {-1, 0},
             {{{0, -2, 9, 2, 3, 10, 8, -12}, {1, 4, 4, 4, 4}, {0, 1}, {0, 1, 3, 4, -1, -1, -1, -1}, {{0, {1}}}},
              {{}, {0, 0, 1, 1, 4}, {1, 0}, {6, 2, 5, 7, -1, -1, -1, -1}, {{0, {3}}}}});
}

// Case R2: R=3 E=3 K=1 S=4 B=1 tp=1, s = [1, 4, 2]. epn=1, NvS=4.
//  routing: rank 0 [2], rank 1 [1,1,2,1], rank 2 [1,0].
//  N = [1,4,2], T = 7, CAP = 7 div 3 + (r < 1) = [3,2,2].
//  tpe[0] = [0,0,1], tpe[1] = [0,3,1], tpe[2] = [1,1,0]
//  total = load = [1,4,2], balance = [-2,2,0]
//  step 2: move 2 from 1 to 0, z[1][0] = 2; all 0: stop.
//  step 3 h=1: quota[0]=2 takes 2 of e1: alloc[0][1]=2, alloc[1][1]=2.
//  alloc[0] = [1,2,0], alloc[1] = [0,2,0], alloc[2] = [0,0,2]
//  step 4: rank 0 copies e1 (remote_stats [1,0]; rank 1's [0,1]); ranks 1
//          and 2 have no remote entries (-1).
//  step 5 rank 0: g0 e0 [0,1), g1 picked, g2 0, g3 e1 [1,3) -> cu [1,1,1,3]
//         rank 1: g1 e1 [0,2) -> cu [0,2,2,2]; rank 2: g2 e2 [0,2) -> [0,0,2,2]
//  step 6: acum e0 = [1,1,1], e1 = [2,4,4], e2 = [0,0,2];
//          cum[r-1]: e0 [0,0,1], e1 [0,3,4], e2 [0,1,2].
//   rank 0: i0 e2 G0 -> d2 0 = 8
//   rank 1: i0 e1 G0 -> d0 1 | i1 e1 G1 -> d0 2 | i2 e2 G1 -> d2 1 = 9 |
//           i3 e1 G2 -> d1 (p=2) 0 = 4
//   rank 2: i0 e1 G3 -> d1 1 = 5 | i1 e0 G0 -> d0 0
//   src_info[0] = [9,4,5,-1], [1] = [7,8,-1,-1], [2] = [0,6,-1,-1]
//  K = 1: no dedup.
TEST_CASE("ragged case R2: one full rank, the remainder on the lowest rank") {
  const Config c{3, 3, 1, 4, 1, 1};
  const Routing routing = {{2}, {1, 1, 2, 1}, {1, 0}};
  check_plan(c, routing, {1, 4, 2}, {1, -1, -1},
             {{{8}, {1, 1, 1, 3}, {1, 0}, {9, 4, 5, -1}, {}},
              {{1, 2, 9, 4}, {0, 2, 2, 2}, {0, 1}, {7, 8, -1, -1}, {}},
              {{5, 0}, {0, 0, 2, 2}, {0, 0}, {0, 6, -1, -1}, {}}});
}

// Case R3: R=4 E=4 K=2 S=2 B=1 tp=1, s = [1, 2, 0, 2]. epn=1, NvS=4.
//  routing: rank 0 (3,3); rank 1 (3,0) (1,3); rank 2 none; rank 3 (3,2) (3,3).
//  N = [2,4,0,4], T = 10, CAP = 10 div 4 + (r < 2) = [3,3,2,2].
//  total = load = [1,1,1,7], balance = [-2,-2,-1,5]
//  step 2: 3 -> 0 moves 2 (deficit tie to the lowest rank) [0,-2,-1,3];
//          3 -> 1 moves 2 [0,0,-1,1]; 3 -> 2 moves 1; stop.
//  step 3 h=3: quotas [2,2,1]: alloc[0][3]=2, alloc[1][3]=2, alloc[2][3]=1,
//          alloc[3][3]=2.
//  step 4: ranks 0,1,2 copy e3 (remote_stats [1,0]); rank 3 copies nothing
//          and three copies are made of its expert: [0,3].
//  step 5 (5 groups): rank 0 g0 e0 [0,1), g4 e3 [1,3) -> cu [1,1,1,1,3];
//         rank 1 g1 e1 [0,1), g4 e3 [1,3) -> [0,1,1,1,3];
//         rank 2 g2 e2 [0,1), g4 e3 [1,2) -> [0,0,1,1,2];
//         rank 3 g3 e3 [0,2) -> [0,0,0,2,2].
//  step 6: acum e3 = [2,4,5,7]; cum[r-1][e3] = [0,2,4,4].
//   rank 0: i0 e3 G0 -> d0 1 | i1 e3 G1 -> d0 2
//   rank 1: i0 e3 G2 -> d1 1 = 5 | i1 e0 G0 -> d0 0 | i2 e1 G0 -> d1 0 = 4 |
//           i3 e3 G3 -> d1 2 = 6
//   rank 3: i0 e3 G4 -> d2 1 = 9 | i1 e2 G0 -> d2 0 = 8 | i2 e3 G5 -> d3 0 =
//           12 | i3 e3 G6 -> d3 1 = 13
//   src_info[0] = [5,0,1,-1], [1] = [6,4,7,-1], [2] = [13,12,-1,-1],
//   [3] = [14,15,-1,-1]
//  step 7: rank 0 (1,2) -> (1,-3); rank 1 (5,0) keep, (4,6) -> (4,-7);
//          rank 3 (9,8) -> (9,-9), (12,13) -> (12,-14).
//  step 8: rank 0 {1:[2]}, rank 1 {0:[2]}, rank 2 {1:[0]}, rank 3 {0:[1]}.
TEST_CASE("ragged case R3: T mod R = 2 puts one more on ranks 0 and 1") {
  const Config c{4, 4, 2, 2, 1, 1};
  const Routing routing = {{3, 3}, {3, 0, 1, 3}, {}, {3, 2, 3, 3}};
  check_plan(c, routing, {1, 2, 0, 2}, {3, 3, 3, -1},
             {{{1, -3}, {1, 1, 1, 1, 3}, {1, 0}, {5, 0, 1, -1}, {{1, {2}}}},
              {{5, 0, 4, -7}, {0, 1, 1, 1, 3}, {1, 0}, {6, 4, 7, -1}, {{0, {2}}}},
              {{}, {0, 0, 1, 1, 2}, {1, 0}, {13, 12, -1, -1}, {{1, {0}}}},
              {{9, -9, 12, -14}, {0, 0, 0, 2, 2}, {0, 3}, {14, 15, -1, -1}, {{0, {1}}}}});
}

// Case R4: R=2 E=2 K=2 S=3 B=1 tp=2, s = [0, 0]. NvS = round_up(6 + 2*1*1, 2)
//  = 8. T = 0, CAP = [0, 0]: nothing to move, every group empty, every slot
//  -1, no copies.
TEST_CASE("ragged case R4: an empty step") {
  const Config c{2, 2, 2, 3, 1, 2};
  const V none(8, -1);
  check_plan(c, Routing{{}, {}}, {0, 0}, {-1, -1},
             {{{}, {0, 0, 0}, {0, 0}, none, {}}, {{}, {0, 0, 0}, {0, 0}, none, {}}});
}

TEST_CASE("counts of S on every rank plan exactly the full step") {
  const Config c{4, 16, 4, 24, 2, 4};
  const Routing routing = moonep::synthetic_routing(c, 1.5, 5);
  const TokensPerRank full(4, 24);
  const HostPlan a = moonep::plan_reference(c, routing);
  const HostPlan b = moonep::plan_reference(c, routing, nullptr, &full);
  CHECK(!a.tokens_per_rank);
  CHECK(moonep::plan_difference(a, b) == "");
  CHECK(!moonep::is_ragged(c, &full));
  CHECK(!moonep::is_ragged(c, nullptr));
  const TokensPerRank one_short = {24, 24, 23, 24};
  CHECK(moonep::is_ragged(c, &one_short));
  // A different step is a different plan, named as such.
  const Routing cut = moonep::test::cut_to_tokens(c, routing, one_short);
  CHECK(moonep::plan_difference(a, moonep::plan_reference(c, cut, nullptr, &one_short))
            .rfind("tokens_per_rank[2]: 24 vs 23", 0) == 0);
}

TEST_CASE("bad token counts are InputErrors naming the field and rank") {
  const Config c{2, 4, 2, 4, 1, 1};
  const Routing routing = {{0, 1, 0, 1, 1, 0, 2, 0}, {}};
  const auto error_with = [&](const TokensPerRank& t, const Routing& r) {
    return input_error([&] { moonep::plan_reference(c, r, nullptr, &t); });
  };
  CHECK(error_with({4}, routing) == "tokens_per_rank has 1 counts, expected ranks = 2");
  CHECK(error_with({4, 0, 0}, routing) == "tokens_per_rank has 3 counts, expected ranks = 2");
  CHECK(error_with({4, -1}, routing) == "tokens_per_rank[1] = -1 is outside 0..tokens = 0..4");
  CHECK(error_with({5, 0}, routing) == "tokens_per_rank[0] = 5 is outside 0..tokens = 0..4");
  // routing[r] must hold s_r*K ids, no more and no fewer.
  CHECK(error_with({3, 0}, routing) == "routing[0] has 8 entries, expected tokens_per_rank[0]*topk = 3*2 = 6");
  CHECK(error_with({4, 1}, routing) == "routing[1] has 0 entries, expected tokens_per_rank[1]*topk = 1*2 = 2");
  // A full count keeps the words of a full step.
  CHECK(error_with({4, 4}, routing) == "routing[1] has 0 entries, expected tokens*topk = 4*2 = 8");
  // The ids and counts of the tokens a rank holds are checked as before.
  CHECK(error_with({4, 0}, Routing{{0, 1, 0, 1, 1, 0, 2, 4}, {}}) ==
        "routing[0][7] = 4 is not an expert id in [0, 4)");
  const moonep::TokensPerExpert wrong = {{4, 3, 1, 0}, {0, 0, 0, 1}};
  const TokensPerRank t = {4, 0};
  CHECK(input_error([&] { moonep::plan_reference(c, routing, &wrong, &t); }) ==
        "tokens_per_expert[1][3] = 1 but routing[1] names expert 3 0 times");
  // validate_rank_input takes one rank's count.
  CHECK(input_error([&] { moonep::validate_rank_input(c, 1, nullptr, 0, nullptr, 0, 7); }) ==
        "tokens_per_rank[1] = 7 is outside 0..tokens = 0..4");
  CHECK_NOTHROW(moonep::validate_rank_input(c, 1, nullptr, 0, nullptr, 0, 0));
  // And the HostPlanner refuses before anything changes.
  auto planner = moonep::make_host_planner(moonep::Backend::reference, c);
  const TokensPerRank bad = {4, 2};
  CHECK_THROWS_AS(planner->load(routing, nullptr, &bad), moonep::InputError);
}

TEST_CASE("seeded sweep: random ragged steps satisfy every invariant with CAP_r") {
  moonep::impl::SplitMix64 rng{0xFA66EDull};
  const int ranks[] = {1, 2, 3, 4, 5, 7, 8, 16};
  int problems = 0, with_remainder = 0, with_empty_rank = 0, with_copies = 0, with_dups = 0;
  for (int n = 0; n < 300; ++n) {
    const int R = ranks[rng.below(8)];
    const int E = R * (1 + rng.below(n % 3 == 0 ? 1 : 6));
    const int K = n % 17 == 0 ? 32 : 1 + rng.below(6);
    const int S = 1 + rng.below(n % 5 == 0 ? 3 : 40);
    const int B = 1 + rng.below(n % 7 == 0 ? E + 2 : 3);
    const Config c{R, E, K, S, B, 1 + rng.below(n % 4 == 0 ? 1 : 8)};
    const TokensPerRank tokens = moonep::test::ragged_tokens(c, n, rng);
    const Routing routing =
        moonep::test::cut_to_tokens(c, moonep::synthetic_routing(c, 0.5 * rng.below(7), 100 + n), tokens);
    INFO("problem " << n << ": " << moonep::describe(c));
    const HostPlan plan = moonep::plan_reference(c, routing, nullptr, &tokens);
    REQUIRE(check_plan_invariants(c, routing, plan, &tokens) == "");
    ++problems;
    std::int64_t T = 0;
    for (const auto s : tokens) {
      T += static_cast<std::int64_t>(s) * K;
      with_empty_rank += s == 0;
    }
    with_remainder += T % R != 0;
    for (auto e : plan.ranks[0].experts_to_copy) with_copies += e >= 0;
    for (const auto& p : plan.ranks) with_dups += p.dup_counts[0] > 0;
  }
  CHECK(problems == 300);
  CHECK(with_remainder > 50);
  CHECK(with_empty_rank > 100);
  CHECK(with_copies > 50);
  CHECK(with_dups > 50);
}
