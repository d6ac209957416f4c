// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every planner variant names its Kokkos Tools regions and kernels after the
// path and phase they belong to, so timelines show where a step goes and
// which path ran:
//  * the portable phases: regions moonep::portable::{plan, validate,
//    phaseA, phaseB, phaseC2, phaseD} and kernels moonep::portable::<phase>_*
//    (plus the world's moonep::world::* when the planner puts);
//  * the CUDA specialization: regions moonep::cuda::plan and
//    moonep::cuda::<kernel> (shared_tables or global_tables), and no Kokkos
//    kernel at all (its one launch is a plain CUDA kernel).
// The portable phases also plan every local rank in the same launches: a
// step on an in-process world launches as many kernels at R=8 as at R=2,
// and puts nothing (every rank's chunk is stored into in place).
#include "catch2_compat.hpp"

#include <set>
#include <string>

#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

namespace {
std::set<std::string> g_kernels, g_regions;
int g_launches = 0;
void on_kernel(const char* name, std::uint32_t, std::uint64_t*) {
  g_kernels.insert(name);
  ++g_launches;
}
void on_region(const char* name) { g_regions.insert(name); }

// The labels of one planning step (construction and copies not counted).
template <class P>
void record_one_step(int ranks = 4) {
  Config c;
  c.ranks = ranks; c.experts = 4 * ranks; c.topk = 2; c.tokens = 32; c.copy_slots = 2; c.token_padding = 2;
  InProcessWorld<typename P::memory_space> world(c.ranks);
  P planner(c, world);
  const auto views = to_views<typename P::memory_space>(make_routing(c, Shape::skewed, 1));
  planner.plan(views);  // the recorded step is not the first
  g_kernels.clear();
  g_regions.clear();
  g_launches = 0;
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(on_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(on_kernel);
  Kokkos::Tools::Experimental::set_push_region_callback(on_region);
  planner.plan(views);
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
}  // namespace

TEMPLATE_LIST_TEST_CASE("the portable phases label their regions and kernels moonep::portable", "[portable]",
                        PortableVariants) {
  INFO(variant_name<TestType>());
  record_one_step<TestType>();
  for (const char* k : {"moonep::portable::validate_histogram", "moonep::portable::phaseA_clear_slots",
                        "moonep::portable::phaseC1_stable_scatter", "moonep::portable::phaseB_expert_split",
                        "moonep::portable::phaseB_layout", "moonep::portable::phaseC2_destinations_dedup",
                        "moonep::portable::phaseD_dup_structures"}) {
    INFO(k);
    CHECK(g_kernels.count(k) == 1);
  }
  for (const auto& k : g_kernels) {
    INFO(k);
    CHECK((starts_with(k, "moonep::portable::") || starts_with(k, "moonep::world::")));
  }
  for (const char* r : {"moonep::portable::plan", "moonep::portable::validate", "moonep::portable::phaseA",
                        "moonep::portable::phaseB", "moonep::portable::phaseC2", "moonep::portable::phaseD"}) {
    INFO(r);
    CHECK(g_regions.count(r) == 1);
  }
  CHECK(g_regions.count("moonep::cuda::plan") == 0);
}

TEMPLATE_LIST_TEST_CASE("the portable phases launch the same kernels whatever the number of ranks", "[portable]",
                        PortableVariants) {
  INFO(variant_name<TestType>());
  record_one_step<TestType>(2);
  const int at2 = g_launches;
  const std::set<std::string> kernels2 = g_kernels;
  record_one_step<TestType>(8);
  CHECK(g_launches == at2);
  CHECK(g_kernels == kernels2);
  // One launch per kernel name: no kernel runs once per rank.
  CHECK(static_cast<std::size_t>(g_launches) == g_kernels.size());
  for (const auto& k : g_kernels) {
    INFO(k);
    CHECK(starts_with(k, "moonep::portable::"));  // nothing put into an in-process world
  }
}

#if MOONEP_HAVE_CUDA_SPECIALIZATION
TEST_CASE("the CUDA specialization labels its step moonep::cuda and launches no Kokkos kernel", "[portable]") {
  using P = Planner<Kokkos::Cuda, CudaSpecialization>;
  record_one_step<P>();
  CHECK(g_kernels.empty());
  CHECK(g_regions.count("moonep::cuda::plan") == 1);
  CHECK(g_regions.count("moonep::cuda::shared_tables") + g_regions.count("moonep::cuda::global_tables") == 1);
  for (const auto& r : g_regions) {
    INFO(r);
    CHECK(starts_with(r, "moonep::cuda::"));
  }
}
#endif

TEST_CASE("Automatic takes the CUDA specialization exactly where it exists") {
  // The default execution space's Planner<> is the specialization on
  // Kokkos::Cuda with MoonEP built with CUDA, and the portable phases
  // everywhere else; PortablePhases is always the portable phases.
  constexpr bool on_cuda =
#if defined(KOKKOS_ENABLE_CUDA)
      std::is_same<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>::value;
#else
      false;
#endif
  CHECK(Planner<>::uses_cuda_specialization == (on_cuda && MOONEP_HAVE_CUDA_SPECIALIZATION));
  CHECK(std::string(Planner<>::path_name()) == (Planner<>::uses_cuda_specialization ? "cuda" : "portable"));
  CHECK_FALSE(Planner<Kokkos::DefaultExecutionSpace, PortablePhases>::uses_cuda_specialization);
  CHECK_FALSE(Planner<Kokkos::DefaultHostExecutionSpace>::uses_cuda_specialization);
}
