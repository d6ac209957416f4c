// Destination rank d's receive buffer A_d [NvS][H], in the plan's group
// order, the way an expert-parallel layer fills it before its grouped GEMM:
//
//   1. every slot that holds a primary entry gets its token's activation:
//      src_info[slot] = r*NvS + i names source rank r and its flat entry i,
//      so the token is i / K. (Virtual ranks share memory, so the example
//      reads X directly; a real layer receives these rows over the network.)
//   2. padding rows (zero_fill_ranges) are zeroed, so the GEMM tiles see 0s.
//   3. duplicate slots (dup_loffs) were NOT sent: the source stored their dst
//      as -dst-1 and sent the token to this rank once. Each is filled here
//      from its primary row (dup_groups), which is what the dup structures
//      are for.
//
// The buffer starts as NaN so that any row the plan fails to account for
// poisons the result instead of passing silently.
#pragma once

#include <limits>

#include <moonep/planner.hpp>

#include "moe_data.hpp"

namespace moe {

template <class RowView>
void receive_rows(const moonep::Config& c, const moonep::RankPlanView<Mem>& plan, const Array3& x,
                  const RowView& a) {
  const std::int64_t nvs = c.slots();
  const int K = c.topk, H = static_cast<int>(x.extent(2)), G = c.groups();
  Kokkos::deep_copy(a, std::numeric_limits<double>::quiet_NaN());

  auto counts = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), plan.dup_counts);
  const int n_groups = counts(0), n_dups = counts(1);

  // Which slots are duplicates (their payload was not sent).
  Kokkos::View<int*, Mem> is_dup("is_dup", nvs);
  auto dup_loffs = plan.dup_loffs;
  Kokkos::parallel_for(
      "moe::mark_duplicates", Kokkos::RangePolicy<Exec>(0, n_dups),
      KOKKOS_LAMBDA(const int j) { is_dup(dup_loffs(j)) = 1; });

  // 1. primary entries: pull the source token's row.
  auto src_info = plan.src_info;
  Kokkos::parallel_for(
      "moe::receive_primaries", Kokkos::RangePolicy<Exec>(0, nvs), KOKKOS_LAMBDA(const std::int64_t slot) {
        const std::int32_t src = src_info(slot);
        if (src < 0 || is_dup(slot)) return;
        const std::int64_t r = src / nvs, token = (src % nvs) / K;
        for (int h = 0; h < H; ++h) a(slot, h) = x(r, token, h);
      });

  // 2. padding rows of every group.
  auto zero_fill = plan.zero_fill_ranges;
  Kokkos::parallel_for(
      "moe::zero_padding", Kokkos::RangePolicy<Exec>(0, G), KOKKOS_LAMBDA(const int g) {
        for (std::int32_t row = zero_fill(g, 0); row < zero_fill(g, 0) + zero_fill(g, 1); ++row)
          for (int h = 0; h < H; ++h) a(row, h) = 0.0;
      });

  // 3. duplicates copy their primary's row (kernels on one execution space
  // instance run in order, so the primaries are in place).
  auto dup_groups = plan.dup_groups;
  Kokkos::parallel_for(
      "moe::fill_duplicates", Kokkos::RangePolicy<Exec>(0, n_groups), KOKKOS_LAMBDA(const int j) {
        const std::int32_t primary = dup_groups(j, 0), start = dup_groups(j, 1), n = dup_groups(j, 2);
        for (std::int32_t t = start; t < start + n; ++t)
          for (int h = 0; h < H; ++h) a(dup_loffs(t), h) = a(primary, h);
      });
}

// Rows in [0, used) still NaN after receive_rows: 0 when the plan's
// src_info, padding and dup structures cover the whole used buffer.
template <class RowView>
int unfilled_rows(const RowView& a, int used) {
  int n = 0;
  const int H = static_cast<int>(a.extent(1));
  Kokkos::parallel_reduce(
      "moe::unfilled_rows", Kokkos::RangePolicy<Exec>(0, used),
      KOKKOS_LAMBDA(const int row, int& bad) {
        for (int h = 0; h < H; ++h)
          if (!(a(row, h) == a(row, h))) {  // NaN
            ++bad;
            return;
          }
      },
      n);
  return n;
}

}  // namespace moe
