// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The smallest complete MoonEP program (shown in docs/api.md): plan one step
// of 4 virtual ranks in this process with the portable planner, read one
// rank's plan, and check the whole plan against the reference planner.
// Exit status 0 when the two agree.
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <vector>

#include <moonep/moonep.hpp>

int main(int argc, char* argv[]) {
  Kokkos::initialize(argc, argv);
  int status = 0;
  {  // every Kokkos view must be gone before Kokkos::finalize
    using Exec = Kokkos::DefaultExecutionSpace;
    using Mem = Exec::memory_space;

    // R=4 ranks, E=16 experts (4 per rank), top-2 of 32 tokens per rank,
    // 2 copy slots per rank, groups padded to multiples of 4.
    moonep::Config config;
    config.ranks = 4;
    config.experts = 16;
    config.topk = 2;
    config.tokens = 32;
    config.copy_slots = 2;
    config.token_padding = 4;

    // A skewed routing: routing[r] holds rank r's S*K expert ids, token major.
    const moonep::Routing routing = moonep::synthetic_routing(config, /*imbalance=*/1.5, /*seed=*/7);

    // The planner reads its input from views in the execution space's memory.
    std::vector<moonep::Planner<Exec>::input_view> views;
    for (const auto& row : routing) {
      Kokkos::View<std::int32_t*, Mem> v("routing", row.size());
      Kokkos::deep_copy(v, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                               row.data(), row.size()));
      views.push_back(v);
    }

    // All ranks in this process; the planner allocates everything here, once.
    moonep::InProcessWorld<Mem> world(config.ranks);
    moonep::Planner<Exec> planner(config, world);

    // One step (call plan() again every step; it allocates nothing).
    const moonep::Plan<Mem>& plan = planner.plan(views);

    // plan.ranks[i] are Kokkos views; to_host copies one rank to std::vectors.
    const moonep::HostRankPlan rank0 = plan.to_host(0);
    const int G = config.groups();
    std::printf("rank 0 receives %d padded slots in %d groups; copies of experts:", rank0.cu_seqlens[G - 1], G);
    for (int b = 0; b < config.copy_slots; ++b) std::printf(" %d", rank0.experts_to_copy[b]);
    std::printf("\n");

    // The reference planner is the executable spec: the plans must agree.
    moonep::HostPlan portable;
    portable.config = config;
    for (std::size_t i = 0; i < plan.ranks.size(); ++i) portable.ranks.push_back(plan.to_host(i));
    const std::string diff = moonep::plan_difference(portable, moonep::plan_reference(config, routing));
    std::printf("portable vs reference: %s\n", diff.empty() ? "same plan" : diff.c_str());
    status = diff.empty() ? 0 : 1;
  }
  Kokkos::finalize();
  return status;
}
