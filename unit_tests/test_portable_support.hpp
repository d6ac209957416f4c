// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Shared by the test_portable_* binaries: routings of the shapes the spec
// singles out, and one-call helpers that plan every rank with a Planner of
// any variant (test_exec_spaces.hpp) over an InProcessWorld.
#pragma once

#include <cstdint>
#include <vector>

#include "moonep/impl/splitmix64.hpp"
#include "moonep/planner.hpp"
#include "moonep/synthetic.hpp"
#include "moonep/world.hpp"
#include "support/ragged_steps.hpp"
#include "test_exec_spaces.hpp"

namespace moonep::test {

// Deterministic everywhere (tests must not depend on <random>).
using Rng = moonep::impl::SplitMix64;

enum class Shape { uniform, skewed, heavy_skew, one_expert, repeated_in_token, random_dups };
// Every shape, in the order the sweeps cycle through them.
inline constexpr Shape kShapes[] = {Shape::uniform,    Shape::skewed,            Shape::heavy_skew,
                                    Shape::one_expert, Shape::repeated_in_token, Shape::random_dups};

// The randomized sweeps' configuration of trial `trial` on R ranks: a third
// with E == R, else up to max_epn experts per rank; K = 32 every
// k32_every-th trial; S = 1 every s1_every-th, else up to max_s; some with
// B beyond the remote experts; a quarter with tp = 1.
struct SweepShape {
  int max_epn, k32_every, max_s, s1_every;
};
inline Config sweep_config(Rng& rng, int trial, int R, const SweepShape& w) {
  const int epn = 1 + rng.below(trial % 3 == 0 ? 1 : w.max_epn);
  const int K = trial % w.k32_every == 0 ? 32 : 1 + rng.below(8);
  const int S = trial % w.s1_every == 0 ? 1 : 1 + rng.below(w.max_s);
  const int B = 1 + rng.below(trial % 5 == 0 ? 12 : 3);
  const int tp = trial % 4 == 0 ? 1 : 1 + rng.below(9);
  return Config{R, R * epn, K, S, B, tp};
}

inline Routing make_routing(const Config& c, Shape shape, std::uint64_t seed) {
  Rng rng{seed};
  switch (shape) {
    case Shape::uniform: return synthetic_routing(c, 0.0, seed);
    case Shape::skewed: return synthetic_routing(c, 1.0, seed);
    case Shape::heavy_skew: return synthetic_routing(c, 3.0, seed);
    default: break;
  }
  Routing r(c.ranks, std::vector<std::int32_t>(c.entries()));
  const int hot = rng.below(c.experts);
  for (int rank = 0; rank < c.ranks; ++rank) {
    for (int s = 0; s < c.tokens; ++s) {
      const int token_expert = rng.below(c.experts);
      for (int k = 0; k < c.topk; ++k) {
        std::int32_t e = 0;
        if (shape == Shape::one_expert) e = hot;
        else if (shape == Shape::repeated_in_token) e = token_expert;       // one expert K times
        else e = rng.below(c.experts);                                      // duplicates allowed
        r[rank][static_cast<std::size_t>(s) * c.topk + k] = e;
      }
    }
  }
  return r;
}

// Copies of host arrays in MemorySpace, one per rank.
template <class MemorySpace>
std::vector<Kokkos::View<const std::int32_t*, MemorySpace>> to_views(
    const std::vector<std::vector<std::int32_t>>& host) {
  std::vector<Kokkos::View<const std::int32_t*, MemorySpace>> out;
  for (const auto& row : host) {
    Kokkos::View<std::int32_t*, MemorySpace> v("test_input", row.size());
    Kokkos::deep_copy(v, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                             row.data(), row.size()));
    out.push_back(v);
  }
  return out;
}

template <class P>
HostPlan to_host(const P& planner) {
  HostPlan out;
  out.config = planner.config();
  for (std::size_t i = 0; i < planner.last_plan().ranks.size(); ++i) out.ranks.push_back(planner.last_plan().to_host(i));
  return out;
}

// The routing a planner of type P is handed for a ragged step (tokens
// given) of `routing` (each rank's s_r*K ids): as it is, except for the
// CUDA specialization, whose kernel alone reads the counts and which
// therefore takes views of S*K ids, padded with ids that are no expert
// (padded_to_full): a kernel reading past s_r*K fails the step.
template <class P>
Routing routing_for(const Config& c, const Routing& routing, const TokensPerRank* tokens) {
  return tokens && P::uses_cuda_specialization ? padded_to_full(c, routing) : routing;
}

// Plans with an existing planner. A ragged step (tokens given) hands the
// counts in a view of R values, and routing views of exactly s_r*K ids
// (S*K for the CUDA specialization: routing_for).
template <class P>
HostPlan plan_with(P& planner, const Routing& routing, const TokensPerExpert* tpe = nullptr,
                   const TokensPerRank* tokens = nullptr) {
  using Mem = typename P::memory_space;
  const auto views = to_views<Mem>(routing_for<P>(planner.config(), routing, tokens));
  const auto tv = tpe ? to_views<Mem>(*tpe) : decltype(views){};
  const auto counts = tokens ? to_views<Mem>({*tokens}) : decltype(views){};
  planner.plan(views, tpe ? &tv : nullptr, tokens ? &counts[0] : nullptr);
  HostPlan out = to_host(planner);
  if (tokens) out.tokens_per_rank = *tokens;
  return out;
}

// Plans with a fresh world and planner.
template <class P>
HostPlan plan_fresh(const Config& c, const Routing& routing, const TokensPerExpert* tpe = nullptr,
                    const TokensPerRank* tokens = nullptr) {
  InProcessWorld<typename P::memory_space> world(c.ranks);
  P planner(c, world);
  return plan_with(planner, routing, tpe, tokens);
}

}  // namespace moonep::test
