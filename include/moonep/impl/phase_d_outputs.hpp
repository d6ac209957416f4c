// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_d_outputs.hpp — Phase D on every local destination rank at
// once: its outputs from its chunk. src_info is the first value of each
// slot; the dup structures of step 8 come from the dup links the sources
// published; the small tables are copied from the per-rank and shared
// tables. It runs where C2 fills the receive slots: the host form, and the
// device form unless every rank is in this process, in order (then C2
// writes these outputs itself, phase_c2_outputs.hpp; CopyTables serves
// both).
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
//    own index (its primary's tile prefix plus its dstart), and copies its
//    share of the small tables. The packed halves never borrow, as the
//    duplicate count only grows along the scan; each half fits int32 (NvS
//    does).
//    How the teams walk a tile: on a device space a team of kSlotThreads
//    threads, each holding kSlotsPerThread contiguous slots of the tile
//    (the whole tile in one round): a thread loads all its slots' fields
//    (a slot one 16-byte load where the slots allow it:
//    LocalRanks::slot_quads), then (structures) every load that depends on
//    them, before any store,
//    and the tile's scan is one team scan of the threads' sums. A Kokkos
//    team scan over a TeamThreadRange of more items than threads runs in
//    rounds, each a dependent chain (load, team scan with its barriers,
//    store) that waits on memory again; and a team of a thread per slot
//    (1024 threads) leaves too few blocks resident per SM at a large NvS.
//    Small teams over 512-slot tiles keep many blocks resident (at the
//    headline 640 of 128 threads), each thread with several loads in
//    flight. On a host space the teams are Kokkos::AUTO and walk the tile
//    in rounds of team_size * kSlotsPerThread slots, a carry between them.
// Either way dup_groups rows are in slot order (the spec allows any).
#pragma once

#include <cstdint>
#include <string>

#include "moonep/config.hpp"
#include "moonep/impl/alignment.hpp"
#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl::portable {

// The outputs of every local rank, each one allocation with a rank
// dimension; the plan's views alias them (view(l)).
// The device form's Phase D: slots per team (a tile), threads per team on a
// device space, and the contiguous slots each thread holds (one round).
inline constexpr int kSlotThreads = 128;
inline constexpr int kSlotsPerThread = 4;
inline constexpr std::int64_t kSlotTile = std::int64_t(kSlotThreads) * kSlotsPerThread;
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
  std::int64_t G = 0, RB = 0, ow_cu = 0, ow_zfr = 0, ow_rs = 0, sh_etc = 0, width_ = 0;

  CopyTables() = default;
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
  const std::int64_t NvS = CL.NvS, slots_at = CL.slots, w = CL.slot_ints;
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
          const std::int32_t* slot = slots + w * loff;
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
          const std::int32_t* slot = slots + w * loff;
          if (slot[1] >= 0) dup_loffs(first + dstart(first + slot[1]) + slot[2]) = static_cast<std::int32_t>(loff);
        }
        for (std::int64_t k = 0; k < tables.width_; ++k) tables(l, k);
      });
}

// `host_status` (an in-process step graph's, else null): where the last
// kernel copies the step's two status values (`status`, InputScratch::
// status) for the host, in host-pinned memory that the host reads after
// its fence, so that no copy follows the graph (PortablePlanner::finish).
template <class Exec>
void rank_outputs_device(const Launcher<Exec>& launch, const ChunkLayout& CL, const LocalRanks<Exec>& lr,
                         const PlanStore<Exec>& out, const std::int64_t* status = nullptr,
                         std::int64_t* host_status = nullptr) {
  using T = Types<Exec>;
  using member = typename T::member;
  constexpr int kPer = kSlotsPerThread;
  const std::int64_t NvS = CL.NvS, slots_at = CL.slots, tiles = out.tiles, w = CL.slot_ints;
  const int league = static_cast<int>(lr.count * tiles);
  const auto chunk = lr.chunk;
  const auto src_info = out.src_info;
  const auto tile_sums = out.tile_sums;
  const auto dgroup = out.dgroup;
  const auto dstart = out.dstart;
  constexpr std::int64_t kGroup = std::int64_t(1) << 32;
  const LocalRanks<Exec> ranks = lr;
  const bool quads = lr.slot_quads;  // a slot is one Int32x4 load (else its values one by one)
  int carry_level = 0;
  const auto groups_policy = with_scratch<typename T::scratch_i64>(
      sized_team_policy(launch.exec(), league, kSlotThreads, 1), 1, &carry_level);
  const int groups_level = carry_level;  // (captured by value)
  launch.parallel_for(
      "moonep::portable::phaseD_dup_groups", groups_policy, KOKKOS_LAMBDA(const member& team) {
        if (ranks.stopped()) return;  // bad input: the plan is left as it was (the whole team)
        const std::int64_t lt = team.league_rank(), l = lt / tiles, lo = (lt - l * tiles) * kSlotTile;
        const std::int64_t hi = lo + kSlotTile < NvS ? lo + kSlotTile : NvS, first = l * NvS;
        const std::int64_t ts = team.team_size(), r = team.team_rank();
        const std::int32_t* slots = chunk(l).at + slots_at;
        typename T::scratch_i64 carry(team.team_scratch(groups_level), 1);
        if (hi <= lo && r == 0) tile_sums(lt) = 0;
        std::int64_t run = 0;  // the packed counts of the tile's slots before this round
        // Rounds of ts * kPer slots, thread r's kPer of them contiguous (one
        // round on a device space; the bounds are the whole team's).
        for (std::int64_t base = lo; base < hi; base += ts * kPer) {
          const std::int64_t k0 = base + r * kPer;
          std::int32_t src[kPer], link[kPer];
          for (int j = 0; j < kPer; ++j) {
            const bool in = k0 + j < hi;
            src[j] = 0;
            link[j] = -1;
            if (in && quads) {
              const Int32x4 q = reinterpret_cast<const Int32x4*>(slots)[k0 + j];
              src[j] = q.v[0];
              link[j] = q.v[1];
            } else if (in) {
              src[j] = slots[w * (k0 + j)];
              link[j] = slots[w * (k0 + j) + 1];
            }
          }
          std::int64_t mine = 0;
          for (int j = 0; j < kPer; ++j) mine += link[j] <= -2 ? kGroup + (-2 - link[j]) : 0;
          const std::int64_t before = team.team_scan(mine);
          std::int64_t at = run + before;
          for (int j = 0; j < kPer; ++j) {
            const std::int64_t k = k0 + j;
            if (k >= hi) break;
            src_info(first + k) = src[j];
            if (link[j] <= -2) {
              dgroup(first + k) = static_cast<std::int32_t>(at / kGroup);
              dstart(first + k) = static_cast<std::int32_t>(at % kGroup);
              at += kGroup + (-2 - link[j]);
            }
          }
          if (base + ts * kPer >= hi) {  // the last round: the last thread holds the tile's total
            if (r == ts - 1) tile_sums(lt) = run + before + mine;
          } else {
            if (r == ts - 1) carry(0) = run + before + mine;
            team.team_barrier();
            run = carry(0);
            team.team_barrier();
          }
        }
      });

  const CopyTables<Exec> tables(CL, lr, out);
  const auto dup_groups = out.dup_groups;
  const auto dup_loffs = out.dup_loffs;
  const auto dup_counts = out.dup_counts;
  int level = 0;
  const auto policy = with_scratch<typename T::scratch_i64>(sized_team_policy(launch.exec(), league, kSlotThreads, 1),
                                                            tiles + 1, &level);
  launch.parallel_for(
      "moonep::portable::phaseD_dup_structures", policy, KOKKOS_LAMBDA(const member& team) {
        // The status for the host, bad input or not (validation and Phase
        // B have ended: every earlier kernel is a dependency of this one).
        if (host_status && team.league_rank() == 0) {
          Kokkos::single(Kokkos::PerTeam(team), [&]() {
            host_status[0] = status[0];
            host_status[1] = status[1];
          });
        }
        if (ranks.stopped()) return;  // (the whole team, before any barrier)
        const std::int64_t lt = team.league_rank(), l = lt / tiles, t = lt - l * tiles, lo = t * kSlotTile;
        const std::int64_t ts = team.team_size(), r = team.team_rank();
        const std::int64_t first = l * NvS;
        const std::int32_t* slots = chunk(l).at + slots_at;
        const std::int64_t hi = lo + kSlotTile < NvS ? lo + kSlotTile : NvS;
        // A round's loads (thread r's kPer contiguous slots): each slot's link
        // and dup index, then what depends only on the link: a primary's two
        // counts in its tile, a duplicate's primary's start (in the
        // primary's tile). Only the tiles' prefix (below) depends on the
        // scan; so the first (on a device space the only) round's loads are
        // issued before it and wait on memory beside the tile totals'.
        std::int32_t link[kPer], index[kPer], q0[kPer], q1[kPer];
        const auto load = [&](const std::int64_t k0) {
          for (int j = 0; j < kPer; ++j) {
            const bool in = k0 + j < hi;
            link[j] = -1;
            index[j] = 0;
            if (in && quads) {
              const Int32x4 q = reinterpret_cast<const Int32x4*>(slots)[k0 + j];
              link[j] = q.v[1];
              index[j] = q.v[2];
            } else if (in) {
              link[j] = slots[w * (k0 + j) + 1];
              index[j] = slots[w * (k0 + j) + 2];
            }
          }
          for (int j = 0; j < kPer; ++j) {
            const std::int64_t k = k0 + j;
            q0[j] = 0;
            q1[j] = 0;
            if (link[j] <= -2) {
              q0[j] = dgroup(first + k);
              q1[j] = dstart(first + k);
            } else if (link[j] >= 0) {
              q1[j] = dstart(first + link[j]);
            }
          }
        };
        load(lo + r * kPer);
        // before(u): the packed counts of rank l's tiles before tile u. Thread
        // r sums a contiguous run of the tile totals, one team scan.
        typename T::scratch_i64 before(team.team_scratch(level), tiles + 1);
        {
          const std::int64_t* sums = tile_sums.data() + l * tiles;
          const std::int64_t per = (tiles + ts - 1) / ts;
          const std::int64_t u0 = r * per < tiles ? r * per : tiles, u1 = u0 + per < tiles ? u0 + per : tiles;
          std::int64_t mine = 0;
          for (std::int64_t u = u0; u < u1; ++u) mine += sums[u];
          std::int64_t run = team.team_scan(mine);
          for (std::int64_t u = u0; u < u1; ++u) {
            before(u) = run;
            run += sums[u];
          }
          if (r == ts - 1) before(tiles) = run;
        }
        team.team_barrier();
        const std::int64_t here = before(t);
        for (std::int64_t base = lo; base < hi; base += ts * kPer) {
          const std::int64_t k0 = base + r * kPer;
          if (base != lo) load(k0);  // (rounds after the first: a host space's)
          std::int64_t at[kPer];
          for (int j = 0; j < kPer; ++j) at[j] = link[j] >= 0 ? before(link[j] / kSlotTile) : here;  // the primary's tile
          for (int j = 0; j < kPer; ++j) {
            const std::int64_t k = k0 + j;
            if (link[j] <= -2) {
              std::int32_t* row = dup_groups.data() + 3 * (first + at[j] / kGroup + q0[j]);
              row[0] = static_cast<std::int32_t>(k);
              row[1] = static_cast<std::int32_t>(at[j] % kGroup) + q1[j];
              row[2] = -2 - link[j];
            } else if (link[j] >= 0) {
              dup_loffs(first + at[j] % kGroup + q1[j] + index[j]) = static_cast<std::int32_t>(k);
            }
          }
        }
        // The small tables, spread over all of the rank's tiles (an equal
        // share each, at most a round of the team's threads where the rank
        // has tiles enough) rather than in kSlotTile pieces: with width_
        // under kSlotTile (E + B = 288 at the headline), tile 0's team
        // alone copied them, in rounds of dependent loads after its slots,
        // and the kernel waited for that team.
        const std::int64_t per = (tables.width_ + tiles - 1) / tiles, k0 = t * per;
        const std::int64_t k1 = k0 + per < tables.width_ ? k0 + per : tables.width_;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, k0, k1 > k0 ? k1 : k0),
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
