// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// portable_step_bench — the portable phases' step on Kokkos' default
// execution space (any: Serial, OpenMP, Threads, Cuda, HIP, SYCL), planned
// back to back: plan() after plan() on the same routing views, the time per
// step of a loop (each plan() ends with its own wait for the device, so
// this is the time a caller sees per step, with nothing else queued), and
// what one step costs in Kokkos operations, counted with Kokkos Tools
// callbacks in a separate, untimed step: kernel launches (parallel_for,
// parallel_reduce, parallel_scan; Kokkos Tools see no kernel of a
// Kokkos::Experimental::Graph, so a step submitted as one graph shows its
// graph's kernels, from the planner, in a column of their own), fences (Kokkos passes their labels, and
// reports execution-space fences, from 3.6 on; not the fences Kokkos adds
// around each kernel for the attached tool), deep copies, and allocations
// and deallocations of memory (every View or scratch buffer Kokkos
// allocates or frees inside the step: on a GPU each is a cudaMalloc/
// cudaFree-class call that can wait for the device; --fences also lists
// them by label).
//
// Rows: the portable phases in their default form for the execution space
// (moonep::impl::portable::default_phase_form), on a host execution space
// also in the device form, then the device form with its step launched
// kernel by kernel ("portable (sequence)", where the step is otherwise one
// graph: moonep::impl::portable::default_step_submission), and on
// Kokkos::Cuda in a MoonEP built with CUDA
// the CUDA specialization in the same run (Planner<Kokkos::Cuda,
// CudaSpecialization>: its loop is timed up to one fence after the last
// step, since its plan() does not wait). Where Kokkos has graphs, two
// floors close the table: a graph of the step graph's shape whose kernels
// do nothing but the last, which stores the status for the host, and a
// graph of that one kernel, each submitted and fenced like a step
// (measure_floor): what a step graph
// costs before any of its work, on this Kokkos and this device.
//
//   portable_step_bench                        the headline (R=8 E=256 K=8 S=4096 B=32 tp=128)
//   portable_step_bench --steps 200            more steps per loop (default 100)
//   portable_step_bench --sweep                also S = 512 .. 16384 at the headline's other sizes
//   portable_step_bench --point R E K S B tp   one configuration of your choice
//   portable_step_bench --imbalance SIGMA      the routing's skew (default 1.0, as moonep-plan)
//   portable_step_bench --fences               also list the fences and allocations of a step by label
//   portable_step_bench --smoke                one tiny point (the CTest smoke test)
#include <Kokkos_Core.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/phase_d_outputs.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/planner.hpp"
#include "moonep/synthetic.hpp"
#include "moonep/world.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Exec = Kokkos::DefaultExecutionSpace;

// What the Kokkos Tools callbacks saw.
struct Counts {
  int launches = 0, fences = 0, deep_copies = 0, allocations = 0, deallocations = 0;
  int graphs = 0;       // step graphs submitted (region moonep::portable::step_graph)
  int graph_nodes = 0;  // the kernels of each (the planner's step_graph_kernels())
  std::map<std::string, int> fence_labels, allocation_labels;
};
Counts g_counts;
void on_kernel(const char*, std::uint32_t, std::uint64_t*) { ++g_counts.launches; }
// Kokkos fences around every kernel while a tool is attached (its "Kokkos
// Profile Tool Fence"s, labelled Kokkos::Tools::...): the counting's own
// cost, not the step's, so not counted.
void on_fence(const char* name, std::uint32_t, std::uint64_t*) {
  const std::string label = name ? name : "(unnamed)";
  if (label.compare(0, 14, "Kokkos::Tools:") == 0) return;
  ++g_counts.fences;
  ++g_counts.fence_labels[label];
}
void on_deep_copy(Kokkos::Tools::SpaceHandle, const char*, const void*, Kokkos::Tools::SpaceHandle, const char*,
                  const void*, std::uint64_t) {
  ++g_counts.deep_copies;
}
void on_region(const char* name) {
  if (name && std::string(name) == "moonep::portable::step_graph") ++g_counts.graphs;
}
// Allocations of zero bytes are listed (--fences) but not counted: Kokkos
// 4.x on Cuda reports one for every team kernel it launches without
// level-1 scratch (its team scratch pool "allocated" empty; no memory).
void on_allocate(Kokkos::Tools::SpaceHandle, const char* name, const void*, std::uint64_t bytes) {
  if (bytes > 0) ++g_counts.allocations;
  ++g_counts.allocation_labels[std::string("+") + (name ? name : "(unnamed)") + (bytes > 0 ? "" : " (0 bytes)")];
}
void on_deallocate(Kokkos::Tools::SpaceHandle, const char* name, const void*, std::uint64_t bytes) {
  if (bytes > 0) ++g_counts.deallocations;
  ++g_counts.allocation_labels[std::string("-") + (name ? name : "(unnamed)") + (bytes > 0 ? "" : " (0 bytes)")];
}

void start_counting() {
  g_counts = Counts{};
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(on_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(on_kernel);
  Kokkos::Tools::Experimental::set_begin_fence_callback(on_fence);
  Kokkos::Tools::Experimental::set_begin_deep_copy_callback(on_deep_copy);
  Kokkos::Tools::Experimental::set_push_region_callback(on_region);
  Kokkos::Tools::Experimental::set_allocate_data_callback(on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on_deallocate);
}
void stop_counting() {
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_fence_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_deep_copy_callback(nullptr);
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(nullptr);
}

// The kernels of a portable planner's step graph (none for the CUDA
// specialization).
template <class P, class = void>
struct has_step_graph : std::false_type {};
template <class P>
struct has_step_graph<P, decltype((void)std::declval<const P&>().step_graph_kernels())> : std::true_type {};
template <class P>
int step_graph_nodes(const P& planner) {
  if constexpr (has_step_graph<P>::value) {
    return static_cast<int>(planner.step_graph_kernels().size());
  } else {
    (void)planner;
    return 0;
  }
}

struct Row {
  std::string path, form;
  double us_per_step = 0;
  Counts counts;
};

// One planner P over its own in-process world: warm-up, a timed loop of
// `steps` back-to-back plan() calls, then one counted step.
template <class P>
Row measure(const moonep::Config& c, const moonep::Routing& routing, int steps, const char* path, const char* form) {
  using Mem = typename P::memory_space;
  moonep::InProcessWorld<Mem> world(c.ranks);
  P planner(c, world);
  std::vector<Kokkos::View<std::int32_t*, Mem>> owned;
  std::vector<Kokkos::View<const std::int32_t*, Mem>> views;
  for (const auto& row : routing) {
    owned.emplace_back("routing", row.size());
    Kokkos::deep_copy(owned.back(), Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                        row.data(), row.size()));
    views.emplace_back(owned.back());
  }
  const typename P::execution_space exec;
  for (int i = 0; i < 3; ++i) planner.plan(views);  // warm-up
  exec.fence();
  const auto a = Clock::now();
  for (int i = 0; i < steps; ++i) planner.plan(views);
  exec.fence();
  const double seconds = std::chrono::duration<double>(Clock::now() - a).count();
  start_counting();
  planner.plan(views);
  stop_counting();
  exec.fence();
  Row r;
  r.path = path;
  r.form = form;
  r.us_per_step = seconds / steps * 1e6;
  r.counts = g_counts;
  r.counts.graph_nodes = r.counts.graphs > 0 ? step_graph_nodes(planner) : 0;
  return r;
}

#if MOONEP_KOKKOS_HAS_GRAPH
// What Kokkos allows a step of this shape: a Kokkos::Experimental::Graph of
// empty team kernels with the step graph's dependencies (histogram; then
// block offsets -> A + C1 on one branch and Phase B's two kernels on the
// other, the second also after the offsets; then C2, which writes the
// outputs: no Phase D) and
// about its leagues and team sizes, submitted and fenced, its last kernel's
// first team storing two status values where the host reads them after
// the fence, as plan() does, back to back; `one`: a graph of that single
// kernel instead (a step's fixed cost). No other kernel reads or writes
// memory, so what is left is the launches, the dependencies between nodes
// and the host's wait: no step graph of six kernels is faster than the
// first.
struct EmptyTeam {
  KOKKOS_FUNCTION void operator()(const moonep::impl::portable::Types<Exec>::member&) const {}
};
// The last kernel: the status for the host (as C2 in the step graph).
struct StatusTeam {
  Kokkos::View<const std::int64_t*, Exec::memory_space> from;
  Kokkos::View<std::int64_t*, Kokkos::SharedHostPinnedSpace> to;
  KOKKOS_FUNCTION void operator()(const moonep::impl::portable::Types<Exec>::member& team) const {
    if (team.league_rank() != 0) return;
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      to(0) = from(0);
      to(1) = from(1);
    });
  }
};
Row measure_floor(const moonep::Config& c, int steps, bool one) {
  namespace portable = moonep::impl::portable;
  using T = portable::Types<Exec>;
  const Exec exec;
  const std::int64_t N = static_cast<std::int64_t>(c.tokens) * c.topk;
  // (The device form's blocks of entries, as the planner chooses them.)
  const std::int64_t block = portable::InputScratch<Exec>::choose_block_len(exec, false, c.ranks, c.experts, N);
  const int entries_league = static_cast<int>(c.ranks * ((N + block - 1) / block));
  const EmptyTeam empty;
  const auto policy = [&](int league, int threads) {
    return portable::sized_team_policy(exec, league, threads, 1);
  };
  const StatusTeam last{Kokkos::View<std::int64_t*, typename T::mem>("floor.status", 2),
                        Kokkos::View<std::int64_t*, Kokkos::SharedHostPinnedSpace>("floor.host_status", 2)};
  std::int64_t h[2] = {0, 0};
  auto graph = Kokkos::Experimental::create_graph(exec, [&](const auto& root) {
    if (one) {
      root.then_parallel_for("floor.one", policy(entries_league, 256), last);
      return;
    }
    auto hist = root.then_parallel_for("floor.histogram", policy(entries_league, 256), empty);
    auto offsets = hist.then_parallel_for("floor.block_offsets", policy(8 * c.ranks, 256), empty);
    auto ac1 = offsets.then_parallel_for("floor.AC1", policy(entries_league, 256), empty);
    auto b1 = hist.then_parallel_for("floor.B1", policy(c.ranks, 32), empty);
    auto b2 = Kokkos::Experimental::when_all(offsets, b1).then_parallel_for("floor.B2", policy(c.ranks, 256), empty);
    Kokkos::Experimental::when_all(ac1, b2).then_parallel_for("floor.C2", policy(entries_league, 256), last);
  });
  graph.instantiate();
  const auto step = [&]() {
    graph.submit(exec);
    exec.fence();
    h[0] = last.to(0);
    h[1] = last.to(1);
  };
  for (int i = 0; i < 3; ++i) step();
  const auto a = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double seconds = std::chrono::duration<double>(Clock::now() - a).count();
  // One more step, counted by the same callbacks as a planner's (they see
  // no graph: its kernels are the ones built above).
  start_counting();
  step();
  stop_counting();
  Row r;
  r.path = one ? "floor (1 empty kernel)" : "floor (6 empty kernels)";
  r.form = "graph";
  r.us_per_step = seconds / steps * 1e6;
  r.counts = g_counts;
  r.counts.graphs = 1;
  r.counts.graph_nodes = one ? 1 : 6;
  return r;
}
#endif

std::vector<Row> measure_all(const moonep::Config& c, double imbalance, int steps) {
  const moonep::Routing routing = moonep::synthetic_routing(c, imbalance, 42);
  std::vector<Row> rows;
  using Default = moonep::Planner<Exec, moonep::PortablePhases>;
  rows.push_back(measure<Default>(c, routing, steps, "portable", Default::host_form ? "host" : "device"));
  if constexpr (Default::host_form) {
    rows.push_back(measure<moonep::Planner<Exec, moonep::impl::PortableDeviceForm>>(c, routing, steps, "portable",
                                                                                   "device"));
  }
  // The device form's kernels launched one by one (where the step is a
  // graph otherwise): what the graph saves.
  using Sequence = moonep::Planner<Exec, moonep::impl::PortableDeviceSequence>;
  if constexpr (!std::is_same<typename moonep::Planner<Exec, moonep::impl::PortableDeviceForm>::step_submission,
                              typename Sequence::step_submission>::value) {
    rows.push_back(measure<Sequence>(c, routing, steps, "portable (sequence)", "device"));
  }
#if MOONEP_HAVE_CUDA_SPECIALIZATION
  rows.push_back(
      measure<moonep::Planner<Kokkos::Cuda, moonep::CudaSpecialization>>(c, routing, steps, "cuda (specialization)", "-"));
#endif
#if MOONEP_KOKKOS_HAS_GRAPH
  rows.push_back(measure_floor(c, steps, false));
  rows.push_back(measure_floor(c, steps, true));
#endif
  return rows;
}

void print_table(const moonep::Config& c, double imbalance, int steps, const std::vector<Row>& rows, bool fences) {
  std::printf("R=%d E=%d K=%d S=%d B=%d tp=%d imbalance %.2f, %d steps back to back, on %s\n", c.ranks, c.experts,
              c.topk, c.tokens, c.copy_slots, c.token_padding, imbalance, steps, Exec::name());
  // launches: kernels Kokkos launched one by one; graph: step graphs
  // submitted x their kernels.
  std::printf("  %-24s %-6s %10s %9s %7s %7s %12s %7s %9s\n", "path", "form", "us/step", "launches", "graph",
              "fences", "deep_copies", "allocs", "deallocs");
  for (const Row& r : rows) {
    const std::string graph =
        r.counts.graphs > 0 ? std::to_string(r.counts.graphs) + "x" + std::to_string(r.counts.graph_nodes) : "-";
    std::printf("  %-24s %-6s %10.1f %9d %7s %7d %12d %7d %9d\n", r.path.c_str(), r.form.c_str(), r.us_per_step,
                r.counts.launches, graph.c_str(), r.counts.fences, r.counts.deep_copies, r.counts.allocations,
                r.counts.deallocations);
    if (fences) {
      for (const auto& f : r.counts.fence_labels) std::printf("      fence %s x%d\n", f.first.c_str(), f.second);
      // (+label: allocated, -label: freed)
      for (const auto& a : r.counts.allocation_labels) std::printf("      alloc %s x%d\n", a.first.c_str(), a.second);
    }
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: portable_step_bench [--steps N] [--sweep] [--point R E K S B tp] [--imbalance SIGMA] "
               "[--fences] [--smoke]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  moonep::Config c;
  c.ranks = 8; c.experts = 256; c.topk = 8; c.tokens = 4096; c.copy_slots = 32; c.token_padding = 128;
  int steps = 100;
  double imbalance = 1.0;
  bool sweep = false, fences = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--imbalance" && i + 1 < argc) {
      imbalance = std::atof(argv[++i]);
    } else if (a == "--sweep") {
      sweep = true;
    } else if (a == "--fences") {
      fences = true;
    } else if (a == "--smoke") {
      c.ranks = 2; c.experts = 8; c.topk = 2; c.tokens = 64; c.copy_slots = 2; c.token_padding = 4;
      steps = 3;
    } else if (a == "--point" && i + 6 < argc) {
      c.ranks = std::atoi(argv[++i]);
      c.experts = std::atoi(argv[++i]);
      c.topk = std::atoi(argv[++i]);
      c.tokens = std::atoi(argv[++i]);
      c.copy_slots = std::atoi(argv[++i]);
      c.token_padding = std::atoi(argv[++i]);
    } else {
      usage();
    }
  }
  if (steps < 1) usage();
  const std::vector<Row> rows = measure_all(c, imbalance, steps);
  print_table(c, imbalance, steps, rows, fences);
  if (rows.empty() || rows[0].counts.launches + rows[0].counts.graphs * rows[0].counts.graph_nodes == 0) {
    std::fprintf(stderr, "portable_step_bench: no kernel launch was counted (Kokkos Tools callbacks not called)\n");
    return 1;
  }
  if (sweep) {
    std::printf("\nS sweep (us/step; per 1k tokens in brackets, flat when linear in S)\n");
    std::printf("  %6s", "S");
    for (const Row& r : rows) std::printf("  %24s", (r.path + " " + r.form).c_str());
    std::printf("\n");
    for (int S = 512; S <= 16384; S *= 2) {
      moonep::Config s = c;
      s.tokens = S;
      const std::vector<Row> at = measure_all(s, imbalance, steps);
      std::printf("  %6d", S);
      for (const Row& r : at) std::printf("  %12.1f [%9.2f]", r.us_per_step, r.us_per_step * 1000.0 / S);
      std::printf("\n");
    }
  }
  return 0;
}
