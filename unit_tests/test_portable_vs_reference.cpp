// Every Planner variant (test_exec_spaces.hpp: the portable phases on each
// enabled execution space, the CUDA specialization on Kokkos::Cuda) against
// the reference planner (the executable spec): bit-exact plans (dup
// structures as sets) over a randomized sweep of configurations and the
// corner cases docs/spec/planning.md singles out.
#include "catch2_compat.hpp"

#include <string>

#include "moonep/reference.hpp"
#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

namespace {

template <class P>
std::string check_same(const Config& c, const Routing& routing, bool give_tpe = false) {
  const TokensPerExpert tpe = count_tokens_per_expert(c, routing);
  const HostPlan expected = plan_reference(c, routing);
  const HostPlan got = plan_fresh<P>(c, routing, give_tpe ? &tpe : nullptr);
  return plan_difference(expected, got);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every planner variant matches the reference on a randomized sweep", "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  Rng rng{2024};
  const int ranks_choice[] = {1, 2, 3, 4, 5, 8, 16};
  const Shape shapes[] = {Shape::uniform, Shape::skewed, Shape::heavy_skew,
                          Shape::one_expert, Shape::repeated_in_token, Shape::random_dups};
  int checked = 0;
  for (int trial = 0; trial < 360; ++trial) {
    const int R = ranks_choice[rng.below(7)];
    const int epn = 1 + rng.below(trial % 3 == 0 ? 1 : 6);  // a third with E == R
    const int K = trial % 11 == 0 ? 32 : 1 + rng.below(8);
    const int S = trial % 13 == 0 ? 1 : 1 + rng.below(48);
    const int B = 1 + rng.below(trial % 5 == 0 ? 12 : 3);    // some with B > remote experts
    const int tp = trial % 4 == 0 ? 1 : 1 + rng.below(9);
    const Config c = Config{R, R * epn, K, S, B, tp};
    const Shape shape = shapes[trial % 6];
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
