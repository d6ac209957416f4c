// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// One Planner reused across many steps gives the same plans as a fresh
// planner per step (no state leaks from one step into the next), for every
// planner variant and the device form's in-process sequence
// (test_exec_spaces.hpp: ReuseVariants; a step graph built once must read
// each step's inputs, whose views move between these steps).
#include "catch2_compat.hpp"

#include "moonep/reference.hpp"
#include "support/ragged_steps.hpp"
#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

TEMPLATE_LIST_TEST_CASE("a reused planner plans each step like a fresh one", "[portable]", ReuseVariants) {
  INFO(variant_name<TestType>());
  Config c;
  c.ranks = 4; c.experts = 32; c.topk = 4; c.tokens = 64; c.copy_slots = 3; c.token_padding = 4;
  InProcessWorld<typename TestType::memory_space> world(c.ranks);
  TestType planner(c, world);
  const Shape shapes[] = {Shape::heavy_skew, Shape::uniform, Shape::one_expert, Shape::skewed,
                          Shape::repeated_in_token, Shape::random_dups};
  for (int step = 0; step < 24; ++step) {
    const Routing routing = make_routing(c, shapes[step % 6], 77 + step);
    INFO("step " << step);
    const HostPlan reused = plan_with(planner, routing);
    const HostPlan fresh = plan_fresh<TestType>(c, routing);
    REQUIRE(plan_difference(fresh, reused) == "");
    REQUIRE(plan_difference(plan_reference(c, routing), reused) == "");
  }
}

// One planner, its input views allocated once for S tokens and its counts
// view for R ranks, alternating ragged and full steps (docs/spec/planning.md
// "Ragged steps"): each plan matches the reference, nothing of a larger step
// leaks into a smaller one. Past s_r*K the routing views hold ids that are
// not experts at all: a ragged step must not read them. Every variant
// (the CUDA specialization reads the counts on the device only, and writes
// RankPlanView::entries there).
TEMPLATE_LIST_TEST_CASE("a reused planner alternates ragged and full steps", "[portable][ragged]", ReuseVariants) {
  INFO(variant_name<TestType>());
  using Mem = typename TestType::memory_space;
  const Config c = Config{4, 32, 4, 64, 3, 4};
  InProcessWorld<Mem> world(c.ranks);
  TestType planner(c, world);
  std::vector<Kokkos::View<std::int32_t*, Mem>> routing_views;
  std::vector<typename TestType::input_view> routing_in;
  for (int r = 0; r < c.ranks; ++r) {
    routing_views.emplace_back("routing", c.entries());
    routing_in.push_back(routing_views.back());
  }
  Kokkos::View<std::int32_t*, Mem> counts("tokens_per_rank", c.ranks);
  const typename TestType::input_view counts_in = counts;
  const Shape shapes[] = {Shape::heavy_skew, Shape::uniform, Shape::one_expert, Shape::skewed,
                          Shape::repeated_in_token, Shape::random_dups};
  Rng rng{4242};
  for (int step = 0; step < 24; ++step) {
    INFO("step " << step);
    const bool ragged = step % 2 == 1;
    const TokensPerRank tokens = ragged ? ragged_tokens(c, step / 2, rng) : TokensPerRank(c.ranks, c.tokens);
    const Routing full = make_routing(c, shapes[step % 6], 500 + step);
    const Routing routing = cut_to_tokens(c, full, tokens);
    for (int r = 0; r < c.ranks; ++r) {
      std::vector<std::int32_t> staged = routing[r];
      staged.resize(static_cast<std::size_t>(c.entries()), c.experts);  // not an expert id
      Kokkos::deep_copy(routing_views[r], Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                              staged.data(), staged.size()));
    }
    Kokkos::deep_copy(counts, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                  tokens.data(), tokens.size()));
    HostPlan got;
    if (ragged || step % 4 == 2) {
      planner.plan(routing_in, nullptr, &counts_in);  // step 2, 6, ...: a full step given as counts
      got = to_host(planner);
      got.tokens_per_rank = tokens;
    } else {
      planner.plan(routing_in);
      got = to_host(planner);
    }
    for (int l = 0; l < c.ranks; ++l) {
      std::int32_t n = -1;
      Kokkos::deep_copy(Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&n, 1),
                        planner.last_plan().ranks[l].entries);
      CHECK(n == tokens[l] * c.topk);
    }
    REQUIRE(plan_difference(plan_reference(c, routing, nullptr, &tokens), got) == "");
  }
}
