// Destination rank d's expert computation: Y_d = A_d * W_expert, one GEMM per
// non-empty group of its receive buffer (Kokkos Kernels, on subviews).
//
// Which expert a group is (docs/spec/planning.md step 5): group g < E is expert
// g (empty when g was picked as a copy somewhere); group E+b is
// experts_to_copy[d][b], whose weights d fetched into its copy slot b.
#pragma once

#include <KokkosBlas3_gemm.hpp>

#include <vector>

#include <moonep/planner.hpp>

#include "moe_data.hpp"

namespace moe {

// Rank d's weight copy slots [B][H][H'] filled from the owners' weights: the
// "fetch" a real layer does over the network before its GEMMs. Returns how
// many experts d fetched.
inline int fetch_copies(const moonep::Config& c, int d, const std::vector<std::int32_t>& experts_to_copy,
                        const Array3& weights, const Array3& copy_slots) {
  int fetched = 0;
  for (int b = 0; b < c.copy_slots; ++b) {
    const std::int32_t e = experts_to_copy[static_cast<std::size_t>(d) * c.copy_slots + b];
    if (e < 0) continue;  // slot unused this step
    Kokkos::deep_copy(Kokkos::subview(copy_slots, b, Kokkos::ALL, Kokkos::ALL),
                      Kokkos::subview(weights, e, Kokkos::ALL, Kokkos::ALL));
    ++fetched;
  }
  return fetched;
}

struct GemmCount {
  int gemms = 0;
  int remote_uncopied = 0;  // groups g < E of a non-owned expert (more remote experts than B)
};

template <class RowView, class OutView>
GemmCount grouped_gemm(const moonep::Config& c, int d, const std::vector<std::int32_t>& cu_seqlens,
                       const std::vector<std::int32_t>& experts_to_copy, const Array3& weights,
                       const Array3& copy_slots, const RowView& a, const OutView& y) {
  GemmCount n;
  const int E = c.experts, epn = c.experts_per_rank();
  for (int g = 0; g < c.groups(); ++g) {
    const std::int32_t start = g == 0 ? 0 : cu_seqlens[g - 1], end = cu_seqlens[g];
    if (end == start) continue;
    const auto rows = Kokkos::make_pair(start, end);  // count + padding rows
    const auto a_g = Kokkos::subview(a, rows, Kokkos::ALL);
    const auto y_g = Kokkos::subview(y, rows, Kokkos::ALL);
    if (g < E) {
      // Expert g's own weights. When d does not own g (the step had more
      // remote experts for d than copy slots) a real layer reads them from
      // the owner without a copy slot; the example counts those.
      if (g / epn != d) ++n.remote_uncopied;
      KokkosBlas::gemm("N", "N", 1.0, a_g, Kokkos::subview(weights, g, Kokkos::ALL, Kokkos::ALL), 0.0, y_g);
    } else {
      // The fetched copy of experts_to_copy[d][g-E].
      KokkosBlas::gemm("N", "N", 1.0, a_g, Kokkos::subview(copy_slots, g - E, Kokkos::ALL, Kokkos::ALL), 0.0,
                       y_g);
    }
    ++n.gemms;
  }
  return n;
}

}  // namespace moe
