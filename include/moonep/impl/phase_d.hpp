// moonep/impl/phase_d.hpp — Phase D on each destination rank: its outputs
// from its chunk. src_info is the first value of each slot; the dup
// structures of step 8 come from the dup links the sources published (a
// scan numbers the primaries and their duplicate ranges, then each
// duplicate drops its slot into its primary's range at its own index); the
// small tables are copied from the broadcast.
#pragma once

#include <cstdint>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl::portable {

template <class Exec>
void rank_outputs(const Exec& exec, const ChunkLayout& L, int rank, typename Types<Exec>::ivec shared,
                  typename Types<Exec>::ivec own, typename Types<Exec>::ivec slot_dstart,
                  const RankPlanView<typename Types<Exec>::mem>& out) {
  using T = Types<Exec>;
  const std::int64_t NvS = L.NvS, slots_at = L.slots;
  const auto src_info = out.src_info;
  const auto dup_groups = out.dup_groups;
  const auto dup_loffs = out.dup_loffs;
  const auto dup_counts = out.dup_counts;
  // Packs (groups, duplicates) so that one integer scan counts both.
  constexpr std::int64_t kGroup = std::int64_t(1) << 32;
  Kokkos::parallel_scan(
      "moonep::portable::phaseD_dup_groups", typename T::range(exec, 0, NvS),
      KOKKOS_LAMBDA(const std::int64_t loff, std::int64_t& run, const bool final) {
        const std::int32_t link = own(slots_at + 3 * loff + 1);
        const std::int64_t n = link <= -2 ? -2 - link : 0;
        const std::int64_t mine = n > 0 ? kGroup + n : 0;
        if (final) {
          src_info(loff) = own(slots_at + 3 * loff);
          if (n > 0) {
            const std::int64_t g = run / kGroup, start = run % kGroup;
            dup_groups(g, 0) = static_cast<std::int32_t>(loff);
            dup_groups(g, 1) = static_cast<std::int32_t>(start);
            dup_groups(g, 2) = static_cast<std::int32_t>(n);
            slot_dstart(loff) = static_cast<std::int32_t>(start);
          }
          if (loff == NvS - 1) {
            dup_counts(0) = static_cast<std::int32_t>((run + mine) / kGroup);
            dup_counts(1) = static_cast<std::int32_t>((run + mine) % kGroup);
          }
        }
        run += mine;
      });
  Kokkos::parallel_for(
      "moonep::portable::phaseD_dup_loffs", typename T::range(exec, 0, NvS),
      KOKKOS_LAMBDA(const std::int64_t loff) {
        const std::int32_t link = own(slots_at + 3 * loff + 1);
        if (link >= 0) dup_loffs(slot_dstart(link) + own(slots_at + 3 * loff + 2)) = static_cast<std::int32_t>(loff);
      });
  const int G = L.E + L.B, R = L.R, B = L.B;
  const std::int64_t ow_cu = L.own + L.ow_cu, ow_zfr = L.own + L.ow_zfr, ow_rs = L.own + L.ow_rs;
  const std::int64_t sh_etc = L.shared + L.sh_etc;
  const auto cu = out.cu_seqlens;
  const auto zfr = out.zero_fill_ranges;
  const auto etc = out.experts_to_copy;
  const auto rs = out.remote_stats;
  const int n = G > R * B ? G : R * B;
  (void)rank;
  Kokkos::parallel_for(
      "moonep::portable::phaseD_tables", typename T::range(exec, 0, n), KOKKOS_LAMBDA(const int i) {
        if (i < G) {
          cu(i) = own(ow_cu + i);
          zfr(i, 0) = own(ow_zfr + 2 * i);
          zfr(i, 1) = own(ow_zfr + 2 * i + 1);
        }
        if (i < R * B) etc(i / B, i % B) = shared(sh_etc + i);
        if (i < 2) rs(i) = own(ow_rs + i);
      });
}

}  // namespace moonep::impl::portable
