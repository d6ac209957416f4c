// The portable planner names its kernels and regions after the phase and
// path they belong to (moonep::portable::...), so Kokkos Tools timelines
// show where a step goes.
#include "catch2_compat.hpp"

#include <set>
#include <string>

#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

namespace {
std::set<std::string> g_kernels, g_regions;
void on_kernel(const char* name, std::uint32_t, std::uint64_t*) { g_kernels.insert(name); }
void on_region(const char* name) { g_regions.insert(name); }
}  // namespace

TEST_CASE("kernels and regions carry moonep::portable labels") {
  Config c;
  c.ranks = 4; c.experts = 16; c.topk = 2; c.tokens = 32; c.copy_slots = 2; c.token_padding = 2;
  InProcessWorld<Mem> world(c.ranks);
  PortablePlanner planner(c, world);
  const auto views = to_views(make_routing(c, Shape::skewed, 1));
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_kernel);
  Kokkos::Tools::Experimental::set_push_region_callback(on_region);
  planner.plan(views);
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  for (const char* k : {"moonep::portable::phaseA_clear_slots", "moonep::portable::phaseC1_stable_scatter",
                        "moonep::portable::phaseB_expert_split", "moonep::portable::phaseB_layout",
                        "moonep::portable::phaseC2_destinations_dedup", "moonep::portable::phaseD_dup_loffs",
                        "moonep::world::inprocess_put_runs"}) {
    INFO(k);
    CHECK(g_kernels.count(k) == 1);
  }
  for (const char* r : {"moonep::portable::plan", "moonep::portable::validate", "moonep::portable::phaseA",
                        "moonep::portable::phaseB", "moonep::portable::phaseC2", "moonep::portable::phaseD"}) {
    INFO(r);
    CHECK(g_regions.count(r) == 1);
  }
}
