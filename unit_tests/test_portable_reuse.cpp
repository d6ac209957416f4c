// One Planner reused across many steps gives the same plans as a fresh
// planner per step (no state leaks from one step into the next), for every
// planner variant (test_exec_spaces.hpp).
#include "catch2_compat.hpp"

#include "moonep/reference.hpp"
#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

TEMPLATE_LIST_TEST_CASE("a reused planner plans each step like a fresh one", "[portable]", PlannerVariants) {
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
