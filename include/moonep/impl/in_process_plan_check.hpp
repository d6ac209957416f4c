// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The first check of every in-process layer operation (InProcessLayer,
// InProcessExpertCopies): the plan is of this configuration and holds every
// rank r, planned, at index r, as a Planner over an InProcessWorld makes it.
// Host metadata only: reads nothing on the device.
#pragma once

#include <string>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl {

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
