// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The planner interface (moonep/impl/planner_concept.hpp) accepts every
// implementation this build has and refuses a type that misses any one of
// its parts: a planner without local_ranks(), one whose plan() returns a
// copy, one that can be copied, one whose input_view is not
// View<const int32_t*, memory_space>. The refusals are what keeps a path
// from drifting from the others unnoticed.
#include "catch2_compat.hpp"

#include <cstdint>
#include <vector>

#include "moonep/planner.hpp"
#include "moonep/world.hpp"

namespace {

using namespace moonep;
using namespace moonep::impl::planner_concept;

using Space = Kokkos::DefaultHostExecutionSpace;
using Mem = Space::memory_space;

// A planner that has everything; the fakes below each break one part.
struct Good {
  using execution_space = Space;
  using memory_space = Mem;
  using world_type = World<Mem>;
  using input_view = Kokkos::View<const std::int32_t*, Mem>;
  using plan_type = Plan<Mem>;
  static constexpr bool uses_cuda_specialization = false;
  static const char* path_name() { return "good"; }
  Good(const Config&, world_type&, const execution_space& = execution_space()) {}
  Good(const Good&) = delete;
  const Config& config() const { return config_; }
  world_type& world() const { return *world_; }
  const std::vector<int>& local_ranks() const { return local_; }
  const plan_type& last_plan() const { return plan_; }
  const plan_type& plan(const std::vector<input_view>&, const std::vector<input_view>* = nullptr,
                        const input_view* = nullptr) {
    return plan_;
  }
  Config config_{};
  world_type* world_ = nullptr;
  std::vector<int> local_;
  plan_type plan_;
};

struct NoLocalRanks : Good {
  using Good::Good;
  void local_ranks() const = delete;
};
struct PlanByValue : Good {
  using Good::Good;
  plan_type plan(const std::vector<input_view>&, const std::vector<input_view>* = nullptr,
                 const input_view* = nullptr) {
    return plan_;
  }
};
struct Copyable {
  using execution_space = Space;
  using world_type = World<Mem>;
  Copyable(const Config&, world_type&, const execution_space&) {}
};
struct WrongInputView : Good {
  using Good::Good;
  using input_view = Kokkos::View<std::int32_t*, Mem>;
};

}  // namespace

TEST_CASE("the planner interface accepts every implementation of this build", "[concept]") {
  STATIC_REQUIRE(has_types<Good>::value && constructible<Good>::value && plans<Good>::value &&
                 has_accessors<Good>::value);
  using Default = impl::planner_impl_t<Kokkos::DefaultExecutionSpace, Automatic>;
  using Portable = impl::planner_impl_t<Kokkos::DefaultExecutionSpace, PortablePhases>;
  using Host = impl::planner_impl_t<Kokkos::DefaultHostExecutionSpace, Automatic>;
  STATIC_REQUIRE(has_types<Default>::value && constructible<Default>::value && plans<Default>::value &&
                 has_accessors<Default>::value);
  STATIC_REQUIRE(has_types<Portable>::value && constructible<Portable>::value && plans<Portable>::value &&
                 has_accessors<Portable>::value);
  STATIC_REQUIRE(has_types<Host>::value && constructible<Host>::value && plans<Host>::value &&
                 has_accessors<Host>::value);
}

TEST_CASE("the planner interface refuses a type that misses any one part", "[concept]") {
  STATIC_REQUIRE_FALSE(has_accessors<NoLocalRanks>::value);
  STATIC_REQUIRE_FALSE(plans<PlanByValue>::value);
  STATIC_REQUIRE_FALSE(constructible<Copyable>::value);
  STATIC_REQUIRE_FALSE(has_types<WrongInputView>::value);
  STATIC_REQUIRE_FALSE(has_types<int>::value);
}
