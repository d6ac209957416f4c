// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A Planner made before Kokkos::initialize is a clear RuntimeError (not an
// abort inside Kokkos), and the world it was given stays usable: once Kokkos
// runs, a planner on the same world plans like the reference. Own main: this
// binary must start without Kokkos.
#include "catch2_compat.hpp"
#include "catch2_session.hpp"

#include <string>

#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/planner.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

using namespace moonep;
using Exec = Kokkos::DefaultHostExecutionSpace;

TEST_CASE("a planner before Kokkos::initialize is a RuntimeError and the world stays usable") {
  REQUIRE_FALSE(Kokkos::is_initialized());
  const Config c{2, 8, 2, 16, 2, 4};
  {  // the world must go before Kokkos::finalize: it holds the planner's buffer
    InProcessWorld<Exec::memory_space> world(c.ranks);
    std::string message;
    try {
      Planner<Exec> planner(c, world);
    } catch (const RuntimeError& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("Kokkos is not initialized") != std::string::npos);
    CHECK_FALSE(world.has_planner());
    // The portable HostPlanner holds such a Planner: the same error.
    CHECK_THROWS_AS(make_host_planner(Backend::portable, c), RuntimeError);

    Kokkos::initialize();
    {
      Planner<Exec> planner(c, world);
      const Routing routing = synthetic_routing(c, 1.0, 5);
      std::vector<Planner<Exec>::input_view> views;
      for (const auto& row : routing) {
        Kokkos::View<std::int32_t*, Exec::memory_space> v("routing", row.size());
        for (std::size_t i = 0; i < row.size(); ++i) v(i) = row[i];
        views.push_back(v);
      }
      planner.plan(views);
      HostPlan got;
      got.config = c;
      for (std::size_t i = 0; i < views.size(); ++i) got.ranks.push_back(planner.last_plan().to_host(i));
      CHECK(plan_difference(plan_reference(c, routing), got) == "");
    }
  }
  Kokkos::finalize();
}

int main(int argc, char* argv[]) { return moonep::test::run_catch_session(argc, argv); }
