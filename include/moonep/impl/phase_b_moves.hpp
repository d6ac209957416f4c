// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_b_moves.hpp — Phase B's first two kernels (plan_root,
// phase_b_root.hpp): docs/spec/planning.md steps 1-3.
//
//   phaseB_totals_and_moves  one team: step 1 (cum into every rank's
//                            tables, the totals, the loads) and step 2;
//   phaseB_expert_split      one team per owner h: step 3, and h's rows of
//                            alloc and remote_stats[h][1].
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

// Step 1, then step 2, in one team. Step 1: cum (each rank's exclusive
// prefix over ranks) into every rank's tables, the totals (rs.total),
// and each rank's load (its experts' entries, all ranks'); step 2 on the
// balances against CAP_g (T div R + (g < T mod R), T the step's entries:
// S*K on a full step; docs/spec/planning.md "Ragged steps") into
// rs.donor_of and rs.inflow.
template <class Exec>
void phase_b_totals_and_moves(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs,
                              const std::int32_t* chunk0) {
  using T = Types<Exec>;
  using member = typename T::member;
  using Mem = typename T::mem;
  const int R = L.R, E = L.E, epn = L.epn;
  const std::int64_t tpe_in = L.tpe_in, ow_cum = L.ow_cum;
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
        // held(g): rank g's load, then through step 2 balance[g] + CAP_g
        // (so that a receiver's "balance 0" is held(g) = CAP_g).
        typename T::scratch_i64 held(team.team_scratch(level), R);
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, R), [&](const int g) {
          held(g) = 0;
          donor_of(g) = -1;
          inflow(g) = 0;
        });
        team.team_barrier();
        // Step 1, a thread per expert: rank r's count loaded with rank r's
        // tables pointer, kLoadBatch ranks at a time, before the stores;
        // the total added to its owner's load (a scratch atomic: E of
        // them, where summing the loads apart would load every count
        // again).
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, E), [&](const int e) {
          std::int32_t run = 0;
          for (int r0 = 0; r0 < R; r0 += kLoadBatch) {
            std::int32_t got[kLoadBatch];
            std::int32_t* at[kLoadBatch];
            for (int j = 0; j < kLoadBatch; ++j) {
              const bool in = r0 + j < R;
              got[j] = in ? chunk0[tpe_in + static_cast<std::int64_t>(r0 + j) * E + e] : 0;
              at[j] = in ? tables(r0 + j).at : nullptr;
            }
            for (int j = 0; j < kLoadBatch; ++j) {
              if (r0 + j < R) {
                at[j][ow_cum + e] = run;
                run += got[j];
              }
            }
          }
          total(e) = run;
          Kokkos::atomic_add(&held(e / epn), static_cast<std::int64_t>(run));
        });
        team.team_barrier();
        if (team.team_rank() != 0) return;  // step 2: one vector alone (see the top)
        std::int64_t all = 0;               // T
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
      });
}

// Step 3, one team per owner h: quota[r] = z[h][r] (rs.inflow of h's
// receivers), remaining[j] = total[h*epn + j]; h's experts' alloc rows
// (one block of epn*R, LayoutRight) are cleared, each take stored, and
// what h keeps stored last; remote_stats[h][1] (copies made of h's
// experts: min(B, takes) over h's receivers) into h's tables.
template <class Exec>
void phase_b_expert_split(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs) {
  using T = Types<Exec>;
  using member = typename T::member;
  using Mem = typename T::mem;
  const int R = L.R, E = L.E, B = L.B, epn = L.epn;
  const std::int64_t ow_rs = L.ow_rs;
  const auto total = rs.total;
  const auto donor_of = rs.donor_of;
  const auto inflow = rs.inflow;
  const auto alloc = rs.alloc;
  const auto tables = rs.tables;
  const std::int64_t* const stop = rs.stop;
  (void)E;
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
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, R), [&](const int r) {
          const bool mine = donor_of(r) == h;
          quota(r) = mine ? inflow(r) : 0;
          takes(r) = mine ? 0 : -1;
        });
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, epn),
                             [&](const int j) { remaining(j) = total(h * epn + j); });
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, epn * R), [&](const int i) { rows[i] = 0; });
        team.team_barrier();
        if (team.team_rank() != 0) return;  // the takes: one vector alone (see the top)
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
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, epn),
                             [&](const int j) { rows[static_cast<std::int64_t>(j) * R + h] = remaining(j); });
        std::int32_t copies = 0;
        Kokkos::parallel_reduce(
            Kokkos::ThreadVectorRange(team, R),
            [&](const int r, std::int32_t& acc) {
              const std::int32_t t = takes(r);
              acc += t > 0 ? (t < B ? t : B) : 0;
            },
            copies);
        Kokkos::single(Kokkos::PerThread(team), [&]() { tables(h).at[ow_rs + 1] = copies; });
      });
}

}  // namespace moonep::impl::portable
