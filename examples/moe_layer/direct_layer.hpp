// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The same layer without expert parallelism, on the host with plain loops
// (no plan, no Kokkos Kernels), docs/spec/layer.md "The linear layer":
// out[r][s] = sum_k w * X[r][s] W_e, and given g = d out:
// gX[r][s] = sum_k w * g W_e^T, gw[r][s][k] = <g, X[r][s] W_e>,
// gW_e = sum over the entries naming e of w * X[r][s]^T g.
// The independent expectation the example checks.
#pragma once

#include <moonep/host_plan.hpp>

#include "moe_data.hpp"

namespace moe {

using HostArray3 = Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace>;

struct Direct {
  HostArray3 out, gx, gw, gweights;
};

inline Direct direct_layer(const moonep::Config& c, const moonep::Routing& routing, const LayerData& data,
                           const Array3& grad_out) {
  auto x = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.x);
  auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.w);
  auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.weights);
  auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad_out);
  Direct d{HostArray3("direct_out", c.ranks, c.tokens, data.out), HostArray3("direct_gx", c.ranks, c.tokens, data.hidden),
           HostArray3("direct_gw", c.ranks, c.tokens, c.topk),
           HostArray3("direct_gW", c.experts, data.hidden, data.out)};
  for (int r = 0; r < c.ranks; ++r)
    for (int s = 0; s < c.tokens; ++s)
      for (int k = 0; k < c.topk; ++k) {
        const int e = routing[r][static_cast<std::size_t>(s) * c.topk + k];
        for (int o = 0; o < data.out; ++o) {
          double dot = 0;
          for (int h = 0; h < data.hidden; ++h) {
            dot += x(r, s, h) * W(e, h, o);
            d.gx(r, s, h) += w(r, s, k) * g(r, s, o) * W(e, h, o);
            d.gweights(e, h, o) += w(r, s, k) * x(r, s, h) * g(r, s, o);
          }
          d.out(r, s, o) += w(r, s, k) * dot;
          d.gw(r, s, k) += g(r, s, o) * dot;
        }
      }
  return d;
}

}  // namespace moe
