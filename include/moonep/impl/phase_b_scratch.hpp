// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_b_scratch.hpp — what Phase B (phase_b_root.hpp) keeps
// between its kernels on rank 0's process, allocated once at the
// planner's construction: the steps' tables, where each rank's tables go,
// and the puts of the phase.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/world.hpp"

namespace moonep::impl::portable {

template <class Exec>
struct RootScratch {
  using T = Types<Exec>;
  typename T::ivec total;          // [E] step 1
  typename T::ivec donor_of;       // [R] step 2: the one rank a receiver takes from, or -1
  typename T::ivec inflow;         // [R] step 2: how much it takes
  // [E][R] step 3, expert major (acum runs along a row; an owner's experts'
  // rows are one contiguous block, written whole by its split's team)
  typename T::imat alloc;
  typename T::imat expert_offset;  // [R][E] step 5
  typename T::imat own_stage;      // [R][own_len] per-rank tables of ranks not stored into in place
  // Device form: what phaseB_moves_and_split computes for rank d's own
  // tables, kept here until phaseB_layout_and_pairs (which runs after
  // validation) stores it into tables[d]: the first kernel stores nothing
  // outside this scratch, so a step graph runs it before validation ends.
  typename T::imat cum;            // [R][E] step 1: cum_excl of rank d
  typename T::ivec copies;         // [R] step 3: remote_stats[d][1]
  typename T::refs cum_rows;       // [R] the rows of cum, as step1_totals stores through tables
  typename T::refs tables;         // [R] where rank d's per-rank tables are written
  // Pairs found (<= pair_capacity): status[1] of the planner's InputScratch,
  // read back with the validation result in one copy.
  Kokkos::View<std::int64_t, typename T::mem, Kokkos::MemoryUnmanaged> npairs;
  Kokkos::View<PutRun*, typename T::mem> own_runs;     // puts of own_stage rows, one per such rank
  Kokkos::View<PutRun*, typename T::mem> shared_runs;  // puts of the shared tables (not DA), ranks 1..R-1
  // The step's validation count on the device (InputScratch::problems), or
  // null: every kernel returns at once when it is set (bad input).
  const std::int64_t* stop = nullptr;

  RootScratch() = default;
  // `direct[d]`: the start of rank d's chunk where this process stores in
  // place, else null; `da`: the world is directly addressable; `npairs_at`:
  // where the pair count goes (device memory).
  RootScratch(const ChunkLayout& L, const std::vector<std::int32_t*>& direct, bool da, std::int64_t* npairs_at) {
    const std::string p = "moonep::portable::root.";
    total = typename T::ivec(p + "total", L.E);
    donor_of = typename T::ivec(p + "donor_of", L.R);
    inflow = typename T::ivec(p + "inflow", L.R);
    alloc = typename T::imat(p + "alloc", L.E, L.R);
    expert_offset = typename T::imat(p + "expert_offset", L.R, L.E);
    own_stage = typename T::imat(p + "own_stage", L.R, L.own_len);
    cum = typename T::imat(p + "cum", L.R, L.E);
    copies = typename T::ivec(p + "copies", L.R);
    cum_rows = typename T::refs(p + "cum_rows", L.R);
    {
      auto h = Kokkos::create_mirror_view(cum_rows);
      for (int d = 0; d < L.R; ++d) h(d).at = cum.data() + static_cast<std::int64_t>(d) * L.E;
      Kokkos::deep_copy(cum_rows, h);
    }
    tables = typename T::refs(p + "tables", L.R);
    npairs = Kokkos::View<std::int64_t, typename T::mem, Kokkos::MemoryUnmanaged>(npairs_at);
    auto h_tables = Kokkos::create_mirror_view(tables);
    std::vector<PutRun> own, shared;
    for (int d = 0; d < L.R; ++d) {
      if (direct[d]) {
        h_tables(d).at = direct[d] + L.own;
      } else {
        h_tables(d).at = own_stage.data() + static_cast<std::int64_t>(d) * L.own_len;
        own.push_back(PutRun{d, 0, L.own, static_cast<std::int64_t>(d) * L.own_len, L.own_len});
      }
      if (!da && d > 0) shared.push_back(PutRun{d, 0, L.shared, L.shared, L.shared_len});
    }
    Kokkos::deep_copy(tables, h_tables);
    own_runs = to_device(p + "own_runs", own);
    shared_runs = to_device(p + "shared_runs", shared);
  }

 private:
  static Kokkos::View<PutRun*, typename T::mem> to_device(const std::string& label, const std::vector<PutRun>& v) {
    Kokkos::View<PutRun*, typename T::mem> out(label, v.size());
    auto h = Kokkos::create_mirror_view(out);
    for (std::size_t i = 0; i < v.size(); ++i) h(i) = v[i];
    Kokkos::deep_copy(out, h);
    return out;
  }
};

}  // namespace moonep::impl::portable
