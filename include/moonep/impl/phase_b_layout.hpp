// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_b_layout.hpp — Phase B's kernels of docs/spec/planning.md
// steps 4 and 5 for every destination, then the (expert, destination)
// pairs every rank reads (plan_root, phase_b_root.hpp). Host form:
//
//   phaseB_layout  one team per destination d: step 4 (copy selection)
//                  and step 5 (the layout);
//   phaseB_pairs   one team: expert_ptr and the pairs table, a thread per
//                  expert.
//
// Device form: phaseB_layout_and_pairs, the first's teams, each then
// writing the pairs with its destination (every team scans the experts'
// pair counts from alloc itself: no team waits for another, where a last
// team writing them all put an arrival, a fence and a serial scan on the
// step's longest path). LayoutStep holds the bodies; phase_b_layout
// launches either form.
//
// Neither has a sequence: step 4's B picks of the largest remaining count,
// ties to the largest expert id, take the candidates in the order (count
// desc, id desc), so each candidate's slot is its rank in that order
// (counted in parallel) when below B; step 5 and expert_ptr are team scans.
// Their teams are a block of plain threads (vector length 1: a team scan
// spans the whole block), a thread per item on a device space where the
// kernel allows it (one_round_team_policy).
// What a scan reads is in team scratch or loaded before its stores (as in
// phase_b_moves.hpp: a load cannot pass an earlier store through a
// possibly aliased int32 pointer).
//
// What must stay true: only experts of d's single donor can have remote
// entries on d (step 2 fills a receiver in one move), so d's counts are
// its own experts' and its donor's; the pairs of one expert are in
// increasing destination order (C2's binary search and the runs rely on
// it); no kernel writes past pair_capacity (the count is checked on the
// host after the step, an internal error if exceeded).
#pragma once

#include <cstdint>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_b_moves.hpp"
#include "moonep/impl/phase_b_scratch.hpp"
#include "moonep/impl/portable_types.hpp"

namespace moonep::impl::portable {

// What steps 4 and 5 and the pairs read and write, copied into the
// kernels; layout() and pairs() are the bodies of the host form's two
// kernels, which the device form's one kernel runs one after the other.
template <class Exec>
struct LayoutStep {
  using T = Types<Exec>;
  int R, E, B, epn;
  std::int64_t tp, ow_cu, ow_zfr, ow_rs, sh_etc, NvS, cap, sh_ptr, sh_pairs;
  std::int64_t ow_cum;
  typename T::ivec donor_of, copies;
  typename T::imat alloc, expert_offset, cum;
  typename T::refs tables;
  Kokkos::View<std::int64_t, typename T::mem, Kokkos::MemoryUnmanaged> npairs;
  std::int32_t* chunk0;

  LayoutStep(const ChunkLayout& L, const RootScratch<Exec>& rs, std::int32_t* chunk0_)
      : R(L.R), E(L.E), B(L.B), epn(L.epn), tp(L.tp), ow_cu(L.ow_cu), ow_zfr(L.ow_zfr), ow_rs(L.ow_rs),
        sh_etc(L.shared + L.sh_etc), NvS(L.NvS), cap(L.pair_capacity), sh_ptr(L.shared + L.sh_ptr),
        sh_pairs(L.shared + L.sh_pairs), ow_cum(L.ow_cum), donor_of(rs.donor_of), copies(rs.copies), alloc(rs.alloc),
        expert_offset(rs.expert_offset), cum(rs.cum), tables(rs.tables), npairs(rs.npairs), chunk0(chunk0_) {}

  // Device form: what phaseB_moves_and_split left in Phase B's scratch for
  // destination d (its cum row, its remote_stats[d][1]) into d's tables,
  // by the whole team (once validation has passed).
  template <class Member>
  KOKKOS_INLINE_FUNCTION void publish_moves(const Member& team, const int d) const {
    std::int32_t* own = tables(d).at;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, E), [&](const int e) { own[ow_cum + e] = cum(d, e); });
    Kokkos::single(Kokkos::PerTeam(team), [&]() { own[ow_rs + 1] = copies(d); });
  }

  // Scratch of layout(): the donor's counts on d, then a picked flag per j;
  // with `own_pairs` (the device form) then pair_places()'s two per expert.
  std::int64_t scratch_n(bool own_pairs = false) const {
    return 2 * static_cast<std::int64_t>(epn) + (own_pairs ? 2 * static_cast<std::int64_t>(E) : 0);
  }

  // Steps 4 and 5 for destination d, by the whole team. The copy
  // candidates are d's donor's epn experts with a positive count on d
  // (local index j <-> expert donor*epn + j, so "ties to the largest expert
  // id" is "to the largest j").
  template <class Member, class Scratch>
  KOKKOS_INLINE_FUNCTION void layout(const Member& team, const int d, const Scratch& all) const {
    const int donor = donor_of(d);
    std::int32_t* own = tables(d).at;
    const int first = donor >= 0 ? donor * epn : 0;
    auto count = Kokkos::subview(all, Kokkos::make_pair(0, epn));
    auto picked = Kokkos::subview(all, Kokkos::make_pair(epn, 2 * epn));
    std::int32_t* etc = chunk0 + sh_etc + static_cast<std::int64_t>(d) * B;
    // Preset before the barrier, overwritten after it: the copy slots
    // to -1 (those left unfilled), remote_stats[d][0] to 0 (no
    // candidate).
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, epn), [&](const int j) {
      count(j) = donor >= 0 ? alloc(first + j, d) : 0;
      picked(j) = 0;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, B), [&](const int b) { etc[b] = -1; });
    Kokkos::single(Kokkos::PerTeam(team), [&]() { own[ow_rs] = 0; });
    team.team_barrier();
    // Step 4: candidate j's slot is the number of candidates before it
    // in (count desc, id desc) (a count above c > 0 is a candidate's);
    // the last candidate, none after it, writes their number
    // (remote_stats[d][0]), so that no team reduction is needed.
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, epn), [&](const int j) {
      const std::int32_t c = count(j);
      if (c <= 0) return;
      int before = 0, after = 0;
      for (int j2 = 0; j2 < epn; ++j2) {
        const std::int32_t c2 = count(j2);
        before += (c2 > c || (c2 == c && j2 > j)) ? 1 : 0;
        after += (c2 > 0 && (c2 < c || (c2 == c && j2 < j))) ? 1 : 0;
      }
      if (before < B) {
        etc[before] = first + j;
        picked(j) = 1;
      }
      if (after == 0) own[ow_rs] = before + 1;
    });
    team.team_barrier();
    // Step 5: group g < E is expert g unless picked (its count: d's
    // own alloc for d's experts, the donor's count on d, else 0),
    // group E + b the b-th copy.
    Kokkos::parallel_scan(
        Kokkos::TeamThreadRange(team, E + B), [&](const int g, std::int64_t& start, const bool final) {
          std::int32_t expert = g;
          std::int64_t n = 0;
          if (g >= E) {
            expert = etc[g - E];
            n = expert >= 0 ? count(expert - first) : 0;
          } else if (g / epn == d) {
            n = alloc(g, d);
          } else if (donor >= 0 && g / epn == donor) {
            const int j = g - first;
            expert = picked(j) != 0 ? -1 : g;
            n = expert >= 0 ? count(j) : 0;
          }
          const std::int64_t padded = padded_size(n, tp);
          if (final) {
            own[ow_cu + g] = static_cast<std::int32_t>(start + padded);
            const bool pad = n > 0 && padded > n;
            own[ow_zfr + 2 * g] = pad ? static_cast<std::int32_t>(start + n) : 0;
            own[ow_zfr + 2 * g + 1] = pad ? static_cast<std::int32_t>(padded - n) : 0;
            if (expert >= 0) expert_offset(d, expert) = static_cast<std::int32_t>(start);
          }
          start += padded;
        });
  }

  // Device form: where destination d's pairs go, by d's team from alloc
  // alone (every team the same scan: no team waits for another): a team
  // scan of each expert's pair count (its destinations with entries) gives
  // the expert's first pair, its pair with d is that plus its destinations
  // with entries before d (place(e), -1 for none); acum_before(e) its
  // entries on those. Team 0 stores expert_ptr and the pair count. Each
  // thread loads its alloc row kLoadBatch destinations at a time.
  template <class Member, class Scratch>
  KOKKOS_INLINE_FUNCTION void pair_places(const Member& team, const int d, const Scratch& place,
                                          const Scratch& acum_before) const {
    Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, E), [&](const int e, std::int32_t& run, const bool final) {
      std::int32_t n = 0, before = 0, acum = 0;
      bool mine = false;
      for (int d0 = 0; d0 < R; d0 += kLoadBatch) {
        std::int32_t a[kLoadBatch];
        for (int k = 0; k < kLoadBatch; ++k) a[k] = d0 + k < R ? alloc(e, d0 + k) : 0;
        for (int k = 0; k < kLoadBatch; ++k) {
          if (a[k] <= 0) continue;
          ++n;
          if (d0 + k < d) {
            ++before;
            acum += a[k];
          }
          mine = mine || d0 + k == d;
        }
      }
      if (final) {
        place(e) = mine ? run + before : -1;
        acum_before(e) = acum;
        if (d == 0) {
          chunk0[sh_ptr + e] = run;
          if (e == E - 1) {
            chunk0[sh_ptr + E] = run + n;
            npairs() = run + n;
          }
        }
      }
      run += n;
    });
  }

  // Device form: destination d's pairs at their places, by d's team after
  // its layout (which stored expert_offset(d, .), read here by other
  // threads: a team barrier first).
  template <class Member, class Scratch>
  KOKKOS_INLINE_FUNCTION void own_pairs(const Member& team, const int d, const Scratch& place,
                                        const Scratch& acum_before) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, E), [&](const int e) {
      const std::int64_t p = place(e);
      if (p < 0 || p >= cap) return;
      const std::int64_t before = acum_before(e), a = alloc(e, d), off = expert_offset(d, e);
      chunk0[sh_pairs + 3 * p] = d;
      chunk0[sh_pairs + 3 * p + 1] = static_cast<std::int32_t>(before + a);
      chunk0[sh_pairs + 3 * p + 2] = static_cast<std::int32_t>(d * NvS + off - before);
    });
  }

  // The (expert, destination) pairs, by the whole team: a team scan of
  // each expert's pair count into expert_ptr; in the scan's final pass
  // each thread also writes its expert's pairs, in destination order, with
  // its acum and dst base (its alloc row and expert_offset column loaded
  // kLoadBatch destinations at a time before the stores). The host form's,
  // a kernel after phaseB_layout's.
  template <class Member>
  KOKKOS_INLINE_FUNCTION void pairs(const Member& team) const {
    Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, E), [&](const int e, std::int32_t& run, const bool final) {
      std::int64_t p = run, acum = 0;
      std::int32_t c = 0;
      for (int d0 = 0; d0 < R; d0 += kLoadBatch) {
        std::int32_t a[kLoadBatch], off[kLoadBatch];
        for (int k = 0; k < kLoadBatch; ++k) {
          const bool in = d0 + k < R;
          a[k] = in ? alloc(e, d0 + k) : 0;
          const std::int32_t* at = in && final ? &expert_offset(d0 + k, e) : nullptr;
          off[k] = at ? *at : 0;
        }
        for (int k = 0; k < kLoadBatch; ++k) {
          if (a[k] <= 0) continue;
          const std::int64_t before = acum;
          acum += a[k];
          if (final && p < cap) {
            const std::int64_t d = d0 + k;
            chunk0[sh_pairs + 3 * p] = static_cast<std::int32_t>(d);
            chunk0[sh_pairs + 3 * p + 1] = static_cast<std::int32_t>(acum);
            chunk0[sh_pairs + 3 * p + 2] = static_cast<std::int32_t>(d * NvS + off[k] - before);
          }
          ++p;
          ++c;
        }
      }
      if (final) {
        chunk0[sh_ptr + e] = run;
        if (e == E - 1) {
          chunk0[sh_ptr + E] = run + c;
          npairs() = run + c;
        }
      }
      run += c;
    });
  }
};

// Steps 4 and 5, one team per destination d; with `pairs_by_last_team`
// (the device form) first d's results of phaseB_moves_and_split into its
// tables (publish_moves), and the pairs too, each team d those with d
// (pair_places, own_pairs). No team waits for another. `tallies` (an in-process
// step graph's, validate_histogram, read by phaseB_moves_and_split; else
// null): team d zeroes row d for the next step, bad input or not.
// What must stay true: the tallies are back at 0 after every step.
template <class Exec>
void phase_b_layout(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs,
                    std::int32_t* chunk0, bool pairs_by_last_team, std::int32_t* tallies = nullptr) {
  using T = Types<Exec>;
  using member = typename T::member;
  using scratch = typename T::scratch_i32;
  const LayoutStep<Exec> step(L, rs, chunk0);
  const std::int64_t* const stop = rs.stop;
  const int R = L.R;
  const std::int64_t scratch_n = step.scratch_n(pairs_by_last_team);
  const int epn = L.epn;
  int level = compat::scratch_level_for(scratch::shmem_size(static_cast<std::size_t>(scratch_n)));
  const int E = L.E;
  const auto body = KOKKOS_LAMBDA(const member& team) {
    const int d = team.league_rank();
    if (tallies) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, E),
                           [&](const int e) { tallies[static_cast<std::int64_t>(d) * E + e] = 0; });
    }
    if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
    const scratch all(team.team_scratch(level), scratch_n);
    if (!pairs_by_last_team) {
      step.layout(team, d, all);
      return;
    }
    step.publish_moves(team, d);
    const auto place = Kokkos::subview(all, Kokkos::make_pair(2 * epn, 2 * epn + E));
    const auto acum_before = Kokkos::subview(all, Kokkos::make_pair(2 * epn + E, 2 * epn + 2 * E));
    step.pair_places(team, d, place, acum_before);
    step.layout(team, d, all);
    team.team_barrier();
    step.own_pairs(team, d, place, acum_before);
  };
  launch.parallel_for(pairs_by_last_team ? "moonep::portable::phaseB_layout_and_pairs" : "moonep::portable::phaseB_layout",
                      one_round_team_policy<scratch>(launch.exec(), R, L.E + L.B, scratch_n, &level, body), body);
}

// The host form's pairs: one team, a thread per expert.
template <class Exec>
void phase_b_pairs(const Launcher<Exec>& launch, const ChunkLayout& L, const RootScratch<Exec>& rs,
                   std::int32_t* chunk0) {
  using T = Types<Exec>;
  using member = typename T::member;
  const LayoutStep<Exec> step(L, rs, chunk0);
  const std::int64_t* const stop = rs.stop;
  const auto body = KOKKOS_LAMBDA(const member& team) {
    if (stop && *stop > 0) return;  // bad input: nothing is touched (whole team, before any barrier)
    step.pairs(team);
  };
  int level = 0;  // (no scratch)
  launch.parallel_for("moonep::portable::phaseB_pairs",
                      one_round_team_policy<typename T::scratch_i32>(launch.exec(), 1, L.E, 0, &level, body), body);
}

}  // namespace moonep::impl::portable
