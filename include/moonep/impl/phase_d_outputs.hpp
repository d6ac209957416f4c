// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_d_outputs.hpp — Phase D on every local destination rank at
// once: its outputs from its chunk. src_info is the first value of each
// slot; the dup structures of step 8 come from the dup links the sources
// published; the small tables are copied from the per-rank and shared
// tables.
//
// How, by form (HostForm or DeviceForm, portable_types.hpp):
//  * host: one kernel, phaseD_dup_structures, one local rank per work item
//    walking its slots in order: src_info, each primary's dup_groups row
//    and the start of its duplicates (dstart), then the duplicates, then
//    the small tables. The rank's slots stay in cache between the walks
//    (a scan over all ranks would stream them twice from memory); the
//    parallelism is over local ranks.
//  * device: two kernels, parallel_for only (each can be a node of the step
//    graph, portable_types.hpp), over tiles of kSlotTile slots of every
//    local rank, one team per tile. A primary is a slot whose token has
//    duplicates here; the two counts before it in its rank (primaries and
//    their duplicates) are packed in one int64 (groups << 32 | duplicates)
//    so that one integer scan counts both. phaseD_dup_groups: each team
//    scans its tile, writes src_info and, per primary, the two counts
//    before it within the tile (dgroup, dstart), and the tile's total
//    (tile_sums). phaseD_dup_structures: each team scans its rank's tile
//    totals (a few per rank) in scratch, then writes each primary's
//    dup_groups row, drops each duplicate into its primary's range at its
//    own index (its primary's tile prefix plus its dstart), and copies the
//    small tables. The packed halves never borrow, as the duplicate count
//    only grows along the scan; each half fits int32 (NvS does).
// Either way dup_groups rows are in slot order (the spec allows any).
#pragma once

#include <cstdint>
#include <string>

#include "moonep/config.hpp"
#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl::portable {

// The outputs of every local rank, each one allocation with a rank
// dimension; the plan's views alias them (view(l)).
// Slots per team of the device form's Phase D.
inline constexpr std::int64_t kSlotTile = 1024;
// What the device form's Phase D tiles: a rank's NvS slots, and its small
// tables (CopyTables::width_, max(E+B, R*B, 2) entries) beside them.
inline std::int64_t slot_tile_width(const Config& c) {
  const std::int64_t G = static_cast<std::int64_t>(c.experts) + c.copy_slots;
  const std::int64_t RB = static_cast<std::int64_t>(c.ranks) * c.copy_slots;
  std::int64_t w = G > RB ? G : RB;
  if (w < 2) w = 2;
  return c.slots() > w ? c.slots() : w;
}

template <class Exec>
struct PlanStore {
  using T = Types<Exec>;
  using Mem = typename T::mem;
  Config config;
  // One flat [L][capacity] view per plan field (MOONEP_PLAN_FIELDS), named
  // as the field.
#define MOONEP_PLAN_STORE_MEMBER(name, ...) typename T::ivec name;
  MOONEP_PLAN_FIELDS(MOONEP_PLAN_STORE_MEMBER)
#undef MOONEP_PLAN_STORE_MEMBER
  typename T::ivec entries;      // [L] N_l = s_l*K of the last step: how much of dst is meaningful
  std::int64_t tiles = 1;        // device: slot tiles per rank (tiles of kSlotTile cover NvS and the tables)
  typename T::lvec tile_sums;    // device: [L][tiles] packed counts of each tile
  typename T::ivec dgroup;       // [L][NvS] primaries before a primary (device: in its tile)
  typename T::ivec dstart;       // [L][NvS] duplicates before a primary (device: in its tile)

  PlanStore() = default;
  PlanStore(const Config& c, int L, bool host_style) : config(c) {
    const std::int64_t NvS = c.slots();
    const std::string p = "moonep::portable::plan.";
    const auto n = [L](std::int64_t per_rank) { return static_cast<std::size_t>(L * per_rank); };
#define MOONEP_PLAN_STORE_ALLOC(name, ...) allocate(name, kPlanFields[plan_field_index::name], c, L, p);
    MOONEP_PLAN_FIELDS(MOONEP_PLAN_STORE_ALLOC)
#undef MOONEP_PLAN_STORE_ALLOC
    entries = typename T::ivec(p + "entries", static_cast<std::size_t>(L));
    if (!host_style) {
      tiles = (slot_tile_width(c) + kSlotTile - 1) / kSlotTile;
      tile_sums = typename T::lvec(p + "tile_sums", static_cast<std::size_t>(L * tiles));
    }
    dgroup = compat::uninitialized_view<typename T::ivec>(p + "dgroup", n(NvS));
    dstart = compat::uninitialized_view<typename T::ivec>(p + "dstart", n(NvS));
  }

  // Local rank l's plan (world rank `rank`) as unmanaged views of the store.
  RankPlanView<Mem> view(int l, int rank) const {
    const std::size_t ul = static_cast<std::size_t>(l);
    const typename T::ivec* by_field[] = {
#define MOONEP_PLAN_STORE_REF(name, ...) &name,
        MOONEP_PLAN_FIELDS(MOONEP_PLAN_STORE_REF)
#undef MOONEP_PLAN_STORE_REF
    };
    RankPlanView<Mem> v = RankPlanView<Mem>::over(config, rank, [&](std::size_t i) {
      return by_field[i]->data() + ul * static_cast<std::size_t>(field_capacity(kPlanFields[i], config));
    });
    v.entries = typename RankPlanView<Mem>::count(entries.data() + ul, 1);
    return v;
  }

 private:
  static void allocate(typename T::ivec& v, const PlanField& f, const Config& c, int L, const std::string& prefix) {
    const std::size_t n = static_cast<std::size_t>(L * field_capacity(f, c));
    v = f.zeroed ? typename T::ivec(prefix + f.name, n) : compat::uninitialized_view<typename T::ivec>(prefix + f.name, n);
  }
};

// The small tables of rank l (entry k < width_ = max(G, R*B, 2)): cu_seqlens and
// zero_fill_ranges from its own tables, experts_to_copy from the shared
// ones, remote_stats, and the step's N_l.
template <class Exec>
struct CopyTables {
  typename Types<Exec>::ivec cu, zfr, etc, rs, entries;
  typename Types<Exec>::refs chunk, shared_tables;
  LocalRanks<Exec> ranks;
  std::int64_t G, RB, ow_cu, ow_zfr, ow_rs, sh_etc, width_;

  CopyTables(const ChunkLayout& CL, const LocalRanks<Exec>& lr, const PlanStore<Exec>& out)
      : cu(out.cu_seqlens), zfr(out.zero_fill_ranges), etc(out.experts_to_copy), rs(out.remote_stats),
        entries(out.entries), chunk(lr.chunk), shared_tables(lr.shared_tables), ranks(lr),
        G(CL.E + CL.B), RB(static_cast<std::int64_t>(CL.R) * CL.B), ow_cu(CL.own + CL.ow_cu),
        ow_zfr(CL.own + CL.ow_zfr), ow_rs(CL.own + CL.ow_rs), sh_etc(CL.sh_etc) {
    width_ = G > RB ? G : RB;
    if (width_ < 2) width_ = 2;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t l, const std::int64_t k) const {
    const std::int32_t* own = chunk(l).at;
    if (k < G) {
      cu(l * G + k) = own[ow_cu + k];
      zfr(2 * (l * G + k)) = own[ow_zfr + 2 * k];
      zfr(2 * (l * G + k) + 1) = own[ow_zfr + 2 * k + 1];
    }
    if (k < RB) etc(l * RB + k) = shared_tables(l).at[sh_etc + k];
    if (k < 2) rs(2 * l + k) = own[ow_rs + k];
    if (k == 0) entries(l) = static_cast<std::int32_t>(ranks.entries(l));
  }
};

template <class Exec>
void rank_outputs_host(const Exec& exec, const ChunkLayout& CL, const LocalRanks<Exec>& lr,
                       const PlanStore<Exec>& out) {
  using T = Types<Exec>;
  const std::int64_t NvS = CL.NvS, slots_at = CL.slots;
  const auto chunk = lr.chunk;
  const auto src_info = out.src_info;
  const auto dstart = out.dstart;
  const auto dup_groups = out.dup_groups;
  const auto dup_loffs = out.dup_loffs;
  const auto dup_counts = out.dup_counts;
  const CopyTables<Exec> tables(CL, lr, out);
  const LocalRanks<Exec> ranks = lr;
  Kokkos::parallel_for(
      "moonep::portable::phaseD_dup_structures", typename T::range(exec, 0, lr.count),
      KOKKOS_LAMBDA(const std::int64_t l) {
        if (ranks.stopped()) return;  // bad input: the plan is left as it was
        const std::int32_t* slots = chunk(l).at + slots_at;
        const std::int64_t first = l * NvS;
        std::int32_t groups = 0, dups = 0;
        for (std::int64_t loff = 0; loff < NvS; ++loff) {
          const std::int32_t* slot = slots + 3 * loff;
          src_info(first + loff) = slot[0];
          const std::int32_t link = slot[1];
          if (link <= -2) {
            std::int32_t* row = dup_groups.data() + 3 * (first + groups);
            row[0] = static_cast<std::int32_t>(loff);
            row[1] = dups;
            row[2] = -2 - link;
            dstart(first + loff) = dups;
            ++groups;
            dups += -2 - link;
          }
        }
        dup_counts(2 * l) = groups;
        dup_counts(2 * l + 1) = dups;
        for (std::int64_t loff = 0; loff < NvS; ++loff) {
          const std::int32_t* slot = slots + 3 * loff;
          if (slot[1] >= 0) dup_loffs(first + dstart(first + slot[1]) + slot[2]) = static_cast<std::int32_t>(loff);
        }
        for (std::int64_t k = 0; k < tables.width_; ++k) tables(l, k);
      });
}

template <class Exec>
void rank_outputs_device(const Launcher<Exec>& launch, const ChunkLayout& CL, const LocalRanks<Exec>& lr,
                         const PlanStore<Exec>& out) {
  using T = Types<Exec>;
  using member = typename T::member;
  const std::int64_t NvS = CL.NvS, slots_at = CL.slots, tiles = out.tiles;
  const auto chunk = lr.chunk;
  const auto src_info = out.src_info;
  const auto tile_sums = out.tile_sums;
  const auto dgroup = out.dgroup;
  const auto dstart = out.dstart;
  constexpr std::int64_t kGroup = std::int64_t(1) << 32;
  const LocalRanks<Exec> ranks = lr;
  launch.parallel_for(
      "moonep::portable::phaseD_dup_groups", typename T::team_policy(launch.exec(), lr.count * tiles, Kokkos::AUTO),
      KOKKOS_LAMBDA(const member& team) {
        if (ranks.stopped()) return;  // bad input: the plan is left as it was (the whole team)
        const std::int64_t lt = team.league_rank(), l = lt / tiles, lo = (lt - l * tiles) * kSlotTile;
        const std::int64_t hi = lo + kSlotTile < NvS ? lo + kSlotTile : NvS, n = hi > lo ? hi - lo : 0;
        const std::int32_t* slots = chunk(l).at + slots_at;
        if (n == 0) {
          Kokkos::single(Kokkos::PerTeam(team), [&]() { tile_sums(lt) = 0; });
          return;
        }
        Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, n), [&](const std::int64_t k, std::int64_t& run,
                                                                    const bool final) {
          const std::int64_t loff = lo + k;
          const std::int32_t* slot = slots + 3 * loff;
          const std::int32_t link = slot[1];
          const std::int64_t dups = link <= -2 ? -2 - link : 0;
          const std::int64_t packed = dups > 0 ? kGroup + dups : 0;
          if (final) {
            src_info(l * NvS + loff) = slot[0];
            if (dups > 0) {
              dgroup(l * NvS + loff) = static_cast<std::int32_t>(run / kGroup);
              dstart(l * NvS + loff) = static_cast<std::int32_t>(run % kGroup);
            }
            if (k == n - 1) tile_sums(lt) = run + packed;
          }
          run += packed;
        });
      });

  const CopyTables<Exec> tables(CL, lr, out);
  const auto dup_groups = out.dup_groups;
  const auto dup_loffs = out.dup_loffs;
  const auto dup_counts = out.dup_counts;
  int level = 0;
  const auto policy = with_scratch<typename T::scratch_i64>(
      typename T::team_policy(launch.exec(), lr.count * tiles, Kokkos::AUTO), tiles + 1, &level);
  launch.parallel_for(
      "moonep::portable::phaseD_dup_structures", policy, KOKKOS_LAMBDA(const member& team) {
        if (ranks.stopped()) return;  // (the whole team, before any barrier)
        const std::int64_t lt = team.league_rank(), l = lt / tiles, t = lt - l * tiles, lo = t * kSlotTile;
        // before(u): the packed counts of rank l's tiles before tile u.
        typename T::scratch_i64 before(team.team_scratch(level), tiles + 1);
        Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, tiles), [&](const std::int64_t u, std::int64_t& run,
                                                                        const bool final) {
          const std::int64_t v = tile_sums(l * tiles + u);
          if (final) {
            before(u) = run;
            if (u == tiles - 1) before(tiles) = run + v;
          }
          run += v;
        });
        team.team_barrier();
        const std::int64_t first = l * NvS;
        const std::int32_t* slots = chunk(l).at + slots_at;
        const std::int64_t hi = lo + kSlotTile < NvS ? lo + kSlotTile : NvS;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, lo, hi > lo ? hi : lo), [&](const std::int64_t k) {
          const std::int32_t* slot = slots + 3 * k;
          const std::int32_t link = slot[1];
          if (link <= -2) {
            const std::int64_t at = before(t);
            std::int32_t* row = dup_groups.data() + 3 * (first + at / kGroup + dgroup(first + k));
            row[0] = static_cast<std::int32_t>(k);
            row[1] = static_cast<std::int32_t>(at % kGroup) + dstart(first + k);
            row[2] = -2 - link;
          } else if (link >= 0) {
            const std::int64_t at = before(link / kSlotTile);  // the primary's tile
            dup_loffs(first + at % kGroup + dstart(first + link) + slot[2]) = static_cast<std::int32_t>(k);
          }
        });
        const std::int64_t thi = lo + kSlotTile < tables.width_ ? lo + kSlotTile : tables.width_;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, lo, thi > lo ? thi : lo),
                             [&](const std::int64_t k) { tables(l, k); });
        if (t == 0) {
          Kokkos::single(Kokkos::PerTeam(team), [&]() {
            dup_counts(2 * l) = static_cast<std::int32_t>(before(tiles) / kGroup);
            dup_counts(2 * l + 1) = static_cast<std::int32_t>(before(tiles) % kGroup);
          });
        }
      });
}

template <class Exec>
void rank_outputs(const Launcher<Exec>& launch, const ChunkLayout& CL, const LocalRanks<Exec>& lr,
                  const PlanStore<Exec>& out, bool host_style) {
  if (host_style) {
    rank_outputs_host(launch.exec(), CL, lr, out);
  } else {
    rank_outputs_device(launch, CL, lr, out);
  }
}

}  // namespace moonep::impl::portable
