// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_b_moves.hpp — Phase B's kernels of docs/spec/planning.md
// steps 1-3 (plan_root, phase_b_root.hpp). Host form:
//
//   phaseB_totals_and_moves  one team: step 1 (cum into every rank's
//                            tables, the totals, the loads) and step 2;
//   phaseB_expert_split      one team per owner h: step 3, and h's rows of
//                            alloc and remote_stats[h][1].
//
// Device form: phaseB_moves_and_split, one team per owner h doing both
// (steps 1 and 2 in every team). The steps' bodies are shared
// (step1_totals, step2_moves, step3_takes).
//
// Steps 2 and 3 are sequences of picks, each pick depending on the one
// before (at most R - 1 moves; at most R + epn takes per owner), so on a
// GPU their time is the latency of one round times their length. A round
// is therefore one vector's work (team thread 0; a warp on Kokkos::Cuda,
// sized_team_policy): its picks are one vector reduction of packed keys
// (reducers.hpp: MaxKeys; no team barrier), its update stored by the lane
// that owns each entry: the lane a ThreadVectorRange over the same count
// gives it, the lane that read it in the reduction. So every scratch entry
// is read and written by one lane only, and no lane needs another's store
// ordered before its read (compute-sanitizer's racecheck found the picked
// entries read by their owners and stored by lane 0, ordered only by the
// reduction's shuffles, when one lane stored the update).
// What a sequence reads lives in team scratch; it only stores to global
// memory. The rest of each kernel loads and stores in parallel, every
// thread issuing a batch of loads before its stores: the compiler cannot
// move a load past an earlier store through an int32 pointer that may
// alias it, so interleaved, each load would cost a full memory latency.
//
// What must stay true: the picks' tie-breaks are the spec's (a key's order
// is the pick's, reducers.hpp; values fit int32); an owner's split
// writes every entry of its experts' alloc rows (no other kernel clears
// them); every (receiver, expert) pair is taken at most once (each take
// empties a quota or a remaining), so a take's count is stored, not added,
// and the takes of a receiver are its copy candidates (step 4).
#pragma once

#include <cstdint>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_b_scratch.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/impl/reducers.hpp"

namespace moonep::impl::portable {

// Phase B's sequence kernels: a team of 8 warps on a device space
// (kMovesThreads / kMovesVector); kLoadBatch: the loads a thread issues
// before its stores (Phase B's walks over ranks).
inline constexpr int kMovesThreads = 256;
inline constexpr int kMovesVector = 32;
inline constexpr int kLoadBatch = 8;

// Step 1 in one team, a thread per expert: rank r's count (counts[r*E +
// e]) loaded with rank r's tables pointer, kLoadBatch ranks at a time, before the stores
// of cum (when `store_cum`: one team does it); on_total(e, total) with
// the total, which is added to its owner's load in `held` (a scratch
// atomic: E of them, where summing the loads apart would load every count
// again). `held` starts at 0.
template <class Member, class Tables, class Held, class OnTotal>
KOKKOS_INLINE_FUNCTION void step1_totals(const Member& team, int R, int E, int epn, const std::int32_t* counts,
                                         std::int64_t ow_cum, const Tables& tables,
                                         bool store_cum, const Held& held, const OnTotal& on_total) {
  Kokkos::parallel_for(Kokkos::TeamVectorRange(team, E), [&](const int e) {
    std::int32_t run = 0;
    for (int r0 = 0; r0 < R; r0 += kLoadBatch) {
      std::int32_t got[kLoadBatch];
      std::int32_t* at[kLoadBatch];
      for (int j = 0; j < kLoadBatch; ++j) {
        const bool in = r0 + j < R;
        got[j] = in ? counts[static_cast<std::int64_t>(r0 + j) * E + e] : 0;
        at[j] = in && store_cum ? tables(r0 + j).at : nullptr;
      }
      for (int j = 0; j < kLoadBatch; ++j) {
        if (r0 + j < R) {
          if (store_cum) at[j][ow_cum + e] = run;
          run += got[j];
        }
      }
    }
    on_total(e, run);
    Kokkos::atomic_add(&held(e / epn), static_cast<std::int64_t>(run));
  });
}

// Step 2, by one vector (the caller's team thread 0; see the top): the
// moves on the balances against CAP_g (T div R + (g < T mod R), T the
// step's entries: S*K on a full step; docs/spec/planning.md "Ragged
// steps"). held(g): rank g's load on entry, then balance[g] + CAP_g (so
// that a receiver's "balance 0" is held(g) = CAP_g); donor_of and inflow
// start at -1 and 0.
template <class Mem, class Member, class Held, class Donor, class Inflow>
KOKKOS_INLINE_FUNCTION void step2_moves(const Member& team, int R, const Held& held, const Donor& donor_of,
                                        const Inflow& inflow) {
  std::int64_t all = 0;  // T
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(team, R), [&](const int g, std::int64_t& acc) { acc += held(g); }, all);
  const std::int64_t cap_q = all / R, cap_r = all % R;
  for (;;) {
    KeyPair best;
    Kokkos::parallel_reduce(
        Kokkos::ThreadVectorRange(team, R),
        [&](const int r, KeyPair& v) {
          const std::int64_t balance = held(r) - (cap_q + (r < cap_r ? 1 : 0));
          MaxKeys<Mem>::consider(v, max_lowest_key(balance, r), min_lowest_key(balance, r));
        },
        MaxKeys<Mem>(best));
    const ValueIndex hi = from_max_lowest(best.first), lo = from_min_lowest(best.second);
    if (hi.value <= 0 || lo.value >= 0) break;
    const std::int64_t move = -lo.value;
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, R), [&](const int r) {
      if (r == hi.index) held(r) -= move;
      if (r != lo.index) return;
      held(r) = cap_q + (r < cap_r ? 1 : 0);
      donor_of(r) = hi.index;
      inflow(r) = static_cast<std::int32_t>(move);
    });
  }
}

// Step 3's start for owner h, by the whole team (a barrier before the
// takes): quota[r] = z[h][r] (the inflow of h's receivers, 0 for the
// others), takes 0 for h's receivers and -1 for the others, and h's alloc
// rows `rows` ([epn][R]) cleared.
template <class Member, class Donor, class Inflow, class Quota, class Takes>
KOKKOS_INLINE_FUNCTION void step3_start(const Member& team, int h, int R, int epn, const Donor& donor_of,
                                        const Inflow& inflow, const Quota& quota, const Takes& takes,
                                        std::int32_t* rows) {
  Kokkos::parallel_for(Kokkos::TeamVectorRange(team, R), [&](const int r) {
    const bool mine = donor_of(r) == h;
    quota(r) = mine ? inflow(r) : 0;
    takes(r) = mine ? 0 : -1;
  });
  Kokkos::parallel_for(Kokkos::TeamVectorRange(team, epn * R), [&](const int i) { rows[i] = 0; });
}

// Step 3's takes for owner h, by one vector (the caller's team thread 0),
// on quota [R] (z[h][r]), takes [R] (0 for h's receivers, -1 for the
// others) and remaining [epn] (h's totals), with h's alloc rows `rows`
// ([epn][R]) cleared: each take stored, then what h keeps, then
// remote_stats[h][1] (copies made of h's experts: min(B, takes) over h's
// receivers) into `copies_at` (h's remote_stats[h][1]).
template <class Mem, class Member, class Quota, class Takes, class Remaining>
KOKKOS_INLINE_FUNCTION void step3_takes(const Member& team, int h, int R, int epn, int B, const Quota& quota,
                                        const Takes& takes, const Remaining& remaining, std::int32_t* rows,
                                        std::int32_t* copies_at) {
  // A round's two picks in one reduction: lane i offers receiver i
  // (i < R) and local expert i (i < epn); key 0 offers nothing.
  const int n = R > epn ? R : epn;
  for (;;) {
    KeyPair best;
    Kokkos::parallel_reduce(
        Kokkos::ThreadVectorRange(team, n),
        [&](const int i, KeyPair& v) {
          MaxKeys<Mem>::consider(v, i < R ? max_lowest_key(quota(i), i) : 0,
                                 i < epn ? max_lowest_key(remaining(i), i) : 0);
        },
        MaxKeys<Mem>(best));
    const ValueIndex q = from_max_lowest(best.first), m = from_max_lowest(best.second);
    if (q.value <= 0 || m.value <= 0) break;
    const std::int32_t take = static_cast<std::int32_t>(m.value < q.value ? m.value : q.value);
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, n), [&](const int i) {
      if (i == q.index) {
        quota(i) -= take;
        takes(i) += 1;
        rows[static_cast<std::int64_t>(m.index) * R + i] = take;
      }
      if (i == m.index) remaining(i) -= take;
    });
  }
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, epn), [&](const int j) {
    rows[static_cast<std::int64_t>(j) * R + h] = static_cast<std::int32_t>(remaining(j));
  });
  std::int32_t copies = 0;
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(team, R),
      [&](const int r, std::int32_t& acc) {
        const std::int32_t t = static_cast<std::int32_t>(takes(r));
        acc += t > 0 ? (t < B ? t : B) : 0;
      },
      copies);
  Kokkos::single(Kokkos::PerThread(team), [&]() { *copies_at = copies; });
}

// The host form's first kernel: step 1, then step 2, in one team, on
// every rank's tokens per expert (`counts`, [R][E]); the totals into
// rs.total, the moves into rs.donor_of and rs.inflow.
template <class Exec>
void phase_b_totals_and_moves(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs,
                              const std::int32_t* counts) {
  using T = Types<Exec>;
  using member = typename T::member;
  using Mem = typename T::mem;
  const int R = L.R, E = L.E, epn = L.epn;
  const std::int64_t ow_cum = L.ow_cum;
  const auto total = rs.total;
  const auto donor_of = rs.donor_of;
  const auto inflow = rs.inflow;
  const auto tables = rs.tables;
  const std::int64_t* const stop = rs.stop;
  int level = 0;
  auto policy = with_scratch<typename T::scratch_i64>(
      sized_team_policy(launch.exec(), 1, kMovesThreads, kMovesVector), R, &level);
  launch.parallel_for(
      "moonep::portable::phaseB_totals_and_moves", policy, KOKKOS_LAMBDA(const member& team) {
        if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
        typename T::scratch_i64 held(team.team_scratch(level), R);
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, R), [&](const int g) {
          held(g) = 0;
          donor_of(g) = -1;
          inflow(g) = 0;
        });
        team.team_barrier();
        step1_totals(team, R, E, epn, counts, ow_cum, tables, true, held,
                     [&](const int e, const std::int32_t t) { total(e) = t; });
        team.team_barrier();
        if (team.team_rank() != 0) return;  // step 2: one vector alone (see the top)
        step2_moves<Mem>(team, R, held, donor_of, inflow);
      });
}

// The host form's second kernel: step 3, one team per owner h:
// quota[r] = z[h][r] (rs.inflow of h's receivers), remaining[j] =
// total[h*epn + j]; h's experts' alloc rows (one block of epn*R,
// LayoutRight) are cleared, each take stored, and what h keeps stored
// last; remote_stats[h][1] into h's tables.
template <class Exec>
void phase_b_expert_split(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs) {
  using T = Types<Exec>;
  using member = typename T::member;
  using Mem = typename T::mem;
  const int R = L.R, B = L.B, epn = L.epn;
  const std::int64_t ow_rs = L.ow_rs;
  const auto total = rs.total;
  const auto donor_of = rs.donor_of;
  const auto inflow = rs.inflow;
  const auto alloc = rs.alloc;
  const auto tables = rs.tables;
  const std::int64_t* const stop = rs.stop;
  int level = 0;
  // Scratch: quota [R], takes [R] (per receiver of h, -1 for the others),
  // remaining [epn].
  auto policy = with_scratch<typename T::scratch_i32>(sized_team_policy(launch.exec(), R, kMovesThreads, kMovesVector),
                                                      2 * static_cast<std::int64_t>(R) + epn, &level);
  launch.parallel_for(
      "moonep::portable::phaseB_expert_split", policy, KOKKOS_LAMBDA(const member& team) {
        if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
        const int h = team.league_rank();
        typename T::scratch_i32 all(team.team_scratch(level), 2 * R + epn);
        auto quota = Kokkos::subview(all, Kokkos::make_pair(0, R));
        auto takes = Kokkos::subview(all, Kokkos::make_pair(R, 2 * R));
        auto remaining = Kokkos::subview(all, Kokkos::make_pair(2 * R, 2 * R + epn));
        std::int32_t* const rows = &alloc(static_cast<std::int64_t>(h) * epn, 0);  // [epn][R]
        step3_start(team, h, R, epn, donor_of, inflow, quota, takes, rows);
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, epn),
                             [&](const int j) { remaining(j) = total(h * epn + j); });
        team.team_barrier();
        if (team.team_rank() != 0) return;  // the takes: one vector alone (see the top)
        step3_takes<Mem>(team, h, R, epn, B, quota, takes, remaining, rows, tables(h).at + ow_rs + 1);
      });
}

// The device form's first kernel: steps 1-3 in one launch, one team per
// owner h. Step 3 of owner h needs every rank's step 2 (who takes from h),
// so every team does steps 1 and 2 itself, in its own scratch: the same
// loads and the same picks in every team, where a kernel of its own
// (the host form's) costs the step a launch and a round trip through
// global memory; only team 0 stores cum and rs.donor_of / rs.inflow
// (phase_b_layout reads donor_of). Then h's split as phase_b_expert_split's.
// R teams each load E*R counts: fine on a device, R times the host form's
// loads on a host (which keeps its two kernels).
// What must stay true: every team computes the same moves (same loads,
// same sequence); team h's remaining starts at h's totals, as rs.total's;
// nothing is stored outside RootScratch (cum and remote_stats[h][1] go to
// rs.cum and rs.copies; phaseB_layout_and_pairs publishes them), so that
// in the step graph it may run before validation has ended (on the
// tallies: counts of the valid ids, whatever the input).
template <class Exec>
void phase_b_moves_and_split(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs,
                             const std::int32_t* counts, const std::int64_t* stop) {
  using T = Types<Exec>;
  using member = typename T::member;
  using Mem = typename T::mem;
  const int R = L.R, E = L.E, B = L.B, epn = L.epn;
  const auto donor_of_out = rs.donor_of;
  const auto inflow_out = rs.inflow;
  const auto alloc = rs.alloc;
  const auto cum_rows = rs.cum_rows;
  const auto copies = rs.copies;
  int level = 0;
  // Scratch (int64): held, donor, inflow, quota, takes [R] each, then
  // remaining [epn].
  const std::int64_t n_scratch = 5 * static_cast<std::int64_t>(R) + epn;
  auto policy = with_scratch<typename T::scratch_i64>(
      sized_team_policy(launch.exec(), R, kMovesThreads, kMovesVector), n_scratch, &level);
  launch.parallel_for(
      "moonep::portable::phaseB_moves_and_split", policy, KOKKOS_LAMBDA(const member& team) {
        // `stop` (the validation result; null in the step graph, where this
        // kernel may run before validation ends and reads the tallies,
        // which are counts whatever the input): on bad input the tpe_in
        // rows it reads otherwise were never written this step (Phase A
        // did nothing), and their sums could overflow. Either way it
        // stores only Phase B's scratch; phaseB_layout_and_pairs checks
        // the result again before anything leaves it.
        if (stop && *stop > 0) return;  // (whole team, before any barrier)
        const int h = team.league_rank();
        typename T::scratch_i64 all(team.team_scratch(level), 5 * R + epn);
        auto held = Kokkos::subview(all, Kokkos::make_pair(0, R));
        auto donor = Kokkos::subview(all, Kokkos::make_pair(R, 2 * R));
        auto inflow = Kokkos::subview(all, Kokkos::make_pair(2 * R, 3 * R));
        auto quota = Kokkos::subview(all, Kokkos::make_pair(3 * R, 4 * R));
        auto takes = Kokkos::subview(all, Kokkos::make_pair(4 * R, 5 * R));
        auto remaining = Kokkos::subview(all, Kokkos::make_pair(5 * R, 5 * R + epn));
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, R), [&](const int g) {
          held(g) = 0;
          donor(g) = -1;
          inflow(g) = 0;
        });
        team.team_barrier();
        const int first = h * epn;
        step1_totals(team, R, E, epn, counts, 0, cum_rows, h == 0, held,
                     [&](const int e, const std::int32_t t) {
                       if (e >= first && e < first + epn) remaining(e - first) = t;
                     });
        team.team_barrier();
        if (team.team_rank() == 0) step2_moves<Mem>(team, R, held, donor, inflow);
        team.team_barrier();
        std::int32_t* const rows = &alloc(static_cast<std::int64_t>(first), 0);  // [epn][R]
        step3_start(team, h, R, epn, donor, inflow, quota, takes, rows);
        if (h == 0) {
          Kokkos::parallel_for(Kokkos::TeamVectorRange(team, R), [&](const int r) {
            donor_of_out(r) = static_cast<std::int32_t>(donor(r));
            inflow_out(r) = static_cast<std::int32_t>(inflow(r));
          });
        }
        team.team_barrier();
        if (team.team_rank() != 0) return;  // the takes: one vector alone (see the top)
        step3_takes<Mem>(team, h, R, epn, B, quota, takes, remaining, rows, copies.data() + h);
      });
}

}  // namespace moonep::impl::portable
