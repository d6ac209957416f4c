// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/gpu_world_planner.hpp — moonep::Planner<Kokkos::Cuda,
// moonep::OnGpuWorld> (moonep/planner.hpp; selected in
// moonep/impl/planner_select.hpp): the CUDA kernel over a
// moonep::cuda::GpuWorld (moonep/gpu_world.hpp), one cooperative launch per
// local rank on the rank's own stream, forked from and joined into the
// execution space's stream. Any GpuWorld: one process holding every rank
// (on one device or several), or one process per rank
// (moonep/gpu_world_mpi.hpp), where each process plans its own rank.
//
// What must stay true:
//  * The execution space is on the device of the world's first local rank
//    (the step forks from its stream there). Routing views (and
//    tokens_per_expert) of local rank r are on r's device; tokens_per_rank
//    is on the execution space's device, and a rank on another device
//    gets its count copied onto its own device on the execution space's
//    stream before the fork (so a captured graph still replays any
//    counts).
//  * Construction checks and allocates everything (the world allocated its
//    buffer already); plan() allocates nothing.
//  * The plan views are unmanaged views of GpuWorld::rank_plan(r): a step
//    copies nothing, and they live as long as the world.
//  * Host facts are checked before any launch, in the words of the other
//    planners (moonep/impl/input_shapes.hpp); what only the kernels see
//    (expert ids, token counts, tokens_per_expert) comes back from
//    GpuWorld::check() as InputError in the same words. Either way nothing
//    is left half done and the planner stays usable.
//  * A ragged step's counts stay on the device: rank r's kernel reads its
//    count when it runs and writes RankPlanView::entries
//    (DeviceRankPlan::entries); plan() reads no count on the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/device_plan_views.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/impl/input_shapes.hpp"
#include "moonep/impl/planner_concept.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl {

class GpuWorldPlanner {
 public:
  using execution_space = Kokkos::Cuda;
  using memory_space = Kokkos::CudaSpace;
  using world_type = cuda::GpuWorld;
  using input_view = Kokkos::View<const std::int32_t*, memory_space>;
  using plan_type = Plan<memory_space>;

  static constexpr bool uses_cuda_specialization = true;
  static const char* path_name() { return "gpu_world"; }

  // InputError for a bad config or one that is not the world's, or an
  // execution space on another device than the world's first local rank.
  // RuntimeError if a count slot cannot be allocated.
  GpuWorldPlanner(const Config& config, world_type& world, const Kokkos::Cuda& exec = Kokkos::Cuda())
      : config_(checked(config, world, exec)),
        world_(world),
        exec_(exec),
        local_(local_ranks_of(world)),
        routing_(static_cast<std::size_t>(config_.ranks), nullptr),
        tpe_(static_cast<std::size_t>(config_.ranks), nullptr),
        counts_(static_cast<std::size_t>(config_.ranks), nullptr),
        routing_len_(static_cast<std::size_t>(config_.ranks), -1),
        staged_(static_cast<std::size_t>(config_.ranks)) {
    plan_.config = config_;
    for (int r : local_) {
      plan_.ranks.push_back(device_plan_views(config_, r, world_.rank_plan(r)));
      if (world_.device(r) != exec_.cuda_device()) staged_[r].allocate(world_.device(r));
    }
  }

  GpuWorldPlanner(const GpuWorldPlanner&) = delete;
  GpuWorldPlanner& operator=(const GpuWorldPlanner&) = delete;

  const Config& config() const { return config_; }
  world_type& world() const { return world_; }
  // The ranks this process plans: every rank of a world held by one
  // process, its own rank of a world of one process per rank.
  const std::vector<int>& local_ranks() const { return local_; }
  const plan_type& last_plan() const { return plan_; }

  // As PortablePlanner::plan: routing[i] (and tokens_per_expert[i]) is
  // local_ranks()[i]'s, on that rank's device; tokens_per_rank, when
  // given, R counts on the execution space's device. The step is enqueued
  // after what exec's stream holds (written routing and counts included)
  // and waited for (with one process per rank, collectively); then the
  // plan is in the plan views.
  const plan_type& plan(const std::vector<input_view>& routing,
                        const std::vector<input_view>* tokens_per_expert = nullptr,
                        const input_view* tokens_per_rank = nullptr) {
    compat::ProfilingRegion region("moonep::cuda::gpu_world::plan");
    const std::string why = input_shape_error(config_, local_, routing, tokens_per_expert, tokens_per_rank);
    if (!why.empty()) throw InputError(why);
    const std::int32_t* counts = tokens_per_rank ? tokens_per_rank->data() : nullptr;
    for (std::size_t i = 0; i < local_.size(); ++i) {
      const int r = local_[i];
      routing_[r] = routing[i].data();
      routing_len_[r] = static_cast<std::int64_t>(routing[i].extent(0));
      tpe_[r] = tokens_per_expert ? (*tokens_per_expert)[i].data() : nullptr;
      counts_[r] = counts ? counts + r : nullptr;
      if (counts && staged_[r].ptr) {
        // Rank r's kernel reads its count on its own device.
        ok(cudaMemcpyPeerAsync(staged_[r].ptr, world_.device(r), counts + r, exec_.cuda_device(),
                                             sizeof(std::int32_t), exec_.cuda_stream()),
                         "copying a rank's token count to its device");
        counts_[r] = staged_[r].ptr;
      }
    }
    world_.plan(routing_.data(), tokens_per_expert ? tpe_.data() : nullptr, exec_.cuda_stream(),
                counts ? counts_.data() : nullptr, routing_len_.data());
    world_.check();  // waits; InputError from the kernels' checks, RuntimeError for a rank that never came
    return plan_;
  }

 private:
  static void ok(cudaError_t err, const char* what) {
    if (err != cudaSuccess) throw RuntimeError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
  }

  // One int32 on a device, freed with the planner.
  struct DeviceCount {
    std::int32_t* ptr = nullptr;
    int device = -1;
    void allocate(int on) {
      int saved = 0;
      ok(cudaGetDevice(&saved), "cudaGetDevice");
      ok(cudaSetDevice(on), "cudaSetDevice");
      const cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&ptr), sizeof(std::int32_t));
      cudaSetDevice(saved);
      ok(err, "allocating a rank's count slot");
      device = on;
    }
    DeviceCount() = default;
    DeviceCount(const DeviceCount&) = delete;
    DeviceCount& operator=(const DeviceCount&) = delete;
    DeviceCount(DeviceCount&& o) noexcept : ptr(o.ptr), device(o.device) { o.ptr = nullptr; }
    ~DeviceCount() {
      if (ptr) cudaFree(ptr);
    }
  };

  static std::vector<int> local_ranks_of(const world_type& w) {
    std::vector<int> local;
    if (w.process_rank() >= 0) {
      local.push_back(w.process_rank());
    } else {
      for (int r = 0; r < w.ranks(); ++r) local.push_back(r);
    }
    return local;
  }

  static const Config& checked(const Config& c, const world_type& w, const Kokkos::Cuda& exec) {
    const char* who = "Planner<Kokkos::Cuda, moonep::OnGpuWorld>";
    checked_config(c, w.ranks());
    const Config& wc = w.config();
    if (wc.experts != c.experts || wc.topk != c.topk || wc.tokens != c.tokens || wc.copy_slots != c.copy_slots ||
        wc.token_padding != c.token_padding) {
      throw InputError(std::string(who) + ": the GPU world was made for " + describe(wc) + ", not " + describe(c));
    }
    const int first = w.process_rank() >= 0 ? w.process_rank() : 0;
    if (w.device(first) != exec.cuda_device()) {
      throw InputError(std::string(who) + ": the execution space is on CUDA device " +
                       std::to_string(exec.cuda_device()) + " but the world's first rank of this process (" +
                       std::to_string(first) + ") is on CUDA device " + std::to_string(w.device(first)) +
                       "; the step forks from a stream of that device");
    }
    return c;
  }

  Config config_;
  world_type& world_;
  Kokkos::Cuda exec_;
  std::vector<int> local_;
  // By rank, for GpuWorld::plan (only this process's ranks are set).
  std::vector<const std::int32_t*> routing_, tpe_, counts_;
  std::vector<std::int64_t> routing_len_;
  std::vector<DeviceCount> staged_;  // by rank: a count slot on a rank's device other than exec's
  plan_type plan_;
};

// The interface of moonep/impl/planner_concept.hpp.
MOONEP_ASSERT_PLANNER(GpuWorldPlanner);

}  // namespace moonep::impl
