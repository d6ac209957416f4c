// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every Planner variant (test_exec_spaces.hpp: the portable phases on each
// enabled execution space, the CUDA specialization on Kokkos::Cuda) against
// the reference planner (the executable spec): bit-exact plans (dup
// structures as sets) over a randomized sweep of configurations and the
// corner cases docs/spec/planning.md singles out.
#include "catch2_compat.hpp"

#include <string>
#include <tuple>
#include <type_traits>

#include "moonep/backend.hpp"
#include "moonep/reference.hpp"
#include "support/plan_invariants.hpp"
#include "support/ragged_steps.hpp"
#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

namespace {

const int kSweepRanks[] = {1, 2, 3, 4, 5, 8, 16};
const SweepShape kSweep{6, 11, 48, 13};

template <class P>
std::string check_same(const Config& c, const Routing& routing, bool give_tpe = false) {
  const TokensPerExpert tpe = count_tokens_per_expert(c, routing);
  const HostPlan expected = plan_reference(c, routing);
  const HostPlan got = plan_fresh<P>(c, routing, give_tpe ? &tpe : nullptr);
  return plan_difference(expected, got);
}

// Whether one of the planners P... runs on Exec.
template <class Exec, class... P>
constexpr bool covers(std::tuple<P...>*) {
  bool any = false;
  for (bool on : {false, std::is_same<typename P::execution_space, Exec>::value...}) any = any || on;
  return any;
}

}  // namespace

TEST_CASE("the portable variants include Kokkos' default execution spaces", "[portable]") {
  // The list is built from every backend Kokkos enables; whatever this Kokkos
  // has, the spaces it runs by default (e.g. Kokkos::Threads in a Threads
  // build, Cuda in a CUDA one) must be among them.
  INFO("default " << Kokkos::DefaultExecutionSpace::name() << ", default host "
                  << Kokkos::DefaultHostExecutionSpace::name());
  CHECK(covers<Kokkos::DefaultExecutionSpace>(static_cast<PortableVariants*>(nullptr)));
#if !defined(MOONEP_TEST_DEVICE_SPACES_ONLY)  // that build lists the device spaces alone (test_exec_spaces.hpp)
  CHECK(covers<Kokkos::DefaultHostExecutionSpace>(static_cast<PortableVariants*>(nullptr)));
#endif
}

TEMPLATE_LIST_TEST_CASE("every planner variant matches the reference on a randomized sweep", "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  Rng rng{2024};
  int checked = 0;
  for (int trial = 0; trial < 360; ++trial) {
    const Config c = sweep_config(rng, trial, kSweepRanks[rng.below(7)], kSweep);
    const Shape shape = kShapes[trial % 6];
    const Routing routing = make_routing(c, shape, 1000 + trial);
    INFO("trial " << trial << ": " << describe(c) << " shape " << static_cast<int>(shape));
    REQUIRE(check_same<TestType>(c, routing, trial % 2 == 1) == "");
    ++checked;
  }
  CHECK(checked == 360);
}

TEMPLATE_LIST_TEST_CASE("every planner variant matches the reference on named corner cases", "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  SECTION("one rank") { REQUIRE(check_same<TestType>(Config{1, 4, 2, 16, 2, 4}, make_routing(Config{1, 4, 2, 16, 2, 4}, Shape::skewed, 1)) == ""); }
  SECTION("E equals R, K = 1") {
    const Config c = Config{8, 8, 1, 64, 1, 1};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::heavy_skew, 2)) == "");
  }
  SECTION("K = 32, tokens naming one expert 32 times") {
    const Config c = Config{4, 16, 32, 8, 2, 4};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::repeated_in_token, 3)) == "");
  }
  SECTION("S = 1") {
    const Config c = Config{4, 8, 4, 1, 2, 2};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::random_dups, 4)) == "");
  }
  SECTION("every entry on one expert") {
    const Config c = Config{8, 32, 4, 32, 3, 8};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::one_expert, 5), true) == "");
  }
  SECTION("B larger than the remote experts") {
    const Config c = Config{4, 16, 4, 64, 16, 4};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::heavy_skew, 6)) == "");
  }
}

TEMPLATE_LIST_TEST_CASE("every planner variant matches the reference on a few large configurations", "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  SECTION("R = 128, E = 1024") {
    const Config c = Config{128, 1024, 8, 32, 4, 8};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::heavy_skew, 7)) == "");
  }
  SECTION("S = 16384") {
    const Config c = Config{8, 64, 8, 16384, 4, 16};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::skewed, 8)) == "");
  }
  SECTION("E = 1024, R = 16") {
    const Config c = Config{16, 1024, 8, 512, 8, 4};
    REQUIRE(check_same<TestType>(c, make_routing(c, Shape::skewed, 9), true) == "");
  }
}

// Ragged steps (docs/spec/planning.md "Ragged steps") on every planner
// variant: the same plans as the reference, whose hand-computed ragged
// cases are in test_reference_ragged.cpp, and every invariant with CAP_r.
// The CUDA specialization gets S*K ids per rank, those past s_r*K no
// expert (routing_for): reading one would fail the step.
TEMPLATE_LIST_TEST_CASE("every planner variant matches the reference on randomized ragged steps", "[portable][ragged]",
                        PlannerVariants) {
  INFO(variant_name<TestType>());
  Rng rng{0x2A66ED};
  int empty_ranks = 0, full_ranks = 0, remainders = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const Config c = sweep_config(rng, trial, kSweepRanks[rng.below(7)], kSweep);
    const int R = c.ranks, K = c.topk, S = c.tokens;
    const TokensPerRank tokens = ragged_tokens(c, trial, rng);
    const Routing routing = cut_to_tokens(c, make_routing(c, kShapes[trial % 6], 3000 + trial), tokens);
    INFO("trial " << trial << ": " << describe(c));
    const HostPlan expected = plan_reference(c, routing, nullptr, &tokens);
    const TokensPerExpert tpe = count_tokens_per_expert(c, routing);
    const HostPlan got = plan_fresh<TestType>(c, routing, trial % 2 ? &tpe : nullptr, &tokens);
    REQUIRE(plan_difference(expected, got) == "");
    REQUIRE(check_plan_invariants(c, routing, got, &tokens) == "");
    std::int64_t T = 0;
    for (const auto s : tokens) {
      empty_ranks += s == 0;
      full_ranks += s == S;
      T += static_cast<std::int64_t>(s) * K;
    }
    remainders += T % R != 0;
  }
  CHECK(empty_ranks > 100);
  CHECK(full_ranks > 100);
  CHECK(remainders > 30);
}

TEMPLATE_LIST_TEST_CASE("ragged steps at sizes where the kernels cut ranks into several blocks", "[portable][ragged]",
                        PlannerVariants) {
  INFO(variant_name<TestType>());
  // S*K = 131072 entries per rank: several host blocks (2048+) and many
  // device blocks (<= 1024; the CUDA kernel's 32 blocks per rank), so the
  // cut falls inside, at and past blocks.
  const Config c = Config{4, 64, 8, 16384, 4, 16};
  const TokensPerRank tokens = {16384, 0, 256, 9999};
  const Routing routing = cut_to_tokens(c, make_routing(c, Shape::skewed, 8), tokens);
  const HostPlan got = plan_fresh<TestType>(c, routing, nullptr, &tokens);
  REQUIRE(plan_difference(plan_reference(c, routing, nullptr, &tokens), got) == "");
  CHECK(check_plan_invariants(c, routing, got, &tokens) == "");
}

TEST_CASE("the portable HostPlanner plans ragged steps like the reference, full ones between", "[portable][ragged]") {
  const Config c = Config{4, 16, 4, 32, 2, 4};
  auto planner = make_host_planner(Backend::portable, c);
  Rng rng{99};
  for (int step = 0; step < 8; ++step) {
    INFO("step " << step);
    const Routing full = make_routing(c, Shape::skewed, 40 + step);
    if (step % 2 == 0) {
      const TokensPerRank tokens = ragged_tokens(c, step, rng);
      const Routing routing = cut_to_tokens(c, full, tokens);
      planner->load(routing, nullptr, &tokens);
      planner->step();
      const HostPlan got = planner->result();
      REQUIRE(got.tokens_per_rank == std::optional<TokensPerRank>(tokens));
      REQUIRE(plan_difference(plan_reference(c, routing, nullptr, &tokens), got) == "");
    } else {
      planner->load(full);
      planner->step();
      REQUIRE(plan_difference(plan_reference(c, full), planner->result()) == "");
    }
  }
}
