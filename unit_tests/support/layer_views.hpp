// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Rank-major host buffers (PerRank, what the reference layer takes) as the
// [R][n][m] Kokkos views the portable layer takes, and back: for the tests
// that hold a portable path to the reference; and a step planned by a
// portable planner.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "moonep/layer_reference.hpp"
#include "support/layer_cases.hpp"
#include "test_portable_support.hpp"

namespace layer_test {

template <class V, class Mem>
Kokkos::View<V***, Kokkos::LayoutRight, Mem> to_view(const moonep::PerRank<V>& host, std::int64_t n, std::int64_t m) {
  Kokkos::View<V***, Kokkos::LayoutRight, Mem> v("test_rows", host.size(), n, m);
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t r = 0; r < host.size(); ++r)
    for (std::int64_t i = 0; i < n * m; ++i) h(r, i / m, i % m) = host[r][i];
  Kokkos::deep_copy(v, h);
  return v;
}

// A view of rank 2 or 3 back as rank-major flat buffers.
template <class View>
moonep::PerRank<typename View::non_const_value_type> from_view(const View& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  moonep::PerRank<typename View::non_const_value_type> out(v.extent(0));
  for (std::size_t r = 0; r < v.extent(0); ++r)
    for (std::size_t i = 0; i < v.extent(1); ++i)
      for (std::size_t j = 0; j < (View::rank == 3 ? v.extent(2) : 1); ++j) {
        if constexpr (View::rank == 3) out[r].push_back(h(r, i, j));
        else out[r].push_back(h(r, i));
      }
  return out;
}

// Plans the step with a portable planner (ragged when the step is): "" when
// its plan is the reference plan the step holds, else the first difference.
template <class P>
std::string plan_step(P& planner, const Step& s) {
  const bool ragged = s.plan.tokens_per_rank.has_value();
  return moonep::plan_difference(
      moonep::test::plan_with(planner, s.routing, nullptr, ragged ? &*s.plan.tokens_per_rank : nullptr), s.plan);
}

}  // namespace layer_test
