// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/synthetic.hpp — realistic synthetic routings for the demo, the
// tests and the perf_tests: expert popularity is lognormal, so a few experts
// are hot, as after a router's first training steps.
#pragma once

#include <cstdint>

#include "moonep/host_plan.hpp"

namespace moonep {

// imbalance is the sigma of the lognormal popularity (0 = uniform; 1 is a
// typical skewed step; 3 concentrates most entries on a handful of experts).
// Each token names K distinct experts when K <= E. Deterministic in seed on
// every platform (own generator, no <random> distributions).
Routing synthetic_routing(const Config& config, double imbalance, std::uint64_t seed);

// tokens_per_expert computed from a routing.
TokensPerExpert count_tokens_per_expert(const Config& config, const Routing& routing);

}  // namespace moonep
