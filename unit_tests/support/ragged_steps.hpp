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

}  // namespace moonep::test
