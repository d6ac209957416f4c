// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ragged steps (docs/spec/planning.md "Ragged steps") in the reference
// planner: counts of S are the full step, the validation of the counts, and
// a seeded sweep checking every invariant with CAP_r. The hand-computed
// ragged plans are cases R1-R4 of test_reference_hand_cases.cpp.
#include "catch2_compat.hpp"

#include <cstdint>
#include <functional>
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

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

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
