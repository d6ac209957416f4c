// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/device_plan_views.hpp — a rank's plan views (RankPlanView)
// over the CUDA specialization's output buffers (cuda::DeviceRankPlan), for
// both planners that plan with its kernel (moonep/impl/cuda_kernel_planner.hpp,
// moonep/impl/gpu_world_planner.hpp): unmanaged views, nothing copied.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moonep/config.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl {

// One pointer per field of MOONEP_PLAN_FIELDS, DeviceRankPlan's members of
// the same names (a field the device plan lacks is a compile error); the
// entries are the kernel's own count of the step (DeviceRankPlan::entries),
// so plan() never writes them on the host or in a kernel of its own.
inline RankPlanView<Kokkos::CudaSpace> device_plan_views(const Config& c, int r, const cuda::DeviceRankPlan& d) {
  std::int32_t* const by_field[] = {
#define MOONEP_DEVICE_PLAN_POINTER(name, ...) d.name,
      MOONEP_PLAN_FIELDS(MOONEP_DEVICE_PLAN_POINTER)
#undef MOONEP_DEVICE_PLAN_POINTER
  };
  RankPlanView<Kokkos::CudaSpace> v = RankPlanView<Kokkos::CudaSpace>::over(c, r, [&](std::size_t i) { return by_field[i]; });
  v.entries = RankPlanView<Kokkos::CudaSpace>::count(d.entries, 1);
  return v;
}

}  // namespace moonep::impl
