// moonep/impl/full_step_input.hpp — the host checks of a plan() call for a
// planner whose kernel plans full steps only (the CUDA specialization, on
// virtual ranks or over a GPU world), in one place so that wiring ragged
// steps into the kernel changes one function.
//
// What must stay true: bad input is InputError in the portable planner's
// words (moonep/impl/input_shapes.hpp) and comes before the refusal of a
// ragged step (RuntimeError); tokens_per_rank of S on every rank is a full
// step and is planned; nothing here launches or allocates on the device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/input_shapes.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/reference.hpp"

namespace moonep::impl {

// Throws unless (routing, tokens_per_expert, tokens_per_rank) is a full
// step of `c` for the local ranks: InputError for bad shapes or counts,
// RuntimeError "`planner` does not plan ragged steps yet; use
// `instead`" for a ragged one. tokens_per_rank is read back to the host.
template <class View>
void check_full_step_input(const Config& c, const std::vector<int>& local_ranks, const std::vector<View>& routing,
                           const std::vector<View>* tokens_per_expert, const View* tokens_per_rank,
                           const char* planner, const char* instead) {
  // Shapes as the counts say, then the counts, then the refusal; a full
  // step, counts or not, must hold S*K ids on every rank (the kernel
  // reads them).
  std::string why = input_shape_error(c, local_ranks, routing, tokens_per_expert, tokens_per_rank);
  if (!why.empty()) throw InputError(why);
  if (tokens_per_rank) {
    TokensPerRank h(static_cast<std::size_t>(c.ranks));
    Kokkos::deep_copy(Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(), h.size()),
                      *tokens_per_rank);
    for (int r = 0; r < c.ranks; ++r) {
      why = rank_tokens_error(c, r, h[r]);
      if (!why.empty()) throw InputError(why);
    }
    if (is_ragged(c, &h)) {
      throw RuntimeError(std::string(planner) + " does not plan ragged steps yet; use " + instead);
    }
  }
  why = input_shape_error(c, local_ranks, routing, tokens_per_expert);
  if (!why.empty()) throw InputError(why);
}

}  // namespace moonep::impl
