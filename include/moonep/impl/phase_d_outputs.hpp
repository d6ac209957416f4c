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
//  * device: two kernels over every slot of every local rank.
//    phaseD_dup_groups is one scan (rank major) counting primaries (slots
//    whose token has duplicates here) and their duplicates, packed in one
//    int64 (groups << 32 | duplicates) so that one integer scan counts
//    both; it writes src_info and, per primary, the two counts before it
//    (dgroup, dstart). phaseD_dup_structures then writes each primary's
//    dup_groups row, drops each duplicate into its primary's range at its
//    own index, and copies the small tables. A rank's numbers are the
//    differences to the packed prefix at its first slot (rank_prefix),
//    subtracted by the second kernel (the scan's final calls come in no
//    order). The packed halves never borrow, as the duplicate count only
//    grows along the scan; each half fits int32 (R*NvS does).
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
  typename T::lvec rank_prefix;  // [L+1] packed counts before each rank's first slot (and in all)
  typename T::ivec dgroup;       // [L][NvS] primaries before a primary (device: over all ranks)
  typename T::ivec dstart;       // [L][NvS] duplicates before a primary (device: over all ranks)

  PlanStore() = default;
  PlanStore(const Config& c, int L) : config(c) {
    const std::int64_t NvS = c.slots();
    const std::string p = "moonep::portable::plan.";
    const auto n = [L](std::int64_t per_rank) { return static_cast<std::size_t>(L * per_rank); };
#define MOONEP_PLAN_STORE_ALLOC(name, ...) allocate(name, kPlanFields[plan_field_index::name], c, L, p);
    MOONEP_PLAN_FIELDS(MOONEP_PLAN_STORE_ALLOC)
#undef MOONEP_PLAN_STORE_ALLOC
    entries = typename T::ivec(p + "entries", static_cast<std::size_t>(L));
    rank_prefix = typename T::lvec(p + "rank_prefix", static_cast<std::size_t>(L) + 1);
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
void rank_outputs_device(const Exec& exec, const ChunkLayout& CL, const LocalRanks<Exec>& lr, const PlanStore<Exec>& out) {
  using T = Types<Exec>;
  const std::int64_t NvS = CL.NvS, slots_at = CL.slots, nslots = lr.count * NvS;
  const auto chunk = lr.chunk;
  const auto src_info = out.src_info;
  const auto rank_prefix = out.rank_prefix;
  const auto dgroup = out.dgroup;
  const auto dstart = out.dstart;
  constexpr std::int64_t kGroup = std::int64_t(1) << 32;
  const IndexSplit by_slots(NvS);
  const LocalRanks<Exec> ranks = lr;
  Kokkos::parallel_scan(
      "moonep::portable::phaseD_dup_groups", typename T::range(exec, 0, nslots + 1),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& run, const bool final) {
        if (ranks.stopped()) return;  // (in every pass alike)
        const std::int64_t l = by_slots.quotient(i), loff = i - l * NvS;
        if (final && loff == 0) rank_prefix(l) = run;  // and l == L at i == nslots: the total
        if (i == nslots) return;
        const std::int32_t* slot = chunk(l).at + slots_at + 3 * loff;
        const std::int32_t link = slot[1];
        const std::int64_t n = link <= -2 ? -2 - link : 0;
        if (final) {
          src_info(i) = slot[0];
          if (n > 0) {
            dgroup(i) = static_cast<std::int32_t>(run / kGroup);
            dstart(i) = static_cast<std::int32_t>(run % kGroup);
          }
        }
        run += n > 0 ? kGroup + n : 0;
      });

  const CopyTables<Exec> tables(CL, lr, out);
  const std::int64_t width = NvS > tables.width_ ? NvS : tables.width_;
  const auto dup_groups = out.dup_groups;
  const auto dup_loffs = out.dup_loffs;
  const auto dup_counts = out.dup_counts;
  const IndexSplit by_width(width);
  Kokkos::parallel_for(
      "moonep::portable::phaseD_dup_structures", typename T::range(exec, 0, lr.count * width),
      KOKKOS_LAMBDA(const std::int64_t i) {
        if (ranks.stopped()) return;
        const std::int64_t l = by_width.quotient(i), k = i - l * width;
        if (k < NvS) {
          const std::int64_t first = l * NvS, base = rank_prefix(l);
          const std::int32_t base_groups = static_cast<std::int32_t>(base / kGroup);
          const std::int32_t base_dups = static_cast<std::int32_t>(base % kGroup);
          const std::int32_t* slot = chunk(l).at + slots_at + 3 * k;
          const std::int32_t link = slot[1];
          if (link <= -2) {
            std::int32_t* row = dup_groups.data() + 3 * (first + dgroup(first + k) - base_groups);
            row[0] = static_cast<std::int32_t>(k);
            row[1] = dstart(first + k) - base_dups;
            row[2] = -2 - link;
          } else if (link >= 0) {
            dup_loffs(first + dstart(first + link) - base_dups + slot[2]) = static_cast<std::int32_t>(k);
          }
          if (k == 0) {
            const std::int64_t all = rank_prefix(l + 1) - base;
            dup_counts(2 * l) = static_cast<std::int32_t>(all / kGroup);
            dup_counts(2 * l + 1) = static_cast<std::int32_t>(all % kGroup);
          }
        }
        if (k < tables.width_) tables(l, k);
      });
}

template <class Exec>
void rank_outputs(const Exec& exec, const ChunkLayout& CL, const LocalRanks<Exec>& lr, const PlanStore<Exec>& out,
                  bool host_style) {
  if (host_style) {
    rank_outputs_host(exec, CL, lr, out);
  } else {
    rank_outputs_device(exec, CL, lr, out);
  }
}

}  // namespace moonep::impl::portable
