// moonep/planner.hpp — the library API for routing held in Kokkos views:
// moonep::Planner<ExecutionSpace, Path> plans one step of the process's
// local ranks of a World (moonep/world.hpp) on the execution space.
//
// Two implementations, chosen at compile time (moonep/impl/planner_spec.hpp):
//  * the portable phases (moonep/impl/portable_planner.hpp): Kokkos
//    kernels on any execution space, over any World;
//  * the CUDA specialization (moonep/impl/cuda_spec_planner.hpp): the whole
//    step in one cooperative kernel launch, for Kokkos::Cuda when MoonEP is
//    built with CUDA, over a world whose ranks are all in this process;
//  * the same kernel over a moonep::cuda::GpuWorld
//    (moonep/impl/gpu_world_spec_planner.hpp): one cooperative launch per
//    rank, each on its own stream, forked from the execution space's
//    stream and joined back into it; Path = moonep::OnGpuWorld, the world
//    argument a cuda::GpuWorld whose ranks are all on exec's device.
// Path = moonep::Automatic (the default) takes the CUDA specialization
// wherever it exists and the portable phases elsewhere;
// moonep::PortablePhases asks for the portable phases on any execution
// space (Kokkos::Cuda included); moonep::CudaSpecialization insists on the
// CUDA one (a compile error where it does not exist). Both give the same
// plan and reject bad input with InputError; planner.path_name() (and the
// constant uses_cuda_specialization) say which one a Planner is.
//
// Use (all ranks in one process):
//   moonep::InProcessWorld<Kokkos::DefaultExecutionSpace::memory_space> world(config.ranks);
//   moonep::Planner<> planner(config, world);          // allocates everything, once
//   for (each step) {
//     const auto& plan = planner.plan(routing_views);  // one view per local rank
//     use plan.ranks[i].dst, ... (Kokkos views) or plan.to_host(i)
//   }
// Over a GPU world (one launch per rank):
//   moonep::cuda::GpuWorld gpus(config, std::vector<int>(config.ranks, exec.cuda_device()));
//   moonep::Planner<Kokkos::Cuda, moonep::OnGpuWorld> planner(config, gpus, exec);
#pragma once

#include "moonep/impl/planner_spec.hpp"
#include "moonep/impl/portable_planner.hpp"
#include "moonep/impl/rank_plan_view.hpp"
#if MOONEP_HAVE_CUDA_SPECIALIZATION
#include "moonep/impl/cuda_spec_planner.hpp"
#include "moonep/impl/gpu_world_spec_planner.hpp"
#endif

namespace moonep {

// One rank's plan as views of MemorySpace: dst [N] (a ragged step wrote the
// first `entries` of them), cu_seqlens [E+B],
// zero_fill_ranges [E+B][2], experts_to_copy [R][B], remote_stats [2],
// src_info [NvS], dup_groups [NvS][3], dup_loffs [NvS], dup_counts [2].
template <class MemorySpace>
using RankPlanView = impl::RankPlanView<MemorySpace>;

// The plan of the process's local ranks (ranks[i] is world.local_ranks()[i]).
template <class MemorySpace>
using Plan = impl::Plan<MemorySpace>;

// The interface of both implementations:
//   types      execution_space, memory_space, world_type (World<memory_space>),
//              input_view (View<const int32_t*, memory_space>), plan_type
//   Planner(config, world, exec = ExecutionSpace())
//              InputError for a bad config or a world of the wrong size;
//              collective; allocates everything the path uses.
//   plan(routing, tokens_per_expert = nullptr, tokens_per_rank = nullptr)
//              routing[i] (and tokens_per_expert[i], which must match it)
//              belong to world().local_ranks()[i]; collective; returns the
//              plan once it is in the plan views; allocates nothing. Bad input
//              on any rank: InputError on every rank, the planner usable.
//              tokens_per_rank (a view of R counts by world rank, read on
//              the device) makes the step ragged (docs/spec/planning.md
//              "Ragged steps"): routing[i] holds at least s_r*K ids (the
//              CUDA specialization, which never reads the counts on the
//              host, takes views of exactly S*K), and plan.ranks[i].entries
//              (on the device) says how much of dst the step wrote. Every
//              path plans it; a count outside 0..S is an InputError.
//   config(), world(), last_plan(), path_name(), uses_cuda_specialization
// (with OnGpuWorld, world_type is cuda::GpuWorld and local_ranks() is on
// the planner: every rank of the world).
template <class ExecutionSpace = Kokkos::DefaultExecutionSpace, class Path = Automatic>
class Planner : public impl::planner_impl_t<ExecutionSpace, Path> {
  using Impl = impl::planner_impl_t<ExecutionSpace, Path>;

 public:
  using path = Path;
  using Impl::Impl;
};

}  // namespace moonep
