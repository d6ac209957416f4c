// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// docs/spec/planning.md "Bad input" at the API level: every rule is rejected
// with a moonep::InputError whose one-line message names the field (and rank
// and index where they apply), and nothing is left half done: a valid plan
// after a rejected one is still right.
#include "catch2_compat.hpp"

#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace {

using moonep::Config;
using moonep::Routing;
using moonep::TokensPerExpert;

// The InputError's message, or "(nothing thrown)" / "(other exception ...)".
std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const moonep::InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(other exception: ") + e.what() + ")";
  }
  return "(nothing thrown)";
}

// Checks that f throws InputError with one line containing every part.
void check_rejects(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string why = input_error(f);
  INFO("message: " << why);
  CHECK(why.find('\n') == std::string::npos);
  for (const auto& part : parts) {
    INFO("expected to mention: " << part);
    CHECK(why.find(part) != std::string::npos);
  }
}

// R=2 E=4 K=2 S=4 (hand case 1 of test_reference_hand_cases.cpp).
const Config kGood = Config{2, 4, 2, 4, 1, 1};
const Routing kGoodRouting = {{0, 1, 0, 1, 1, 0, 2, 0}, {0, 1, 3, 0, 1, 1, 0, 2}};
const std::vector<std::int32_t> kGoodRank1Dst = {13, 5, 10, -15, 6, -8, 15, -10};

}  // namespace

TEST_CASE("validate rejects each bad configuration, naming the field") {
  struct Bad {
    Config c;
    std::vector<std::string> parts;
  };
  const std::vector<Bad> bad = {
      {Config{0, 4, 2, 4, 1, 1}, {"ranks", "1..128", "0"}},
      {Config{-3, 4, 2, 4, 1, 1}, {"ranks", "-3"}},
      {Config{129, 129, 2, 4, 1, 1}, {"ranks", "129"}},
      {Config{2, 0, 2, 4, 1, 1}, {"experts", "0"}},
      {Config{3, 8, 2, 4, 1, 1}, {"experts", "multiple of ranks", "8", "3"}},
      {Config{4, 2, 2, 4, 1, 1}, {"experts", "multiple of ranks"}},
      {Config{2, 4, 0, 4, 1, 1}, {"topk", "1..32", "0"}},
      {Config{2, 4, 33, 4, 1, 1}, {"topk", "33"}},
      {Config{2, 4, -1, 4, 1, 1}, {"topk", "-1"}},
      {Config{2, 4, 2, 0, 1, 1}, {"tokens", "0"}},
      {Config{2, 4, 2, -5, 1, 1}, {"tokens", "-5"}},
      {Config{2, 4, 2, 4, 0, 1}, {"copy_slots", "0"}},
      {Config{2, 4, 2, 4, -1, 1}, {"copy_slots", "-1"}},
      {Config{2, 4, 2, 4, 1, 0}, {"token_padding", "0"}},
      {Config{2, 4, 2, 4, 1, -8}, {"token_padding", "-8"}},
      // R*NvS = 2 * 2^30 = 2^31, one past INT32_MAX.
      {Config{2, 2, 1, 1 << 30, 1, 1}, {"ranks*slots", "int32"}},
      // Padding pushes it over: NvS = round_up(2^30 + 2*(2^30-1), 2^30) = 3*2^30.
      {Config{1, 1, 1, 1 << 30, 1, 1 << 30}, {"ranks*slots", "int32"}},
      // 128 ranks, K=32, S=2^19: NvS = 2^24, R*NvS = 2^31.
      {Config{128, 128, 32, 1 << 19, 1, 1}, {"ranks*slots"}},
      // Absurd sizes whose NvS does not even fit in 64 bits when summed.
      {Config{1, INT_MAX, 32, INT_MAX, 1, INT_MAX}, {"ranks*slots"}},
      {Config{128, 128 * (INT_MAX / 128), 32, INT_MAX, 1, INT_MAX}, {"ranks*slots"}},
  };
  for (const auto& b : bad) {
    INFO(moonep::describe(b.c));
    check_rejects([&] { moonep::validate(b.c); }, b.parts);
    // The same rule at every entry point.
    check_rejects([&] { moonep::validate_problem(b.c, Routing{}); }, b.parts);
    check_rejects([&] { moonep::plan_reference(b.c, Routing{}); }, b.parts);
    check_rejects([&] { moonep::make_host_planner(moonep::Backend::reference, b.c); }, b.parts);
  }
}

TEST_CASE("validate accepts the limits themselves") {
  CHECK_NOTHROW(moonep::validate(Config{1, 1, 1, 1, 1, 1}));
  CHECK_NOTHROW(moonep::validate(Config{128, 128, 32, 1, 1, 1}));
  CHECK_NOTHROW(moonep::validate(Config{128, 256, 32, 3, 1000, 64}));
  // R*NvS exactly INT32_MAX (2^31-1 is odd and prime: R=1, NvS=S*K).
  CHECK(Config{1, 1, 1, INT_MAX, 1, 1}.slots() == INT_MAX);
  CHECK_NOTHROW(moonep::validate(Config{1, 1, 1, INT_MAX, 1, 1}));
  // R*NvS = 2^31 - 2 with two ranks.
  CHECK_NOTHROW(moonep::validate(Config{2, 2, 1, (1 << 30) - 1, 1, 1}));
}

TEST_CASE("validate_problem rejects bad routings and tokens_per_expert, naming rank and index") {
  const Config c = kGood;
  const auto good_tpe = moonep::count_tokens_per_expert(c, kGoodRouting);

  SECTION("wrong number of rank arrays") {
    check_rejects([&] { moonep::plan_reference(c, Routing{kGoodRouting[0]}); },
                  {"routing", "1 rank arrays", "ranks = 2"});
    Routing three = kGoodRouting;
    three.push_back(kGoodRouting[0]);
    check_rejects([&] { moonep::plan_reference(c, three); }, {"routing", "3 rank arrays"});
  }
  SECTION("a rank's routing of the wrong length") {
    Routing r = kGoodRouting;
    r[1].pop_back();
    check_rejects([&] { moonep::plan_reference(c, r); }, {"routing[1]", "7 entries", "8"});
    r = kGoodRouting;
    r[0].push_back(0);
    check_rejects([&] { moonep::plan_reference(c, r); }, {"routing[0]", "9 entries"});
  }
  SECTION("expert id below 0") {
    Routing r = kGoodRouting;
    r[1][3] = -1;
    check_rejects([&] { moonep::plan_reference(c, r); }, {"routing[1][3]", "-1", "[0, 4)"});
  }
  SECTION("expert id at or above E") {
    Routing r = kGoodRouting;
    r[0][5] = 4;
    check_rejects([&] { moonep::plan_reference(c, r); }, {"routing[0][5]", "4", "[0, 4)"});
    r[0][5] = INT32_MAX;
    check_rejects([&] { moonep::plan_reference(c, r); }, {"routing[0][5]", "2147483647"});
  }
  SECTION("tokens_per_expert with the wrong number of rank arrays") {
    const TokensPerExpert one = {good_tpe[0]};
    check_rejects([&] { moonep::plan_reference(c, kGoodRouting, &one); },
                  {"tokens_per_expert", "1 rank arrays"});
  }
  SECTION("tokens_per_expert of the wrong length") {
    TokensPerExpert t = good_tpe;
    t[1].push_back(0);
    check_rejects([&] { moonep::plan_reference(c, kGoodRouting, &t); },
                  {"tokens_per_expert[1]", "5 counts", "experts = 4"});
    t = good_tpe;
    t[0].pop_back();
    check_rejects([&] { moonep::plan_reference(c, kGoodRouting, &t); }, {"tokens_per_expert[0]", "3 counts"});
  }
  SECTION("tokens_per_expert that does not match the routing") {
    // tpe[1] = [3,3,1,1]; move one count from e2 to e3 (the sums still agree).
    TokensPerExpert t = good_tpe;
    REQUIRE(t[1] == std::vector<std::int32_t>{3, 3, 1, 1});
    t[1][2] = 0;
    t[1][3] = 2;
    check_rejects([&] { moonep::plan_reference(c, kGoodRouting, &t); },
                  {"tokens_per_expert[1][2]", "= 0", "1 times"});
  }
  SECTION("validate_rank_input alone names the rank it is given") {
    const std::vector<std::int32_t> topk = {0, 1, 7, 0, 1, 1, 0, 2};
    check_rejects([&] { moonep::validate_rank_input(c, 1, topk.data(), 8, nullptr, 0); },
                  {"routing[1][2]", "7"});
    check_rejects([&] { moonep::validate_rank_input(c, 0, topk.data(), 6, nullptr, 0); },
                  {"routing[0]", "6 entries"});
    const std::vector<std::int32_t> ok = kGoodRouting[1];
    const std::vector<std::int32_t> tpe = {3, 3, 1, 2};
    check_rejects([&] { moonep::validate_rank_input(c, 1, ok.data(), 8, tpe.data(), 4); },
                  {"tokens_per_expert[1][3]", "2"});
    check_rejects([&] { moonep::validate_rank_input(c, 1, ok.data(), 8, tpe.data(), 3); },
                  {"tokens_per_expert[1]", "3 counts"});
    const std::vector<std::int32_t> right = {3, 3, 1, 1};
    CHECK_NOTHROW(moonep::validate_rank_input(c, 1, ok.data(), 8, right.data(), 4));
  }
}

TEST_CASE("a valid plan after rejected ones is still right") {
  const auto expected = moonep::plan_reference(kGood, kGoodRouting);
  REQUIRE(expected.ranks[1].dst == kGoodRank1Dst);

  SECTION("plan_reference") {
    Routing bad = kGoodRouting;
    bad[1][7] = 99;
    CHECK_THROWS_AS(moonep::plan_reference(kGood, bad), moonep::InputError);
    CHECK_THROWS_AS(moonep::plan_reference(Config{2, 4, 2, 4, 0, 1}, kGoodRouting), moonep::InputError);
    const auto again = moonep::plan_reference(kGood, kGoodRouting);
    CHECK(moonep::plan_difference(again, expected) == "");
    CHECK(again.ranks[1].dst == kGoodRank1Dst);
  }
  SECTION("the reference HostPlanner keeps its staged input when a load is rejected") {
    auto planner = moonep::make_host_planner(moonep::Backend::reference, kGood);
    planner->load(kGoodRouting);
    planner->step();
    CHECK(moonep::plan_difference(planner->result(), expected) == "");

    Routing bad = kGoodRouting;
    bad[0][0] = -7;
    CHECK_THROWS_AS(planner->load(bad), moonep::InputError);
    auto bad_tpe = moonep::count_tokens_per_expert(kGood, kGoodRouting);
    bad_tpe[0][0] += 1;
    CHECK_THROWS_AS(planner->load(kGoodRouting, &bad_tpe), moonep::InputError);
    CHECK_THROWS_AS(planner->load(Routing{kGoodRouting[0]}), moonep::InputError);
    planner->step();  // still the last good input
    CHECK(moonep::plan_difference(planner->result(), expected) == "");

    // And a different valid input afterwards plans that input.
    const Routing other = {{3, 2, 3, 2, 3, 2, 3, 2}, {0, 0, 0, 0, 0, 0, 0, 0}};
    planner->load(other);
    planner->step();
    CHECK(moonep::plan_difference(planner->result(), moonep::plan_reference(kGood, other)) == "");
  }
}

TEST_CASE("a copy_slots so large that the [R][E+B] tables overflow int32 is rejected") {
  moonep::Config c;
  c.ranks = 2; c.experts = 4; c.topk = 1; c.tokens = 1; c.token_padding = 1;
  c.copy_slots = 2147483647 - 3;
  try {
    moonep::validate(c);
    FAIL("nothing thrown");
  } catch (const moonep::InputError& e) {
    CHECK(std::string(e.what()).find("experts+copy_slots") != std::string::npos);
  }
}
