// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/input_shapes.hpp — the host facts of a plan() call, checked
// by every Planner implementation before any kernel runs and in the same
// words: one routing (and tokens_per_expert) array per local rank, each of
// the configured length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/reference.hpp"

namespace moonep::impl {

// A planner's configuration: Kokkos running (RuntimeError), the
// configuration valid and of the world's size (InputError).
inline const Config& checked_config(const Config& c, int world_size) {
  if (!Kokkos::is_initialized()) {
    throw RuntimeError("moonep::Planner: Kokkos is not initialized (make planners between Kokkos::initialize "
                       "and Kokkos::finalize)");
  }
  validate(c);
  if (world_size != c.ranks) {
    throw InputError("the world has " + std::to_string(world_size) + " ranks but the config says ranks = " +
                     std::to_string(c.ranks));
  }
  return c;
}

// "" when the shapes are right, else the message of the first problem.
// With tokens_per_rank (a ragged step: R counts, read on the device) the
// routing lengths depend on the counts and are checked with them, by the
// planner's kernels (every path: a view needs s_r*K ids); without, every
// routing holds exactly S*K ids.
template <class View>
std::string input_shape_error(const Config& c, const std::vector<int>& local_ranks,
                              const std::vector<View>& routing, const std::vector<View>* tpe,
                              const View* tokens_per_rank = nullptr) {
  const std::size_t nlocal = local_ranks.size();
  if (routing.size() != nlocal) {
    return "routing has " + std::to_string(routing.size()) + " rank arrays, expected this process's " +
           std::to_string(nlocal) + " local ranks";
  }
  if (tpe && tpe->size() != nlocal) {
    return "tokens_per_expert has " + std::to_string(tpe->size()) + " rank arrays, expected this process's " +
           std::to_string(nlocal) + " local ranks";
  }
  if (tokens_per_rank && static_cast<int>(tokens_per_rank->extent(0)) != c.ranks) {
    return "tokens_per_rank has " + std::to_string(tokens_per_rank->extent(0)) + " counts, expected ranks = " +
           std::to_string(c.ranks);
  }
  for (std::size_t li = 0; li < nlocal; ++li) {
    // A ragged step's routing only needs s_r*K ids (at most S*K): its
    // length is no host fact, so a stand-in that passes the length check.
    const std::int64_t routing_len = tokens_per_rank ? c.entries() : static_cast<std::int64_t>(routing[li].extent(0));
    const std::string why = rank_input_length_error(c, local_ranks[li], routing_len, tpe != nullptr,
                                                    tpe ? static_cast<std::int64_t>((*tpe)[li].extent(0)) : 0);
    if (!why.empty()) return why;
  }
  return {};
}

}  // namespace moonep::impl
