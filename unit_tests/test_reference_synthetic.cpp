// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// synthetic_routing and count_tokens_per_expert (moonep/synthetic.hpp):
// deterministic in the seed, well-formed routings, K distinct experts per
// token when K <= E, and skew that grows with the imbalance.
#include "catch2_compat.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "moonep/synthetic.hpp"

namespace {

moonep::Config config(int R, int E, int K, int S) {
  moonep::Config c;
  c.ranks = R; c.experts = E; c.topk = K; c.tokens = S;
  return c;
}

// Largest expert total over the mean total: 1 for a perfectly even routing.
double max_over_mean(const moonep::Config& c, const moonep::Routing& routing) {
  std::vector<std::int64_t> total(c.experts, 0);
  for (const auto& rank : routing)
    for (auto e : rank) ++total[e];
  const double mean = static_cast<double>(c.ranks) * c.entries() / c.experts;
  return *std::max_element(total.begin(), total.end()) / mean;
}

}  // namespace

TEST_CASE("synthetic_routing is deterministic in its seed") {
  const auto c = config(4, 32, 4, 64);
  for (double imbalance : {0.0, 1.0, 3.0}) {
    INFO("imbalance " << imbalance);
    const auto a = moonep::synthetic_routing(c, imbalance, 42);
    CHECK(moonep::synthetic_routing(c, imbalance, 42) == a);
    CHECK(moonep::synthetic_routing(c, imbalance, 43) != a);
  }
  // The seed, not the imbalance alone, picks the hot experts.
  CHECK(moonep::synthetic_routing(c, 1.0, 1) != moonep::synthetic_routing(c, 1.0, 2));
}

TEST_CASE("synthetic_routing: shape, ids in range, K distinct experts per token when K <= E") {
  struct Case {
    moonep::Config c;
    double imbalance;
  };
  const std::vector<Case> cases = {
      {config(1, 1, 1, 5), 0},       {config(2, 8, 2, 100), 1},
      {config(4, 16, 16, 20), 3},    // K == E: every token names every expert
      {config(3, 96, 32, 30), 3},    // K = 32 under heavy skew
      {config(8, 64, 8, 50), 5},     // skew far beyond the typical
      {config(2, 2, 2, 40), 3},      {config(2, 8, 1, 300), 0},
      {config(128, 128, 4, 2), 1},
  };
  for (const auto& k : cases) {
    const auto& c = k.c;
    INFO(moonep::describe(c) << " imbalance " << k.imbalance);
    for (std::uint64_t seed : {0ull, 1ull, 0xFFFFFFFFFFFFFFFFull}) {
      const auto routing = moonep::synthetic_routing(c, k.imbalance, seed);
      REQUIRE(static_cast<int>(routing.size()) == c.ranks);
      for (const auto& rank : routing) {
        REQUIRE(static_cast<std::int64_t>(rank.size()) == c.entries());
        for (auto e : rank) REQUIRE((e >= 0 && e < c.experts));
        for (int s = 0; s < c.tokens; ++s) {
          const std::set<std::int32_t> experts(rank.begin() + s * c.topk, rank.begin() + (s + 1) * c.topk);
          REQUIRE(static_cast<int>(experts.size()) == c.topk);
        }
      }
    }
  }
}

TEST_CASE("synthetic_routing with K > E stays in range") {
  const auto c = config(2, 2, 8, 10);
  const auto routing = moonep::synthetic_routing(c, 1.0, 3);
  for (const auto& rank : routing) {
    REQUIRE(static_cast<std::int64_t>(rank.size()) == c.entries());
    for (auto e : rank) CHECK((e >= 0 && e < c.experts));
  }
}

TEST_CASE("synthetic_routing skew grows with the imbalance") {
  const auto c = config(4, 64, 2, 1024);  // 8192 entries, 128 per expert on average
  double skew[3] = {0, 0, 0};
  const double imbalances[3] = {0.0, 1.0, 3.0};
  for (int i = 0; i < 3; ++i)
    for (std::uint64_t seed = 1; seed <= 5; ++seed)
      skew[i] += max_over_mean(c, moonep::synthetic_routing(c, imbalances[i], seed)) / 5;
  INFO("max/mean at imbalance 0, 1, 3: " << skew[0] << ", " << skew[1] << ", " << skew[2]);
  // Uniform popularity: the fullest expert is within a few standard
  // deviations (sqrt(128) ~ 11 entries) of the mean.
  CHECK(skew[0] < 1.5);
  CHECK(skew[1] > skew[0] + 0.5);
  CHECK(skew[2] > skew[1] + 1.0);

  // Uniform popularity uses every expert.
  std::vector<int> seen(c.experts, 0);
  for (const auto& rank : moonep::synthetic_routing(c, 0.0, 9))
    for (auto e : rank) seen[e] = 1;
  CHECK(std::count(seen.begin(), seen.end(), 1) == c.experts);
}

TEST_CASE("count_tokens_per_expert counts every rank's entries per expert") {
  const auto c = config(2, 4, 2, 4);
  const moonep::Routing routing = {{0, 1, 0, 1, 1, 0, 2, 0}, {0, 1, 3, 0, 1, 1, 0, 2}};
  const moonep::TokensPerExpert want = {{4, 3, 1, 0}, {3, 3, 1, 1}};
  CHECK(moonep::count_tokens_per_expert(c, routing) == want);
}
