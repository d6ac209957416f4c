// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the in-process layer operations (InProcessLayer,
// InProcessExpertCopies, InProcessMoeLayer) share: their first check (the
// plan is of this configuration and holds every rank r, planned, at index
// r, as a Planner over an InProcessWorld makes it; host metadata only,
// reads nothing on the device), their kernels' policy, and the one read of
// the plan's group sizes on the host that some of them need.
#pragma once

#include <cstdint>
#include <string>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl {

// The layers' kernels: 64-bit indices, and light weight, as the planner's
// (portable_types.hpp): on Kokkos::Cuda a functor of 512 bytes or more is
// otherwise copied to constant memory, and its launch first waits on the
// host for the previous such kernel, a host round trip no Kokkos Tools
// callback shows.
template <class ExecutionSpace>
using layer_policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>,
                                         Kokkos::Experimental::WorkItemProperty::HintLightWeight_t>;

// Every rank's cu_seqlens (R*(E+B) values) into host[R][E+B], waiting for
// the plan: one copy when the plan keeps the ranks' tables back to back (a
// portable Planner's plan does), else one per rank.
template <class MemorySpace>
void read_group_sizes(const Plan<MemorySpace>& plan, const Config& config, std::int32_t* host) {
  using host_view = Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using plan_view = Kokkos::View<const std::int32_t*, MemorySpace, Kokkos::MemoryUnmanaged>;
  const std::size_t G = static_cast<std::size_t>(config.groups()), R = static_cast<std::size_t>(config.ranks);
  const std::int32_t* first = plan.ranks[0].cu_seqlens.data();
  bool together = true;
  for (std::size_t d = 1; d < R; ++d) together = together && plan.ranks[d].cu_seqlens.data() == first + d * G;
  if (together) {
    Kokkos::deep_copy(host_view(host, R * G), plan_view(first, R * G));
    return;
  }
  for (std::size_t d = 0; d < R; ++d)
    Kokkos::deep_copy(host_view(host + d * G, G), plan_view(plan.ranks[d].cu_seqlens.data(), G));
}

template <class MemorySpace>
void check_in_process_plan(const Plan<MemorySpace>& plan, const Config& config, const char* op) {
  const Config& c = plan.config;
  const bool same = c.ranks == config.ranks && c.experts == config.experts && c.topk == config.topk &&
                    c.tokens == config.tokens && c.copy_slots == config.copy_slots &&
                    c.token_padding == config.token_padding;
  if (!same)
    throw InputError(std::string(op) + ": the plan is of " + describe(c) + ", the layer of " + describe(config));
  if (plan.ranks.size() != static_cast<std::size_t>(config.ranks))
    throw InputError(std::string(op) + ": the plan holds " + std::to_string(plan.ranks.size()) +
                     " ranks; the in-process layer needs all " + std::to_string(config.ranks));
  for (int r = 0; r < config.ranks; ++r)
    if (plan.ranks[r].rank != r || plan.ranks[r].entries.extent(0) < 1)
      throw InputError(std::string(op) + ": plan rank " + std::to_string(r) + " is not a planned rank " +
                       std::to_string(r) + " (use the plan of a Planner over an InProcessWorld)");
}

}  // namespace moonep::impl
