// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_b_root.hpp — Phase B, run by rank 0's process:
// docs/spec/planning.md steps 1-5 for all ranks in four kernels, and the tables
// every rank needs.
//
// Input: every rank's tokens-per-expert in rank 0's chunk (tpe_in, Phase A).
// Output: in rank 0's chunk, the shared tables (expert_ptr, experts_to_copy
// and the (expert, destination) pairs with their acum and dst base); for
// every rank d, its per-rank tables (cum_excl, cu_seqlens, zero_fill,
// remote_stats), written where RootScratch::tables[d] points: in place into
// d's chunk when the world lets this process store there, else into the
// private `own_stage` row that broadcast() puts to d.
//
// Kernels (the launches of the phase, whatever R), in order. Host form:
//   phaseB_totals_and_moves  one team: step 1 (cum, totals, loads) and the
//                            rank-level moves of step 2;
//   phaseB_expert_split      one team per owner h: step 3;
//                            (both phase_b_moves.hpp)
//   phaseB_layout            one team per destination d: step 4 (copy
//                            selection) and step 5 (the layout);
//   phaseB_pairs             one team: expert_ptr and the pairs table.
//                            (both phase_b_layout.hpp)
// Device form, the same work in two launches (each a round trip less on a
// GPU, where these small kernels cost their latency):
//   phaseB_moves_and_split   one team per owner h: steps 1 and 2 (every
//                            team alike), then h's step 3, into Phase B's
//                            scratch only (so that it may run before
//                            validation ends: an in-process step graph
//                            runs it beside validate_block_offsets);
//   phaseB_layout_and_pairs  one team per destination d: d's results of
//                            the first kernel into its tables, steps 4 and
//                            5, then the pairs with d (each team its own).
// Steps 2 and 3 are sequences of arg-max/arg-min picks with the spec's
// tie-breaks (reducers.hpp); each runs on one vector of its team (a warp
// on a GPU), as the files say why. What each kernel must keep true is
// said in its file.
#pragma once

#include <cstdint>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_b_layout.hpp"
#include "moonep/impl/phase_b_moves.hpp"
#include "moonep/impl/phase_b_scratch.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/world.hpp"

namespace moonep::impl::portable {

// Steps 1-5 on every rank's tokens per expert (`counts`, [R][E]: rank 0's
// tpe_in, or, in an in-process step graph, the validation's counts): the
// shared tables into `chunk0` (rank 0's chunk), the per-rank tables
// through rs.tables, the number of pairs into rs.npairs; in the host
// form's kernels or the device form's (the same results).
template <class Exec>
void plan_root(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs,
               std::int32_t* chunk0, const std::int32_t* counts, bool host_style) {
  if (host_style) {
    phase_b_totals_and_moves(launch, L, rs, counts);
    phase_b_expert_split(launch, L, rs);
    phase_b_layout(launch, L, rs, chunk0, false);
    phase_b_pairs(launch, L, rs, chunk0);
  } else {
    phase_b_moves_and_split(launch, L, rs, counts, rs.stop);
    phase_b_layout(launch, L, rs, chunk0, true);
  }
}

// The puts of Phase B, for worlds that need them (nothing in a DA world
// whose ranks are all local): each rank's own tables not written in place,
// and, unless the world is DA (ranks then read rank 0's shared tables in
// place), the shared tables to ranks 1..R-1. The caller has fenced the
// execution space; complete at the next world.barrier().
template <class Exec>
void broadcast(const RootScratch<Exec>& rs, World<typename Types<Exec>::mem>& world) {
  if (rs.own_runs.extent(0) > 0) {
    const typename World<typename Types<Exec>::mem>::source_view own_src(rs.own_stage.data(), rs.own_stage.size());
    world.put_runs(0, own_src, rs.own_runs);
  }
  if (rs.shared_runs.extent(0) > 0) world.put_runs(0, world.local_chunk(0), rs.shared_runs);
}

}  // namespace moonep::impl::portable
