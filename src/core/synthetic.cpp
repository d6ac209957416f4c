// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Synthetic routings with lognormal expert popularity. The generator is our
// own (splitmix64 + Box-Muller) so a seed gives the same routing with every
// compiler and standard library.
#include "moonep/synthetic.hpp"

#include "moonep/impl/splitmix64.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace moonep {

using impl::SplitMix64;

Routing synthetic_routing(const Config& c, double imbalance, std::uint64_t seed) {
  SplitMix64 rng{seed * 0x2545F4914F6CDD1Dull + 1};
  const int E = c.experts, K = c.topk;
  // Cumulative popularity, for drawing an expert by binary search.
  std::vector<double> cdf(E);
  double acc = 0;
  for (int e = 0; e < E; ++e) cdf[e] = (acc += std::exp(imbalance * rng.normal()));
  const bool distinct = K <= E;
  Routing routing(c.ranks, std::vector<std::int32_t>(c.entries()));
  std::vector<std::int32_t> chosen;
  for (int r = 0; r < c.ranks; ++r) {
    for (int s = 0; s < c.tokens; ++s) {
      chosen.clear();
      for (int k = 0; k < K; ++k) {
        std::int32_t e = 0;
        for (int attempt = 0;; ++attempt) {
          const double x = rng.uniform() * acc;
          e = static_cast<std::int32_t>(std::upper_bound(cdf.begin(), cdf.end(), x) - cdf.begin());
          e = std::min(e, E - 1);
          if (!distinct || std::find(chosen.begin(), chosen.end(), e) == chosen.end()) break;
          if (attempt >= 64) {  // extreme skew: take the next free expert
            while (std::find(chosen.begin(), chosen.end(), e) != chosen.end()) e = (e + 1) % E;
            break;
          }
        }
        chosen.push_back(e);
        routing[r][static_cast<std::size_t>(s) * K + k] = e;
      }
    }
  }
  return routing;
}

TokensPerExpert count_tokens_per_expert(const Config& c, const Routing& routing) {
  TokensPerExpert tpe(routing.size(), std::vector<std::int32_t>(c.experts, 0));
  for (std::size_t r = 0; r < routing.size(); ++r)
    for (std::int32_t e : routing[r]) ++tpe[r][e];
  return tpe;
}

}  // namespace moonep
