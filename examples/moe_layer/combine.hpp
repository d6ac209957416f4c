// Combine: every source token sums its K expert outputs, each weighted by
// its routing weight: out[r][s] = sum_k w[r][s][k] * Y_d[loff], where
// dst[r][s*K+k] = d*NvS + loff. An entry deduplicated by the plan is stored
// as -dst-1: it carried no payload but still owns its slot (whose row
// receive_rows filled from the primary) and its weight, so it is decoded
// and counted like any other.
#pragma once

#include <moonep/planner.hpp>

#include "moe_data.hpp"

namespace moe {

// y: [R][NvS][H'] every destination's GEMM output; out: [R][S][H'].
inline void combine(const moonep::Config& c, int r, const moonep::RankPlanView<Mem>& plan, const Array3& w,
                    const Array3& y, const Array3& out) {
  const std::int64_t nvs = c.slots();
  const int K = c.topk, O = static_cast<int>(y.extent(2));
  auto dst = plan.dst;
  Kokkos::parallel_for(
      "moe::combine", Kokkos::RangePolicy<Exec>(0, c.tokens), KOKKOS_LAMBDA(const int s) {
        for (int o = 0; o < O; ++o) out(r, s, o) = 0.0;
        for (int k = 0; k < K; ++k) {
          std::int64_t code = dst(s * K + k);
          if (code < 0) code = -code - 1;  // duplicate: same decoding
          const std::int64_t d = code / nvs, loff = code % nvs;
          const double weight = w(r, s, k);
          for (int o = 0; o < O; ++o) out(r, s, o) += weight * y(d, loff, o);
        }
      });
}

}  // namespace moe
