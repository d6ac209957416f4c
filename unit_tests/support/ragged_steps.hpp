// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// unit_tests/support/ragged_steps.hpp — ragged steps (docs/spec/planning.md
// "Ragged steps") for any test: token counts of the shapes the spec singles
// out (zeros, one full rank, remainders on the lowest ranks) and routings cut
// to them.
#pragma once

#include <cstdint>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/impl/splitmix64.hpp"

namespace moonep::test {

// routing[r] cut to its first tokens[r]*K ids (a full routing's prefix: the
// tokens a ragged rank holds).
inline Routing cut_to_tokens(const Config& c, Routing routing, const TokensPerRank& tokens) {
  for (std::size_t r = 0; r < routing.size(); ++r)
    routing[r].resize(static_cast<std::size_t>(tokens[r]) * static_cast<std::size_t>(c.topk));
  return routing;
}

// routing with every rank's row padded to S*K ids with `experts`, which is
// no expert id: the buffers of a planner whose kernel reads each rank's
// first s_r*K ids of S*K (the CUDA kernels, which alone read the counts),
// so that reading one past them fails the step as bad input.
inline Routing padded_to_full(const Config& c, Routing routing) {
  for (auto& row : routing)
    if (static_cast<std::int64_t>(row.size()) < c.entries()) row.resize(static_cast<std::size_t>(c.entries()), c.experts);
  return routing;
}

// Token counts for trial `trial`, cycling through the shapes: random counts
// in 0..S with some zeros and some full ranks; every rank empty but one
// full; one rank empty, the others full; all empty; random counts of one
// token or none; all full (a full step given as counts).
inline TokensPerRank ragged_tokens(const Config& c, int trial, impl::SplitMix64& rng) {
  const int R = c.ranks, S = c.tokens;
  TokensPerRank t(static_cast<std::size_t>(R), S);
  const int full = rng.below(R);
  for (int r = 0; r < R; ++r) {
    switch (trial % 6) {
      case 0: {
        const int pick = rng.below(4);
        t[r] = pick == 0 ? 0 : pick == 1 ? S : rng.below(S + 1);
        break;
      }
      case 1: t[r] = r == full ? S : 0; break;
      case 2: t[r] = r == full ? 0 : S; break;
      case 3: t[r] = 0; break;
      case 4: t[r] = rng.below(2); break;
      default: t[r] = S; break;
    }
  }
  return t;
}

// Counts of a ragged step from `seed` that hold both extremes (with two
// ranks or more): rank seed mod R holds no token, the next rank all S, the
// others uniform in 0..S.
inline TokensPerRank ragged_tokens_with_extremes(const Config& c, std::uint64_t seed) {
  impl::SplitMix64 rng{seed};
  const int R = c.ranks, empty = static_cast<int>(seed % static_cast<std::uint64_t>(R));
  TokensPerRank t(static_cast<std::size_t>(R));
  for (int r = 0; r < R; ++r) t[r] = rng.below(c.tokens + 1);
  t[empty] = 0;
  if (R > 1) t[(empty + 1) % R] = c.tokens;
  return t;
}

}  // namespace moonep::test
