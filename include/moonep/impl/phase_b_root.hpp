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
// Kernels (the launches of the phase, whatever R):
//   phaseB_totals_and_moves  one team: step 1 (cum, totals, loads) and the
//                            rank-level moves of step 2;
//   phaseB_expert_split      one team per owner h: step 3;
//   phaseB_layout            one team per destination d: step 4 (copy
//                            selection) and step 5 (the layout);
//   phaseB_pairs             one team: expert_ptr and the pairs table.
// Steps 2 and 3 are sequences of arg-max/arg-min picks (each a team
// reduction with our reducers, moonep/impl/reducers.hpp, since the
// tie-breaks are part of the spec). Step 4 needs no sequence: picking the
// largest remaining count B times, ties to the largest expert id, takes the
// candidates in the order (count desc, id desc), so each candidate's slot
// is its rank in that order (counted in parallel) when below B and its
// count is positive.
//
// What must stay true: the pairs of one expert are in increasing
// destination order (C2's binary search and the runs rely on it); no kernel
// writes past pair_capacity (the count is checked on the host after the
// step, an internal error if exceeded).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/impl/reducers.hpp"
#include "moonep/world.hpp"

namespace moonep::impl::portable {

template <class Exec>
struct RootScratch {
  using T = Types<Exec>;
  typename T::ivec total;          // [E] step 1
  typename T::ivec donor_of;       // [R] step 2: the one rank a receiver takes from, or -1
  typename T::ivec inflow;         // [R] step 2: how much it takes
  typename T::imat alloc;          // [E][R] step 3, expert major (acum runs along a row)
  typename T::imat expert_offset;  // [R][E] step 5
  typename T::imat own_stage;      // [R][own_len] per-rank tables of ranks not stored into in place
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

// Steps 1-5 on every rank's counts in `chunk0` (rank 0's chunk): the
// shared tables into chunk0, the per-rank tables through rs.tables, the
// number of pairs into rs.npairs.
template <class Exec>
void plan_root(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs,
               std::int32_t* chunk0) {
  using T = Types<Exec>;
  using member = typename T::member;
  using Mem = typename T::mem;
  const int R = L.R, E = L.E, B = L.B, epn = L.epn;
  const std::int64_t NvS = L.NvS, tp = L.tp, cap = L.pair_capacity;
  const std::int64_t tpe_in = L.tpe_in, ow_cum = L.ow_cum, ow_cu = L.ow_cu, ow_zfr = L.ow_zfr, ow_rs = L.ow_rs;
  const std::int64_t sh_ptr = L.shared + L.sh_ptr, sh_etc = L.shared + L.sh_etc, sh_pairs = L.shared + L.sh_pairs;
  const auto total = rs.total;
  const auto donor_of = rs.donor_of;
  const auto inflow = rs.inflow;
  const auto alloc = rs.alloc;
  const auto expert_offset = rs.expert_offset;
  const auto tables = rs.tables;
  const auto npairs = rs.npairs;
  const std::int64_t* const stop = rs.stop;

  // Step 1: cum (each rank's exclusive prefix over ranks), totals; alloc
  // starts as "everything on the owner"; then the loads, the balances
  // against CAP_g (T div R + (g < T mod R), T the step's entries: S*K on a
  // full step; docs/spec/planning.md "Ragged steps"), and step 2 on them, all
  // in one team.
  {
    int level = 0;
    auto policy =
        with_scratch<typename T::scratch_i64>(typename T::team_policy(launch.exec(), 1, Kokkos::AUTO), R, &level);
    launch.parallel_for(
        "moonep::portable::phaseB_totals_and_moves", policy, KOKKOS_LAMBDA(const member& team) {
          if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, E), [&](const int e) {
            std::int32_t run = 0;
            for (int r = 0; r < R; ++r) {
              tables(r).at[ow_cum + e] = run;
              run += chunk0[tpe_in + static_cast<std::int64_t>(r) * E + e];
            }
            total(e) = run;
            const int g = e / epn;
            for (int d = 0; d < R; ++d) alloc(e, d) = d == g ? run : 0;
          });
          team.team_barrier();
          std::int64_t all = 0;  // T
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(team, E), [&](const int e, std::int64_t& acc) { acc += total(e); }, all);
          typename T::scratch_i64 balance(team.team_scratch(level), R);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R), [&](const int g) {
            std::int64_t load = 0;
            for (int j = 0; j < epn; ++j) load += total(g * epn + j);
            balance(g) = load - (all / R + (g < all % R ? 1 : 0));
            donor_of(g) = -1;
            inflow(g) = 0;
            tables(g).at[ow_rs + 1] = 0;  // copies made of g's experts, counted in step 4
          });
          team.team_barrier();
          for (;;) {
            ValueIndex hi, lo;
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, R),
                [&](const int r, ValueIndex& v) { MaxLowest<Mem>::consider(v, balance(r), r); }, MaxLowest<Mem>(hi));
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, R),
                [&](const int r, ValueIndex& v) { MinLowest<Mem>::consider(v, balance(r), r); }, MinLowest<Mem>(lo));
            if (hi.value <= 0 || lo.value >= 0) break;
            team.team_barrier();
            Kokkos::single(Kokkos::PerTeam(team), [&]() {
              const std::int64_t move = -lo.value;
              balance(hi.index) -= move;
              balance(lo.index) = 0;
              donor_of(lo.index) = hi.index;
              inflow(lo.index) = static_cast<std::int32_t>(move);
            });
            team.team_barrier();
          }
        });
  }

  // Step 3: expert-level split, one team per owner h.
  {
    int level = 0;
    auto policy = with_scratch<typename T::scratch_i64>(typename T::team_policy(launch.exec(), R, Kokkos::AUTO),
                                                        static_cast<std::int64_t>(R) + epn, &level);
    launch.parallel_for(
        "moonep::portable::phaseB_expert_split", policy, KOKKOS_LAMBDA(const member& team) {
          if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
          const int h = team.league_rank();
          typename T::scratch_i64 all(team.team_scratch(level), R + epn);
          auto quota = Kokkos::subview(all, Kokkos::make_pair(0, R));
          auto remaining = Kokkos::subview(all, Kokkos::make_pair(R, R + epn));
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R),
                               [&](const int r) { quota(r) = donor_of(r) == h ? inflow(r) : 0; });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, epn),
                               [&](const int j) { remaining(j) = total(h * epn + j); });
          team.team_barrier();
          for (;;) {
            ValueIndex q, m;
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, R),
                [&](const int r, ValueIndex& v) { MaxLowest<Mem>::consider(v, quota(r), r); }, MaxLowest<Mem>(q));
            if (q.value <= 0) break;
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, epn),
                [&](const int j, ValueIndex& v) { MaxLowest<Mem>::consider(v, remaining(j), j); },
                MaxLowest<Mem>(m));
            if (m.value <= 0) break;
            team.team_barrier();
            Kokkos::single(Kokkos::PerTeam(team), [&]() {
              const std::int64_t take = m.value < q.value ? m.value : q.value;
              quota(q.index) -= take;
              remaining(m.index) -= take;
              const int e = h * epn + m.index;
              alloc(e, q.index) += static_cast<std::int32_t>(take);
              alloc(e, h) -= static_cast<std::int32_t>(take);
            });
            team.team_barrier();
          }
        });
  }

  // Steps 4 and 5, one team per destination d. Only experts of d's single
  // donor can have remote entries on d, so the copy candidates are that
  // donor's epn experts with a positive count on d (local index j <->
  // expert donor*epn + j, so "ties to the largest expert id" is "to the
  // largest j"). Scratch: the candidates' j, then a picked flag per j.
  {
    int level = 0;
    auto policy = with_scratch<typename T::scratch_i32>(typename T::team_policy(launch.exec(), R, Kokkos::AUTO),
                                                        2 * static_cast<std::int64_t>(epn), &level);
    launch.parallel_for(
        "moonep::portable::phaseB_layout", policy, KOKKOS_LAMBDA(const member& team) {
          if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
          const int d = team.league_rank();
          const int donor = donor_of(d);
          typename T::scratch_i32 all(team.team_scratch(level), 2 * epn);
          auto candidate = Kokkos::subview(all, Kokkos::make_pair(0, epn));
          auto picked = Kokkos::subview(all, Kokkos::make_pair(epn, 2 * epn));
          std::int32_t* etc = chunk0 + sh_etc + static_cast<std::int64_t>(d) * B;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, epn), [&](const int j) { picked(j) = 0; });
          std::int32_t ncand = 0;
          if (donor >= 0) {
            const int first = donor * epn;
            Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, epn),
                                  [&](const int j, std::int32_t& run, const bool final) {
                                    const bool positive = alloc(first + j, d) > 0;
                                    if (final && positive) candidate(run) = j;
                                    run += positive ? 1 : 0;
                                  });
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, epn),
                [&](const int j, std::int32_t& acc) { acc += alloc(first + j, d) > 0 ? 1 : 0; }, ncand);
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ncand), [&](const int q) {
              const int j = candidate(q);
              const std::int32_t c = alloc(first + j, d);
              int order = 0;  // candidates before j in (count desc, id desc)
              for (int q2 = 0; q2 < ncand; ++q2) {
                const int j2 = candidate(q2);
                const std::int32_t c2 = alloc(first + j2, d);
                order += (c2 > c || (c2 == c && j2 > j)) ? 1 : 0;
              }
              if (order < B) {
                etc[order] = first + j;
                picked(j) = 1;
                Kokkos::atomic_add(&tables(donor).at[ow_rs + 1], 1);
              }
            });
          }
          const int filled = ncand < B ? ncand : B;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, filled, B), [&](const int b) { etc[b] = -1; });
          Kokkos::single(Kokkos::PerTeam(team), [&]() { tables(d).at[ow_rs] = ncand; });
          team.team_barrier();
          std::int32_t* own = tables(d).at;
          Kokkos::parallel_scan(
              Kokkos::TeamThreadRange(team, E + B), [&](const int g, std::int64_t& start, const bool final) {
                std::int32_t expert = -1;
                if (g < E) {
                  const bool is_picked = donor >= 0 && g / epn == donor && picked(g - donor * epn) != 0;
                  expert = is_picked ? -1 : g;
                } else {
                  expert = etc[g - E];
                }
                const std::int64_t count = expert >= 0 ? alloc(expert, d) : 0;
                const std::int64_t padded = padded_size(count, tp);
                if (final) {
                  own[ow_cu + g] = static_cast<std::int32_t>(start + padded);
                  const bool pad = count > 0 && padded > count;
                  own[ow_zfr + 2 * g] = pad ? static_cast<std::int32_t>(start + count) : 0;
                  own[ow_zfr + 2 * g + 1] = pad ? static_cast<std::int32_t>(padded - count) : 0;
                  if (expert >= 0) expert_offset(d, expert) = static_cast<std::int32_t>(start);
                }
                start += padded;
              });
        });
  }

  // The (expert, destination) pairs: a team scan of the counts into
  // expert_ptr, then each expert's pairs in destination order.
  launch.parallel_for(
      "moonep::portable::phaseB_pairs", typename T::team_policy(launch.exec(), 1, Kokkos::AUTO),
      KOKKOS_LAMBDA(const member& team) {
        if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
        Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, E), [&](const int e, std::int32_t& run, const bool final) {
          std::int32_t c = 0;
          for (int d = 0; d < R; ++d) c += alloc(e, d) > 0 ? 1 : 0;
          if (final) {
            chunk0[sh_ptr + e] = run;
            if (e == E - 1) {
              chunk0[sh_ptr + E] = run + c;
              npairs() = run + c;
            }
          }
          run += c;
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, E), [&](const int e) {
          std::int64_t p = chunk0[sh_ptr + e];
          std::int64_t acum = 0;
          for (int d = 0; d < R && p < cap; ++d) {
            const std::int32_t a = alloc(e, d);
            if (a <= 0) continue;
            const std::int64_t before = acum;
            acum += a;
            chunk0[sh_pairs + 3 * p] = d;
            chunk0[sh_pairs + 3 * p + 1] = static_cast<std::int32_t>(acum);
            chunk0[sh_pairs + 3 * p + 2] = static_cast<std::int32_t>(d * NvS + expert_offset(d, e) - before);
            ++p;
          }
        });
      });
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
