// moonep/impl/device_plan_views.hpp — a rank's plan views (RankPlanView)
// over the CUDA specialization's output buffers (cuda::DeviceRankPlan), for
// both planners that plan with its kernel (moonep/impl/cuda_spec_planner.hpp,
// moonep/impl/gpu_world_spec_planner.hpp): unmanaged views, nothing copied;
// and RankPlanView::entries of a step, kept on the device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moonep/config.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl {

// One pointer per field of MOONEP_PLAN_FIELDS, DeviceRankPlan's members of
// the same names (a field the device plan lacks is a compile error).
inline RankPlanView<Kokkos::CudaSpace> device_plan_views(const Config& c, int r, const cuda::DeviceRankPlan& d) {
  std::int32_t* const by_field[] = {
#define MOONEP_DEVICE_PLAN_POINTER(name, ...) d.name,
      MOONEP_PLAN_FIELDS(MOONEP_DEVICE_PLAN_POINTER)
#undef MOONEP_DEVICE_PLAN_POINTER
  };
  return RankPlanView<Kokkos::CudaSpace>::over(c, r, [&](std::size_t i) { return by_field[i]; });
}

// Every rank's N_r = s_r*K of the last step (RankPlanView::entries: how
// much of dst it wrote), as the portable phases keep it (PlanStore::entries),
// but written from the counts by a kernel on the step's stream: the host
// never reads a count, so plan() stays free of host syncs before the
// launch. A count outside 0..S is clamped (the planning kernel reports it
// and check() throws; the step's plan is void either way).
class DeviceStepEntries {
 public:
  using count_view = RankPlanView<Kokkos::CudaSpace>::count;

  DeviceStepEntries() = default;
  explicit DeviceStepEntries(const Config& c)
      : fill_{Kokkos::View<std::int32_t*, Kokkos::CudaSpace>("moonep::cuda::entries", static_cast<std::size_t>(c.ranks)),
              nullptr, c.tokens, c.topk} {
    Kokkos::deep_copy(fill_.entries, static_cast<std::int32_t>(c.entries()));  // a full step's S*K
  }

  // Rank r's entry, for its RankPlanView.
  count_view of(int r) const { return count_view(fill_.entries.data() + r, 1); }

  // Enqueues entries[r] = counts[r]*K for every rank on exec, after what
  // exec's stream holds; with counts null, S*K, which the entries already
  // hold unless the step before was ragged: full steps launch nothing.
  void write(const Kokkos::Cuda& exec, const std::int32_t* counts) {
    if (!counts && !holds_ragged_) return;
    fill_.counts = counts;
    holds_ragged_ = counts != nullptr;
    Kokkos::parallel_for("moonep::cuda::entries",
                         Kokkos::RangePolicy<Kokkos::Cuda>(exec, 0, static_cast<int>(fill_.entries.extent(0))), fill_);
  }

  struct Fill {
    Kokkos::View<std::int32_t*, Kokkos::CudaSpace> entries;
    const std::int32_t* counts;  // R counts in device memory, or null
    std::int32_t S, K;
    KOKKOS_INLINE_FUNCTION void operator()(const int r) const {
      std::int32_t s = counts ? counts[r] : S;
      s = s < 0 ? 0 : s > S ? S : s;
      entries(r) = s * K;
    }
  };

 private:
  Fill fill_{};
  bool holds_ragged_ = false;  // the entries hold a ragged step's counts
};

}  // namespace moonep::impl
