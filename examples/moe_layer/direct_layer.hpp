// The same layer without expert parallelism, on the host with plain loops
// (no plan, no Kokkos Kernels): out[r][s] = sum_k w[r][s][k] * X[r][s] W_e,
// e = routing[r][s*K+k]. The independent expectation the example checks.
#pragma once

#include <moonep/host_plan.hpp>

#include "moe_data.hpp"

namespace moe {

using HostArray3 = Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace>;

inline HostArray3 direct_layer(const moonep::Config& c, const moonep::Routing& routing,
                                       const LayerData& data) {
  auto x = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.x);
  auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.w);
  auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.weights);
  HostArray3 out("direct_out", c.ranks, c.tokens, data.out);
  for (int r = 0; r < c.ranks; ++r)
    for (int s = 0; s < c.tokens; ++s)
      for (int k = 0; k < c.topk; ++k) {
        const int e = routing[r][static_cast<std::size_t>(s) * c.topk + k];
        for (int o = 0; o < data.out; ++o) {
          double dot = 0;
          for (int h = 0; h < data.hidden; ++h) dot += x(r, s, h) * W(e, h, o);
          out(r, s, o) += w(r, s, k) * dot;
        }
      }
  return out;
}

}  // namespace moe
