// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/planner.hpp — the library API for routing held in Kokkos views:
// moonep::Planner<ExecutionSpace, Path> plans one step of the process's
// local ranks of a world on the execution space.
//
// Three implementations, chosen at compile time (moonep/impl/planner_select.hpp),
// one interface (moonep/impl/planner_concept.hpp, checked by static_assert
// on each):
//  * the portable phases (moonep/impl/portable_planner.hpp): Kokkos
//    kernels on any execution space, over any moonep::World;
//  * the CUDA specialization (moonep/impl/cuda_kernel_planner.hpp): the whole
//    step in one cooperative kernel launch, for Kokkos::Cuda when MoonEP is
//    built with CUDA, over a world whose ranks are all in this process;
//  * the same kernel over a moonep::cuda::GpuWorld
//    (moonep/impl/gpu_world_planner.hpp), Path = moonep::OnGpuWorld:
//    one cooperative launch per local rank, each on its own stream on its
//    own device, forked from the execution space's stream and joined back
//    into it; any GpuWorld (one process holding every rank, on one device
//    or several, or one process per rank, each planning its own).
// The world type is the implementation's world_type: a moonep::World for
// the first two, a moonep::cuda::GpuWorld for OnGpuWorld (whose symmetric
// buffer is VMM-mapped device memory, not a Kokkos view).
// Path = moonep::Automatic (the default) takes the CUDA specialization
// wherever it exists and the portable phases elsewhere;
// moonep::PortablePhases asks for the portable phases on any execution
// space (Kokkos::Cuda included); moonep::CudaSpecialization insists on the
// CUDA one (a compile error where it does not exist). Every path gives the
// same plan and rejects the same bad input with InputError in the same
// words; planner.path_name() (and the constant uses_cuda_specialization)
// say which one a Planner is.
//
// Use (all ranks in one process):
//   moonep::InProcessWorld<Kokkos::DefaultExecutionSpace::memory_space> world(config.ranks);
//   moonep::Planner<> planner(config, world);          // allocates everything, once
//   for (each step) {
//     const auto& plan = planner.plan(routing_views);  // one view per local rank
//     use plan.ranks[i].dst, ... (Kokkos views) or plan.to_host(i)
//   }
// Over a GPU world (one launch per rank):
//   moonep::cuda::GpuWorld gpus(config, devices);      // e.g. {0, 1, 2, 3}
//   moonep::Planner<Kokkos::Cuda, moonep::OnGpuWorld> planner(config, gpus, exec);  // exec on devices[0]
#pragma once

#include "moonep/impl/planner_concept.hpp"
#include "moonep/impl/planner_select.hpp"
#include "moonep/impl/portable_planner.hpp"
#include "moonep/impl/rank_plan_view.hpp"
#if MOONEP_HAVE_CUDA_SPECIALIZATION
#include "moonep/impl/cuda_kernel_planner.hpp"
#include "moonep/impl/gpu_world_planner.hpp"
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

// The interface of every implementation (moonep/impl/planner_concept.hpp):
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
//              "Ragged steps"): routing[i] holds at least s_r*K ids on
//              every path (the kernels read each view's length with the
//              counts), and plan.ranks[i].entries (on the device) says how
//              much of dst the step wrote. A count outside 0..S, or above
//              what its routing view holds, is an InputError.
//   config(), world(), local_ranks(), last_plan(), path_name(),
//   uses_cuda_specialization
template <class ExecutionSpace = Kokkos::DefaultExecutionSpace, class Path = Automatic>
class Planner : public impl::planner_impl_t<ExecutionSpace, Path> {
  using Impl = impl::planner_impl_t<ExecutionSpace, Path>;
  MOONEP_ASSERT_PLANNER(Impl);

 public:
  using path = Path;
  using Impl::Impl;
};

}  // namespace moonep
