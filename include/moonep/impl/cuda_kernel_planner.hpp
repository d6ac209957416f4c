// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/cuda_kernel_planner.hpp — the CUDA-specialization path of
// moonep::Planner<Kokkos::Cuda> (moonep/planner.hpp; selected in
// moonep/impl/planner_select.hpp): the whole step of every rank in one
// cooperative launch of moonep::cuda::VirtualRankPlanner (moonep/cuda_planner.hpp),
// R virtual ranks as groups of blocks on the execution space's GPU.
//
// What must stay true:
//  * Construction allocates everything: the CUDA planner (its symmetric
//    buffer, counters and outputs) and the host arrays of device pointers
//    plan() hands it. plan() allocates nothing.
//  * The plan views are unmanaged views of the CUDA planner's output
//    buffers: the step copies nothing, and they live as long as the planner.
//  * The world only names the ranks: every one of them must be local (one
//    process, one GPU). The CUDA planner keeps its own symmetric buffer, so
//    world.allocate() is never called and the world's buffer stays empty.
//  * Host facts (rank arrays, lengths) are checked before the launch in the
//    portable planner's words (moonep/impl/input_shapes.hpp); what only the
//    kernel sees (expert ids, token counts, tokens_per_expert) comes back
//    from cuda::VirtualRankPlanner::check() as InputError. Either way the planner
//    stays usable.
//  * A ragged step's counts stay on the device: the kernel reads them when
//    it runs and writes RankPlanView::entries (DeviceRankPlan::entries);
//    plan() reads no count on the host and launches nothing else.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/device_plan_views.hpp"
#include "moonep/impl/input_shapes.hpp"
#include "moonep/impl/planner_concept.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"
#include "moonep/world.hpp"

namespace moonep::impl {

class CudaKernelPlanner {
 public:
  using execution_space = Kokkos::Cuda;
  using memory_space = Kokkos::CudaSpace;
  using world_type = World<memory_space>;
  using input_view = Kokkos::View<const std::int32_t*, memory_space>;
  using plan_type = Plan<memory_space>;

  static constexpr bool uses_cuda_specialization = true;
  static const char* path_name() { return "cuda"; }

  // Throws InputError for a bad config, a world of the wrong size or with
  // ranks in other processes; RuntimeError if the GPU cannot run the shape.
  CudaKernelPlanner(const Config& config, world_type& world, const Kokkos::Cuda& exec = Kokkos::Cuda())
      : config_(checked_all_local(config, world)),
        world_(world),
        claim_(world),
        exec_(exec),
        planner_(on_device(exec, config_)),
        routing_(static_cast<std::size_t>(config_.ranks), nullptr),
        tpe_(static_cast<std::size_t>(config_.ranks), nullptr),
        routing_len_(static_cast<std::size_t>(config_.ranks), 0) {
    plan_.config = config_;
    for (int r = 0; r < config_.ranks; ++r) {
      plan_.ranks.push_back(device_plan_views(config_, r, planner_.rank_plan(r)));
    }
    region_ = std::string("moonep::cuda::") + cuda::kernel_name(planner_.kernel());
  }

  CudaKernelPlanner(const CudaKernelPlanner&) = delete;
  CudaKernelPlanner& operator=(const CudaKernelPlanner&) = delete;

  const Config& config() const { return config_; }
  world_type& world() const { return world_; }
  const std::vector<int>& local_ranks() const { return world_.local_ranks(); }
  const plan_type& last_plan() const { return plan_; }
  // The CUDA planner itself (kernel chosen, launch shape).
  const cuda::VirtualRankPlanner& cuda_planner() const { return planner_; }

  // As PortablePlanner::plan: routing[i] belongs to world().local_ranks()[i]
  // (here: rank i). Returns once the plan is in the plan views.
  // tokens_per_rank (R counts, in CudaSpace) makes the step ragged; the
  // kernel reads them when it runs, with each routing view's length, so a
  // view needs only s_r*K ids (of which rank r's first s_r*K are read),
  // and a count outside 0..S or above its view's length is an InputError
  // from the kernel's check, in the portable phases' words.
  const plan_type& plan(const std::vector<input_view>& routing,
                        const std::vector<input_view>* tokens_per_expert = nullptr,
                        const input_view* tokens_per_rank = nullptr) {
    compat::ProfilingRegion region("moonep::cuda::plan");
    const std::string why =
        input_shape_error(config_, world_.local_ranks(), routing, tokens_per_expert, tokens_per_rank);
    if (!why.empty()) throw InputError(why);
    for (int r = 0; r < config_.ranks; ++r) {
      routing_[r] = routing[r].data();
      routing_len_[r] = static_cast<std::int64_t>(routing[r].extent(0));
      tpe_[r] = tokens_per_expert ? (*tokens_per_expert)[r].data() : nullptr;
    }
    const std::int32_t* counts = tokens_per_rank ? tokens_per_rank->data() : nullptr;
    compat::ProfilingRegion kernel(region_);
    const cudaStream_t stream = exec_.cuda_stream();
    planner_.plan(routing_.data(), tokens_per_expert ? tpe_.data() : nullptr, stream, counts, routing_len_.data());
    planner_.check(stream);  // waits; InputError from the kernel's checks
    return plan_;
  }

 private:
  static const Config& checked_all_local(const Config& c, const world_type& w) {
    checked_config(c, w.size());
    if (static_cast<int>(w.local_ranks().size()) != w.size()) {
      throw InputError("Planner<Kokkos::Cuda> (CUDA specialization) plans every rank of the world in one launch, "
                       "but this process holds " + std::to_string(w.local_ranks().size()) + " of its " +
                       std::to_string(w.size()) +
                       " ranks; use Planner<Kokkos::Cuda, moonep::PortablePhases> for such a world");
    }
    return c;
  }

  // cuda::VirtualRankPlanner takes the current device: it must be the one of `exec`.
  static const Config& on_device(const Kokkos::Cuda& exec, const Config& c) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != exec.cuda_device()) {
      throw RuntimeError("Planner<Kokkos::Cuda>: the execution space is on CUDA device " +
                         std::to_string(exec.cuda_device()) + " but the current device is " +
                         std::to_string(current) + " (call cudaSetDevice first)");
    }
    return c;
  }

  Config config_;
  world_type& world_;
  WorldClaim<world_type> claim_;
  Kokkos::Cuda exec_;
  cuda::VirtualRankPlanner planner_;
  std::vector<const std::int32_t*> routing_, tpe_;
  std::vector<std::int64_t> routing_len_;
  std::string region_;
  plan_type plan_;
};

// The interface of moonep/impl/planner_concept.hpp.
MOONEP_ASSERT_PLANNER(CudaKernelPlanner);

}  // namespace moonep::impl
