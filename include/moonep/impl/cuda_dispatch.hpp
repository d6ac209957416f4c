// moonep/impl/cuda_dispatch.hpp — how the portable Planner hands a step to
// the CUDA specialization (moonep/cuda_planner.hpp), Kokkos Kernels style:
// the public Planner<ExecSpace> holds a CudaDispatch<ExecSpace>, which is an
// empty no-op for every execution space but Kokkos::Cuda. Only compiled
// into a Kokkos build with the CUDA backend and MoonEP built with CUDA; the
// Debian Kokkos (Serial) builds here never see the Cuda specialization.
//
// What it handles: an InProcessWorld<CudaSpace> (R virtual ranks on one
// GPU), i.e. exactly what moonep::cuda::Planner plans in one cooperative
// launch. Other worlds (one GPU per rank comes later) return false and the
// portable phases run instead. The plan views of the Planner are pointed at
// the CUDA planner's own device buffers (unmanaged views), so the step
// copies nothing; they stay valid as long as the Planner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"
#include "moonep/moonep_config.hpp"
#include "moonep/world.hpp"

#if defined(KOKKOS_ENABLE_CUDA) && MOONEP_HAVE_CUDA
#include "moonep/cuda_planner.hpp"
#endif

namespace moonep::impl {

// Every execution space but Kokkos::Cuda: never dispatches.
template <class ExecutionSpace>
struct CudaDispatch {
  using memory_space = typename ExecutionSpace::memory_space;
  using input_view = Kokkos::View<const std::int32_t*, memory_space>;
  bool try_plan(const Config&, World<memory_space>&, const ExecutionSpace&,
                const std::vector<input_view>&, const std::vector<input_view>*,
                std::vector<RankPlanView<memory_space>>&) {
    return false;
  }
};

#if defined(KOKKOS_ENABLE_CUDA) && MOONEP_HAVE_CUDA
template <>
struct CudaDispatch<Kokkos::Cuda> {
  using memory_space = Kokkos::CudaSpace;
  using input_view = Kokkos::View<const std::int32_t*, memory_space>;

  bool try_plan(const Config& c, World<memory_space>& world, const Kokkos::Cuda& exec,
                const std::vector<input_view>& routing, const std::vector<input_view>* tpe,
                std::vector<RankPlanView<memory_space>>& out) {
    if (dynamic_cast<InProcessWorld<memory_space>*>(&world) == nullptr) return false;
    check_shapes(c, routing, tpe);
    if (!planner_) {
      planner_ = std::make_unique<cuda::Planner>(c);
      for (auto& v : out) alias(c, v);
    }
    // The region names the kernel the planner chose.
    compat::ProfilingRegion region(std::string("moonep::cuda::") + cuda::kernel_name(planner_->kernel()));
    std::vector<const std::int32_t*> topk(c.ranks), counts(c.ranks, nullptr);
    for (int r = 0; r < c.ranks; ++r) {
      topk[r] = routing[r].data();
      if (tpe) counts[r] = (*tpe)[r].data();
    }
    const cudaStream_t stream = exec.cuda_stream();
    planner_->plan(topk.data(), tpe ? counts.data() : nullptr, stream);
    planner_->check(stream);  // InputError from the kernel's checks; planner stays usable
    return true;
  }

 private:
  // Lengths are host facts: checked here, with validate_rank_input's words.
  static void check_shapes(const Config& c, const std::vector<input_view>& routing,
                           const std::vector<input_view>* tpe) {
    if (static_cast<int>(routing.size()) != c.ranks)
      throw InputError("routing has " + std::to_string(routing.size()) +
                       " rank arrays, expected ranks = " + std::to_string(c.ranks));
    if (tpe && static_cast<int>(tpe->size()) != c.ranks)
      throw InputError("tokens_per_expert has " + std::to_string(tpe->size()) +
                       " rank arrays, expected ranks = " + std::to_string(c.ranks));
    for (int r = 0; r < c.ranks; ++r) {
      if (static_cast<std::int64_t>(routing[r].extent(0)) != c.entries())
        throw InputError("routing[" + std::to_string(r) + "] has " +
                         std::to_string(routing[r].extent(0)) + " entries, expected tokens*topk = " +
                         std::to_string(c.entries()));
      if (tpe && static_cast<int>((*tpe)[r].extent(0)) != c.experts)
        throw InputError("tokens_per_expert[" + std::to_string(r) + "] has " +
                         std::to_string((*tpe)[r].extent(0)) + " counts, expected experts = " +
                         std::to_string(c.experts));
    }
  }

  // Point one rank's plan views at the CUDA planner's buffers.
  void alias(const Config& c, RankPlanView<memory_space>& v) const {
    using P = RankPlanView<memory_space>;
    const cuda::DeviceRankPlan& d = planner_->rank_plan(v.rank);
    const std::size_t G = static_cast<std::size_t>(c.groups());
    const std::size_t NvS = static_cast<std::size_t>(c.slots());
    v.dst = typename P::vec(d.dst, static_cast<std::size_t>(c.entries()));
    v.cu_seqlens = typename P::vec(d.cu_seqlens, G);
    v.zero_fill_ranges = typename P::pairs(d.zero_fill_ranges, G);
    v.experts_to_copy = typename P::table(d.experts_to_copy, c.ranks, c.copy_slots);
    v.remote_stats = typename P::vec(d.remote_stats, 2);
    v.src_info = typename P::vec(d.src_info, NvS);
    v.dup_groups = typename P::triples(d.dup_groups, NvS);
    v.dup_loffs = typename P::vec(d.dup_loffs, NvS);
    v.dup_counts = typename P::vec(d.dup_counts, 2);
  }

  std::unique_ptr<cuda::Planner> planner_;
};
#endif

}  // namespace moonep::impl
