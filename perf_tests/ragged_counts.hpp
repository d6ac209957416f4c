// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// ragged_counts.hpp — the ragged step the perf_tests benches time next to
// the full step of the same configuration (docs/spec/planning.md "Ragged
// steps"), in one place so that host_sweep and moonep_gpu_bench time the
// same step: s_r tokens on rank r, drawn in pairs s and S - s with s
// uniform in 0..S (std::mt19937_64, seed 42; an odd last rank S/2), so
// every s_r is uniform in 0..S and their mean is exactly S/2. Each rank
// keeps the first s_r tokens of the full step's routing.
#pragma once

#include <cstdint>
#include <random>

#include "moonep/config.hpp"
#include "moonep/host_plan.hpp"

namespace moonep::perf {

inline TokensPerRank ragged_counts(const Config& c) {
  std::mt19937_64 rng(42);
  TokensPerRank tokens(static_cast<std::size_t>(c.ranks), c.tokens / 2);
  for (int r = 0; r + 1 < c.ranks; r += 2) {
    tokens[r] = static_cast<std::int32_t>(rng() % (static_cast<std::uint64_t>(c.tokens) + 1));
    tokens[r + 1] = c.tokens - tokens[r];
  }
  return tokens;
}

// Each rank's first s_r*K ids of `routing` (what the reference planner
// and the host sort get; device planners read them from S*K buffers).
inline Routing cut_to_counts(const Config& c, Routing routing, const TokensPerRank& tokens) {
  for (int r = 0; r < c.ranks; ++r) routing[r].resize(static_cast<std::size_t>(tokens[r]) * c.topk);
  return routing;
}

// T = sum of s_r*K, the step's routed entries (CsvRow::entries).
inline std::int64_t routed_entries(const Config& c, const TokensPerRank& tokens) {
  std::int64_t t = 0;
  for (const std::int32_t s : tokens) t += static_cast<std::int64_t>(s) * c.topk;
  return t;
}

}  // namespace moonep::perf
