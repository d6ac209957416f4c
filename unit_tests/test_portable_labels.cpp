// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every planner variant names its Kokkos Tools regions and kernels after the
// path and phase they belong to, so timelines show where a step goes and
// which path ran:
//  * the portable phases: regions moonep::portable::{plan, validate,
//    phaseA, phaseB, phaseC2, phaseD} and kernels moonep::portable::<phase>_*
//    (plus the world's moonep::world::* when the planner puts); an
//    in-process step submitted as one graph shows the regions plan,
//    validate and step_graph, and its kernels only through the planner's
//    step_graph_kernels() (Kokkos Tools see no kernel of a graph);
//  * the CUDA specialization: regions moonep::cuda::plan and
//    moonep::cuda::<kernel> (shared_tables or global_tables), and no Kokkos
//    kernel at all (its one launch is a plain CUDA kernel).
// The portable phases also plan every local rank in the same launches: a
// step on an in-process world launches as many kernels at R=8 as at R=2,
// and puts nothing (every rank's chunk is stored into in place). Each form
// of the kernels (host, device; chosen at compile time from the execution
// space, or forced with impl::PortableDeviceForm) launches its own kernels,
// an in-process step waits for the device once, at its end (counted with
// Kokkos Tools' fence callback, whose labels Kokkos passes from 3.6 on), and
// allocates and frees nothing (Kokkos Tools' allocation callbacks): on a GPU
// each would be a cudaMalloc/cudaFree-class call.
#include "catch2_compat.hpp"

#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "moonep/reference.hpp"
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
std::map<std::string, int> g_fences;  // label -> fences in the recorded step
void on_fence(const char* name, std::uint32_t, std::uint64_t*) { ++g_fences[name]; }
std::map<std::string, int> g_allocations, g_deallocations;  // label -> count in the recorded step
int g_deep_copies = 0;
// (Zero-byte ones not counted: Kokkos 4.x on Cuda reports one for every
// team kernel it launches, its team scratch pool "allocated" with 0 bytes
// when the kernel asks for no level-1 scratch; no memory, no wait.)
void on_allocate(Kokkos::Tools::SpaceHandle, const char* name, const void*, std::uint64_t bytes) {
  if (bytes > 0) ++g_allocations[name];
}
void on_deallocate(Kokkos::Tools::SpaceHandle, const char* name, const void*, std::uint64_t bytes) {
  if (bytes > 0) ++g_deallocations[name];
}
void on_deep_copy(Kokkos::Tools::SpaceHandle, const char*, const void*, Kokkos::Tools::SpaceHandle, const char*,
                  const void*, std::uint64_t) {
  ++g_deep_copies;
}
std::vector<std::string> g_graph_kernels;  // the recorded planner's step graph, if any

// The step graph's kernels of a portable planner (none for the CUDA
// specialization).
template <class P, class = void>
struct has_step_graph : std::false_type {};
template <class P>
struct has_step_graph<P, decltype((void)std::declval<const P&>().step_graph_kernels())> : std::true_type {};

struct Size {
  int ranks, experts, topk, tokens;
};

// The labels of one planning step (construction and copies not counted).
template <class P>
void record_one_step(Size z = Size{4, 16, 2, 32}) {
  Config c;
  c.ranks = z.ranks; c.experts = z.experts; c.topk = z.topk; c.tokens = z.tokens; c.copy_slots = 2;
  c.token_padding = 2;
  InProcessWorld<typename P::memory_space> world(c.ranks);
  P planner(c, world);
  const auto views = to_views<typename P::memory_space>(make_routing(c, Shape::skewed, 1));
  planner.plan(views);  // the recorded step is not the first
  g_kernels.clear();
  g_regions.clear();
  g_launches = 0;
  g_fences.clear();
  g_allocations.clear();
  g_deallocations.clear();
  g_deep_copies = 0;
  g_graph_kernels.clear();
  if constexpr (has_step_graph<P>::value) g_graph_kernels = planner.step_graph_kernels();
  Kokkos::Tools::Experimental::set_begin_fence_callback(on_fence);
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(on_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(on_kernel);
  Kokkos::Tools::Experimental::set_push_region_callback(on_region);
  Kokkos::Tools::Experimental::set_allocate_data_callback(on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on_deallocate);
  Kokkos::Tools::Experimental::set_begin_deep_copy_callback(on_deep_copy);
  planner.plan(views);
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_fence_callback(nullptr);
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_deep_copy_callback(nullptr);
}

// The step's kernels: those Kokkos Tools saw launched and those of its graph.
std::set<std::string> step_kernels() {
  std::set<std::string> all = g_kernels;
  all.insert(g_graph_kernels.begin(), g_graph_kernels.end());
  return all;
}
int step_kernel_count() { return g_launches + static_cast<int>(g_graph_kernels.size()); }

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

template <class P>
constexpr bool is_graph_step() {
  return std::is_same<typename P::step_submission, impl::portable::StepGraph>::value && MOONEP_KOKKOS_HAS_GRAPH;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("the portable phases label their regions and kernels moonep::portable", "[portable]",
                        PortableSubmissionVariants) {
  INFO(variant_name<TestType>());
  record_one_step<TestType>();
  const std::set<std::string> kernels = step_kernels();
  for (const char* k : {"moonep::portable::validate_histogram", "moonep::portable::phaseC2_destinations_dedup"}) {
    INFO(k);
    CHECK(kernels.count(k) == 1);
  }
  // Phase D: the host form's; in the device form's in-process step C2
  // writes the outputs (phase_c2_outputs.hpp).
  CHECK((kernels.count("moonep::portable::phaseD_dup_structures") == 1) == TestType::host_form);
  for (const auto& k : kernels) {
    INFO(k);
    CHECK((starts_with(k, "moonep::portable::") || starts_with(k, "moonep::world::")));
  }
  std::vector<const char*> regions = {"moonep::portable::plan", "moonep::portable::validate"};
  if (is_graph_step<TestType>()) {
    regions.push_back("moonep::portable::step_graph");
  } else {
    for (const char* r : {"moonep::portable::phaseA", "moonep::portable::phaseB", "moonep::portable::phaseC2"})
      regions.push_back(r);
    if (TestType::host_form) regions.push_back("moonep::portable::phaseD");
  }
  for (const char* r : regions) {
    INFO(r);
    CHECK(g_regions.count(r) == 1);
  }
  CHECK(g_regions.size() == regions.size());
  CHECK(g_regions.count("moonep::cuda::plan") == 0);
}

TEST_CASE("the portable phases' form is a compile-time trait of the execution space", "[portable]") {
  using impl::portable::default_phase_form_t;
  using impl::portable::DeviceForm;
  using impl::portable::HostForm;
  using impl::portable::StepGraph;
  using impl::portable::StepSequence;
  CHECK(std::is_same<default_phase_form_t<Kokkos::DefaultHostExecutionSpace>, HostForm>::value);
  CHECK(std::is_same<default_phase_form_t<Kokkos::DefaultExecutionSpace>, HostForm>::value ==
        Kokkos::SpaceAccessibility<Kokkos::DefaultExecutionSpace, Kokkos::HostSpace>::accessible);
#if defined(KOKKOS_ENABLE_CUDA)
  CHECK(std::is_same<default_phase_form_t<Kokkos::Cuda>, DeviceForm>::value);
  CHECK(std::is_same<Planner<Kokkos::Cuda, PortablePhases>::step_submission, StepGraph>::value ==
        bool(MOONEP_KOKKOS_HAS_GRAPH));
#endif
  CHECK(Planner<Kokkos::DefaultHostExecutionSpace, PortablePhases>::host_form);
  CHECK_FALSE(Planner<Kokkos::DefaultHostExecutionSpace, impl::PortableDeviceForm>::host_form);
  CHECK(std::is_same<Planner<Kokkos::DefaultHostExecutionSpace, impl::PortableDeviceForm>::phase_form, DeviceForm>::value);
  // How an in-process step is submitted: the host form launches its kernels
  // one by one; the device form is one graph where Kokkos has graphs.
  CHECK(std::is_same<Planner<Kokkos::DefaultHostExecutionSpace, PortablePhases>::step_submission, StepSequence>::value);
  CHECK(std::is_same<Planner<Kokkos::DefaultHostExecutionSpace, impl::PortableDeviceForm>::step_submission,
                     StepGraph>::value == bool(MOONEP_KOKKOS_HAS_GRAPH));
  CHECK(std::is_same<Planner<Kokkos::DefaultHostExecutionSpace, impl::PortableDeviceSequence>::step_submission,
                     StepSequence>::value);
  CHECK_FALSE(Planner<Kokkos::DefaultHostExecutionSpace, impl::PortableDeviceSequence>::host_form);
}

TEMPLATE_LIST_TEST_CASE("each form of the portable phases launches its own kernels", "[portable]",
                        PortableSubmissionVariants) {
  INFO(variant_name<TestType>());
  record_one_step<TestType>();
  const bool device = !TestType::host_form;
  const std::set<std::string> kernels = step_kernels();
  // The host form walks each rank's blocks and slots in one thread; the
  // device form turns the block histograms into offsets with one team per
  // rank, clears the outputs in the scatter's teams (A and C1 in one
  // kernel) and, in-process, writes the outputs in C2 (no Phase D).
  CHECK((kernels.count("moonep::portable::validate_counts") == 1) == !device);
  CHECK((kernels.count("moonep::portable::phaseA_clear_slots") == 1) == !device);
  CHECK((kernels.count("moonep::portable::phaseC1_stable_scatter") == 1) == !device);
  CHECK((kernels.count("moonep::portable::validate_block_offsets") == 1) == device);
  CHECK((kernels.count("moonep::portable::phaseAC1_clear_and_scatter") == 1) == device);
  CHECK(kernels.count("moonep::portable::phaseD_dup_groups") == 0);
  // Phase B: steps 1-3 and steps 4-5 with the pairs in two kernels in the
  // device form, four in the host form (phase_b_root.hpp).
  for (const char* k : {"moonep::portable::phaseB_totals_and_moves", "moonep::portable::phaseB_expert_split",
                        "moonep::portable::phaseB_layout", "moonep::portable::phaseB_pairs"}) {
    INFO(k);
    CHECK((kernels.count(k) == 1) == !device);
  }
  CHECK((kernels.count("moonep::portable::phaseB_moves_and_split") == 1) == device);
  CHECK((kernels.count("moonep::portable::phaseB_layout_and_pairs") == 1) == device);
  // validate 2, A+C1 1, B 2, C2 1 in the device form; validate 2, A 1,
  // C1 1, B 4, C2 1, D 1 in the host form (portable_planner.hpp).
  const int expected = device ? 6 : 10;
  CHECK(step_kernel_count() == expected);
  // A step graph holds every kernel of the step; Kokkos launches none
  // outside it.
  if (is_graph_step<TestType>()) {
    CHECK(g_graph_kernels.size() == static_cast<std::size_t>(expected));
    CHECK(g_launches == 0);
  } else {
    CHECK(g_graph_kernels.empty());
  }
}

#if KOKKOS_VERSION >= 30600
TEMPLATE_LIST_TEST_CASE("an in-process step waits for the device once, at its end", "[portable]",
                        PortableSubmissionVariants) {
  INFO(variant_name<TestType>());
  record_one_step<TestType>(Size{8, 32, 2, 32});
  int moonep_fences = 0;
  for (const auto& f : g_fences) {
    INFO(f.first << " x" << f.second);
    if (starts_with(f.first, "moonep::")) moonep_fences += f.second;
    // no world barrier, no read of the validation count between phases
    CHECK_FALSE(starts_with(f.first, "moonep::world::"));
    CHECK(f.first != "moonep::portable::validated");
  }
  CHECK(moonep_fences == 1);
  CHECK(g_fences["moonep::portable::plan_done"] == 1);
}
#endif

// What a step allocates and frees, counted by Kokkos Tools (every View,
// and Kokkos' own scratch, e.g. Kokkos::Threads' thread scratch, which a
// kernel needing more of it than the last one reallocates): nothing, at a
// small size and at one where the device form cuts ranks into many blocks
// and slot tiles. And at most one deep copy: the step's status, read at
// its end; none in a step graph, whose last kernel stores the status where
// the host reads it (host-pinned memory on a GPU).
TEMPLATE_LIST_TEST_CASE("an in-process step allocates nothing and copies only its status", "[portable]",
                        PortableSubmissionVariants) {
  INFO(variant_name<TestType>());
  for (const Size z : {Size{4, 16, 2, 32}, Size{2, 8, 2, 64}, Size{8, 64, 4, 1024}}) {
    INFO("R=" << z.ranks << " E=" << z.experts << " K=" << z.topk << " S=" << z.tokens);
    record_one_step<TestType>(z);
    for (const auto& a : g_allocations) {
      INFO("allocated " << a.first << " x" << a.second);
      // Kokkos::Cuda outside a graph: a team launch with level-1 scratch
      // takes the next of the instance's team scratch pools and Kokkos
      // sizes it at the launch (9 of these per step at R=8 E=64 K=4
      // S=1024 on an H100); Kokkos' own memory, not the step's, and none
      // in the graph form, the one a Kokkos with graphs runs.
      if (a.first == "Kokkos::CudaSpace::TeamScratchMemory" && !is_graph_step<TestType>()) continue;
      CHECK(a.second == 0);
    }
    for (const auto& a : g_deallocations) {
      INFO("freed " << a.first << " x" << a.second);
      CHECK(a.second == 0);
    }
    CHECK(g_deep_copies == (is_graph_step<TestType>() ? 0 : 1));
  }
}

TEMPLATE_LIST_TEST_CASE("the portable phases launch the same kernels whatever the number of ranks", "[portable]",
                        PortableSubmissionVariants) {
  INFO(variant_name<TestType>());
  record_one_step<TestType>(Size{2, 8, 2, 32});
  const int at2 = step_kernel_count();
  const std::set<std::string> kernels2 = step_kernels();
  record_one_step<TestType>(Size{8, 32, 2, 32});
  CHECK(step_kernel_count() == at2);
  CHECK(step_kernels() == kernels2);
  // One launch per kernel name: no kernel runs once per rank.
  CHECK(static_cast<std::size_t>(step_kernel_count()) == step_kernels().size());
  for (const auto& k : step_kernels()) {
    INFO(k);
    CHECK(starts_with(k, "moonep::portable::"));  // nothing put into an in-process world
  }
}

TEMPLATE_LIST_TEST_CASE("a step whose team scratch leaves level 0 is launched kernel by kernel, and plans alike",
                        "[portable]", PortableSubmissionVariants) {
  // E = 8192: the histogram's team scratch (E counts) is 32 KiB, beyond
  // level 0's 16 KiB; a graph would hold level-1 scratch, so no variant
  // builds one (portable_planner.hpp), and the plan is the reference's.
  INFO(variant_name<TestType>());
  Config c;
  c.ranks = 2; c.experts = 8192; c.topk = 2; c.tokens = 64; c.copy_slots = 2; c.token_padding = 2;
  InProcessWorld<typename TestType::memory_space> world(c.ranks);
  TestType planner(c, world);
  CHECK(planner.step_graph_kernels().empty());
  const Routing routing = make_routing(c, Shape::skewed, 5);
  CHECK(plan_difference(plan_reference(c, routing), plan_with(planner, routing)) == "");
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
