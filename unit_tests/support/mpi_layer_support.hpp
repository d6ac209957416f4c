// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Shared by the MPI expert-copy and MoE-layer tests: one rank's rows of a
// rank-major buffer as a host view, and this process's rank of a step
// planned by a Planner over an MPI world.
#pragma once

#include <cstring>
#include <vector>

#include "moonep/planner.hpp"
#include "support/layer_cases.hpp"

namespace layer_test {

using MpiPlanner = moonep::Planner<Kokkos::DefaultHostExecutionSpace>;

template <class V>
using HostRows = Kokkos::View<V**, Kokkos::LayoutRight, Kokkos::HostSpace>;

// `rank_rows` as a [rows][width] view (a copy).
template <class V>
HostRows<V> host_rows(const std::vector<V>& rank_rows, std::int64_t rows, std::int64_t width) {
  HostRows<V> v("test_rows", rows, width);
  std::memcpy(v.data(), rank_rows.data(), rank_rows.size() * sizeof(V));
  return v;
}
template <class V>
std::vector<V> values_of(const HostRows<V>& v) {
  return std::vector<V>(v.data(), v.data() + v.size());
}

// Plans this process's rank of the step (ragged: its s_r*K ids in a view
// of S*K whose tail is no expert, and every rank's count).
inline void plan_mine(MpiPlanner& planner, const Step& s, int me) {
  const Config& c = s.c;
  Kokkos::View<std::int32_t*, Kokkos::HostSpace> ids("ids", c.entries()), counts("counts", c.ranks);
  for (std::int64_t i = 0; i < c.entries(); ++i)
    ids(i) = i < static_cast<std::int64_t>(s.routing[me].size()) ? s.routing[me][i] : c.experts;
  for (int r = 0; r < c.ranks; ++r) counts(r) = s.tokens[r];
  const std::vector<MpiPlanner::input_view> mine{ids};
  const MpiPlanner::input_view tokens = counts;
  planner.plan(mine, nullptr, s.plan.tokens_per_rank ? &tokens : nullptr);
}

// The reference's refusal of the step ("rank d would run expert ..."), or "".
inline std::string refusal_of(const Step& s) {
  try {
    moonep::check_experts_runnable(s.plan);
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace layer_test
