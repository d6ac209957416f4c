// moonep/impl/gpu_world_spec_planner.hpp — moonep::Planner<Kokkos::Cuda,
// moonep::OnGpuWorld> (moonep/planner.hpp; selected in
// moonep/impl/planner_spec.hpp): the CUDA kernel over a
// moonep::cuda::GpuWorld (moonep/gpu_world.hpp), one cooperative launch per
// rank on the rank's own stream, forked from and joined into the execution
// space's stream.
//
// What must stay true:
//  * The world is held by this process (every rank local) and every rank is
//    on the execution space's device: the routing views are CudaSpace
//    views of that device, and GpuWorld::plan forks from a stream of it.
//  * Construction checks and allocates everything (the world allocated its
//    buffer already); plan() allocates nothing.
//  * The plan views are unmanaged views of GpuWorld::rank_plan(r): a step
//    copies nothing, and they live as long as the world.
//  * Host facts are checked before any launch, in the words of the other
//    planners (moonep/impl/input_shapes.hpp); what only the kernels see
//    (expert ids, token counts, tokens_per_expert) comes back from
//    GpuWorld::check() as InputError. Either way nothing is left half done
//    and the planner stays usable.
//  * A ragged step's counts stay on the device: rank r's kernel reads
//    tokens_per_rank(r) when it runs and writes RankPlanView::entries
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
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl {

class GpuWorldSpecPlanner {
 public:
  using execution_space = Kokkos::Cuda;
  using memory_space = Kokkos::CudaSpace;
  using world_type = cuda::GpuWorld;
  using input_view = Kokkos::View<const std::int32_t*, memory_space>;
  using plan_type = Plan<memory_space>;

  static constexpr bool uses_cuda_specialization = true;
  static const char* path_name() { return "gpu_world"; }

  // InputError for a bad config or one that is not the world's, a world
  // with ranks in other processes, or a rank on a device other than exec's.
  GpuWorldSpecPlanner(const Config& config, world_type& world, const Kokkos::Cuda& exec = Kokkos::Cuda())
      : config_(checked(config, world, exec)),
        world_(world),
        exec_(exec),
        routing_(static_cast<std::size_t>(config_.ranks), nullptr),
        tpe_(static_cast<std::size_t>(config_.ranks), nullptr),
        counts_(static_cast<std::size_t>(config_.ranks), nullptr) {
    plan_.config = config_;
    for (int r = 0; r < config_.ranks; ++r) {
      local_.push_back(r);
      plan_.ranks.push_back(device_plan_views(config_, r, world_.rank_plan(r)));
    }
  }

  GpuWorldSpecPlanner(const GpuWorldSpecPlanner&) = delete;
  GpuWorldSpecPlanner& operator=(const GpuWorldSpecPlanner&) = delete;

  const Config& config() const { return config_; }
  world_type& world() const { return world_; }
  // Every rank of the world: they are all this process's.
  const std::vector<int>& local_ranks() const { return local_; }
  const plan_type& last_plan() const { return plan_; }

  // As CudaSpecPlanner::plan: routing[r] (and tokens_per_expert[r]) is rank
  // r's, on exec's device, S*K ids; tokens_per_rank, when given, R counts
  // on exec's device, rank r's kernel reading the r-th. The step is
  // enqueued after what exec's stream holds (written routing and counts
  // included) and waited for; then the plan is in the plan views.
  const plan_type& plan(const std::vector<input_view>& routing,
                        const std::vector<input_view>* tokens_per_expert = nullptr,
                        const input_view* tokens_per_rank = nullptr) {
    compat::ProfilingRegion region("moonep::cuda::gpu_world::plan");
    const std::string why = full_length_input_error(config_, local_, routing, tokens_per_expert, tokens_per_rank);
    if (!why.empty()) throw InputError(why);
    const std::int32_t* counts = tokens_per_rank ? tokens_per_rank->data() : nullptr;
    for (int r = 0; r < config_.ranks; ++r) {
      routing_[r] = routing[r].data();
      tpe_[r] = tokens_per_expert ? (*tokens_per_expert)[r].data() : nullptr;
      counts_[r] = counts ? counts + r : nullptr;
    }
    world_.plan(routing_.data(), tokens_per_expert ? tpe_.data() : nullptr, exec_.cuda_stream(),
                counts ? counts_.data() : nullptr);
    world_.check();  // waits; InputError from the kernels' checks, RuntimeError for a rank that never came
    return plan_;
  }

 private:
  static const Config& checked(const Config& c, const world_type& w, const Kokkos::Cuda& exec) {
    const char* who = "Planner<Kokkos::Cuda, moonep::OnGpuWorld>";
    checked_config(c, w.ranks());
    const Config& wc = w.config();
    if (wc.experts != c.experts || wc.topk != c.topk || wc.tokens != c.tokens || wc.copy_slots != c.copy_slots ||
        wc.token_padding != c.token_padding) {
      throw InputError(std::string(who) + ": the GPU world was made for " + describe(wc) + ", not " + describe(c));
    }
    if (w.process_rank() >= 0) {
      throw InputError(std::string(who) + ": the GPU world has one process per rank (this one holds rank " +
                       std::to_string(w.process_rank()) +
                       "); this planner plans a world held by one process (plan such a world with "
                       "GpuWorld::plan and GpuWorld::check)");
    }
    const int device = exec.cuda_device();
    for (int r = 0; r < w.ranks(); ++r) {
      if (w.device(r) != device) {
        throw InputError(std::string(who) + ": rank " + std::to_string(r) + " of the GPU world is on CUDA device " +
                         std::to_string(w.device(r)) + " but the execution space is on CUDA device " +
                         std::to_string(device) + "; every rank must be on the execution space's device");
      }
    }
    return c;
  }

  Config config_;
  world_type& world_;
  Kokkos::Cuda exec_;
  std::vector<int> local_;
  std::vector<const std::int32_t*> routing_, tpe_, counts_;  // by rank, for GpuWorld::plan
  plan_type plan_;
};

}  // namespace moonep::impl
