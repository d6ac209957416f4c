// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_c2_device.hpp — the device form of Phase C2's first
// kernel, phaseC2_destinations_dedup (what it computes:
// phase_c2_destinations.hpp; the host form's kernel is there too).
//
// One team thread per token, one vector lane per entry of the token (the
// vector: K rounded up to a power of two, at most 32 lanes; on Kokkos::Cuda
// a team of kC2Threads threads, sized_team_policy). Two vector loops over
// the same ThreadVectorRange(K), so entry k has the same lane in both:
//  1. each lane finds its entry's destination rank and raw slot (the
//     binary search over its expert's acum) and stores both into team
//     scratch at the entry;
//  2. (the vector loop's end is a warp sync on Kokkos::Cuda) each lane reads
//     its token's K ranks from scratch, derives its own dedup role (the
//     primary of its rank is the first entry with that rank; a duplicate's
//     index counts the duplicates before it; a primary's link counts those
//     after it, step 7/8), loads what it stores through (the destination's
//     chunk pointer, or its staging position) and then stores dst and its
//     slot triple.
// Why: the host form's thread walks its token's K entries one after
// another, each a chain of dependent loads (id, cum, the search), and
// reloads after each store (an int32 store may alias any later load). Here
// the K searches run side by side on K lanes, a warp's loads of ids, pos
// and dst are contiguous, and each lane issues its loads before its stores.
//
// What must stay true: scratch is stored only in loop 1, each entry by the
// lane loop 2 gives the same k; a team thread holds one token's entries at
// a time; the results are the host form's, bit for bit. It runs on device
// spaces only (phase_c2_destinations.hpp says why).
#pragma once

#include <cstdint>

#include "moonep/config.hpp"
#include "moonep/impl/alignment.hpp"
#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_a_local.hpp"
#include "moonep/impl/phase_c2_outputs.hpp"
#include "moonep/impl/portable_types.hpp"

namespace moonep::impl::portable {

// Step 6 for entry i of local rank l, the search both forms of
// phaseC2_destinations_dedup run: its destination rank and raw slot, from
// the first pair of its expert whose acum exceeds the entry's place G in
// the expert's order (the rank's own cumulative count plus its position
// among the expert's entries).
template <class Exec>
struct EntryDestination {
  using T = Types<Exec>;
  int E;
  std::int64_t N, sh_ptr, sh_pairs, ow_cum;
  typename T::ivec pos, estart;
  typename T::crefs routing;
  typename T::refs chunk, shared_tables;

  EntryDestination(const ChunkLayout& CL, const InputScratch<Exec>& in, const LocalRanks<Exec>& lr)
      : E(CL.E),
        N(CL.N),
        sh_ptr(CL.sh_ptr),
        sh_pairs(CL.sh_pairs),
        ow_cum(CL.own + CL.ow_cum),
        pos(in.pos),
        estart(in.estart),
        routing(lr.routing),
        chunk(lr.chunk),
        shared_tables(lr.shared_tables) {}

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t l, std::int64_t i, std::int32_t& rank,
                                         std::int32_t& raw) const {
    const std::int32_t* shared = shared_tables(l).at;
    const std::int32_t e = routing(l).at[i];
    const std::int32_t j = pos(l * N + i);
    const std::int64_t G = chunk(l).at[ow_cum + e] + (j - estart(l * E + e));
    std::int64_t lo = shared[sh_ptr + e], hi = shared[sh_ptr + e + 1] - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      if (shared[sh_pairs + 3 * mid + 1] > G) hi = mid; else lo = mid + 1;
    }
    rank = shared[sh_pairs + 3 * lo];
    raw = static_cast<std::int32_t>(shared[sh_pairs + 3 * lo + 2] + G);
  }
};

// A slot's values as one aligned 16-byte unit (the device form's slots are
// 4 int32: ChunkLayout::slot_ints), so that a lane's slot is one vector
// store (st.global.v4 on Kokkos::Cuda) where three int32 stores each cost
// the L2 a write of their own; used where every destination's slots are
// 16-byte aligned (PublishScratch::quads), else the values one by one.
using SlotQuad = Int32x4;

// Threads per team of the device form's phaseC2_destinations_dedup, and
// the int32 team scratch it takes (rank and raw slot of each lane's entry).
inline constexpr int kC2Threads = 256;
inline constexpr std::int64_t kC2Scratch = 2 * kC2Threads;

// The vector of a token: K rounded up to a power of two (K <= kMaxTopk = 32).
inline int c2_vector_width(int K) {
  int v = 1;
  while (v < K) v *= 2;
  return v;
}

// Entry k's dedup role among its token's K entries, from their
// destination ranks `of` (steps 7/8): the entries of the token with its
// rank before k and in all, and the first of them (the primary of that
// rank; k itself when it is).
struct TokenRole {
  int before = 0, same = 0, primary = 0;
};
KOKKOS_INLINE_FUNCTION TokenRole token_role(const std::int32_t* of, const int K, const int k) {
  const std::int32_t d = of[k];
  TokenRole r;
  r.primary = k;
  for (int q = 0; q < K; ++q) {
    const bool match = of[q] == d;
    r.before += match && q < k;
    r.same += match;
    r.primary = match && q < r.primary ? q : r.primary;
  }
  return r;
}

// The int32 team scratch of the kernel that writes the outputs
// (destinations_and_outputs_device): each lane's rank, raw slot and role
// (token_role packed), a primary's row and duplicate start within the
// team, then per destination the team's two counts and the two bases it
// reserved.
inline std::int64_t c2_outputs_scratch_ints(int R) { return 5 * std::int64_t(kC2Threads) + 4 * std::int64_t(R); }

// The device form's C2 when it writes the outputs itself
// (phase_c2_outputs.hpp). First the team's share of the small tables
// (loads and stores nothing later waits on, in flight under the searches).
// Then the same two vector loops per token (entry k on the same lane in
// each), storing dst and src_info, each lane keeping its role in scratch,
// and each primary taking its row and duplicate range in the team's
// scratch counters of its destination; then one reservation per
// destination for the team (a thread each), and a third vector loop that
// stores each primary's row and each duplicate's loff at its place in the
// reserved ranges, read from scratch after the barriers.
template <class Exec>
void destinations_and_outputs_device(const Launcher<Exec>& launch, const ChunkLayout& CL,
                                     const InputScratch<Exec>& in, const LocalRanks<Exec>& lr,
                                     typename Types<Exec>::ivec dst_all, const C2Outputs<Exec>& outputs) {
  using T = Types<Exec>;
  using member = typename T::member;
  const int K = CL.K, S = CL.S, R = CL.R;
  const std::int64_t N = CL.N, NvS = CL.NvS;
  const EntryDestination<Exec> destination(CL, in, lr);
  const C2Outputs<Exec> out = outputs;
  const auto rank = lr.rank;
  const LocalRanks<Exec> ranks = lr;
  const IndexSplit split(S);
  const int V = c2_vector_width(K);
  const std::int64_t scratch_n = c2_outputs_scratch_ints(R);
  const std::int64_t per_team = kC2Threads / V;
  const std::int64_t all_tokens = static_cast<std::int64_t>(lr.count) * S;
  const int league = static_cast<int>((all_tokens + per_team - 1) / per_team);
  const std::int64_t items = outputs.table_items(lr.count), share = (items + league - 1) / league;
  int level = 0;
  const auto policy = with_scratch<typename T::scratch_i32>(sized_team_policy(launch.exec(), league, kC2Threads, V),
                                                            scratch_n, &level);
  launch.parallel_for(
      "moonep::portable::phaseC2_destinations_dedup", policy, KOKKOS_LAMBDA(const member& team) {
        // The status for the host, bad input or not (every earlier kernel
        // is a dependency of this one, the step graph's last).
        if (team.league_rank() == 0) Kokkos::single(Kokkos::PerTeam(team), [&]() { out.store_status(); });
        if (ranks.stopped()) return;  // bad input: nothing is touched (the whole team, before any barrier)
        const std::int64_t i0 = team.league_rank() * share < items ? team.league_rank() * share : items;
        const std::int64_t i1 = i0 + share < items ? i0 + share : items;
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, i0, i1), [&](const std::int64_t i) { out.copy_table(i); });
        std::int32_t* const rank_of = typename T::scratch_i32(team.team_scratch(level), scratch_n).data();
        std::int32_t* const raw = rank_of + kC2Threads;
        // token_role packed as primary | before << 8 | same << 16 (each at most kMaxTopk = 32: one byte)
        std::int32_t* const role_of = raw + kC2Threads;
        std::int32_t* const row_in_team = role_of + kC2Threads;      // a primary's row in the team
        std::int32_t* const dup_in_team = row_in_team + kC2Threads;  // a primary's first duplicate in it
        std::int32_t* const count = dup_in_team + kC2Threads;        // [R] rows, then [R] duplicates
        std::int32_t* const base = count + 2 * R;                    // [R] first row, then [R] first duplicate
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, 2 * R), [&](const int i) { count[i] = 0; });
        team.team_barrier();
        // Token t of the team: its rank and index, or -1 (none this step).
        const auto token = [&](const std::int64_t t, std::int64_t& l) -> std::int64_t {
          const std::int64_t ls = team.league_rank() * per_team + t;
          if (ls >= all_tokens) return -1;
          l = split.quotient(ls);
          const std::int64_t s = ls - l * S;
          return s < ranks.tokens(l) ? s : -1;  // (a ragged rank's absent token)
        };
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, per_team), [&](const std::int64_t t) {
          std::int64_t l = 0;
          const std::int64_t s = token(t, l);
          if (s < 0) return;
          std::int32_t* of = rank_of + t * V;
          std::int32_t* at = raw + t * V;
          const std::int64_t first = s * K;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, K),
                               [&](const int k) { destination(l, first + k, of[k], at[k]); });
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, K), [&](const int k) {
            const std::int64_t i = first + k;
            const std::int32_t d = of[k], mine = at[k];
            const TokenRole role = token_role(of, K, k);
            role_of[t * V + k] = role.primary | role.before << 8 | role.same << 16;
            dst_all(l * N + i) = role.primary < k ? -mine - 1 : mine;
            out.store_src(d, mine - d * NvS, static_cast<std::int32_t>(static_cast<std::int64_t>(rank(l)) * NvS + i));
            if (role.primary == k && role.same > 1) {
              row_in_team[t * V + k] = Kokkos::atomic_fetch_add(&count[d], 1);
              dup_in_team[t * V + k] = Kokkos::atomic_fetch_add(&count[R + d], role.same - 1);
            }
          });
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamVectorRange(team, R), [&](const int d) {
          if (count[d] > 0) out.reserve(d, count[d], count[R + d], base[d], base[R + d]);
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, per_team), [&](const std::int64_t t) {
          std::int64_t l = 0;
          if (token(t, l) < 0) return;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, K), [&](const int k) {
            const std::int32_t packed = role_of[t * V + k];
            const int primary = packed & 0xff, before = packed >> 8 & 0xff, same = packed >> 16;
            if (primary == k && same == 1) return;  // its rank's only entry: no row
            const std::int32_t d = rank_of[t * V + k], loff = static_cast<std::int32_t>(raw[t * V + k] - d * NvS);
            if (primary == k) {
              out.store_row(d, base[d] + row_in_team[t * V + k], loff, base[R + d] + dup_in_team[t * V + k], same - 1);
            } else {
              out.store_dup(d, base[R + d] + dup_in_team[t * V + primary] + before - 1, loff);
            }
          });
        });
      });
}

template <class Exec, class Staging>
void destinations_and_dedup_device(const Launcher<Exec>& launch, const ChunkLayout& CL, const InputScratch<Exec>& in,
                                   const Staging& staging, bool quads, const LocalRanks<Exec>& lr,
                                   typename Types<Exec>::ivec dst_all) {
  using T = Types<Exec>;
  using member = typename T::member;
  const int K = CL.K, S = CL.S;
  const std::int64_t N = CL.N, NvS = CL.NvS, slots_at = CL.slots, w = CL.slot_ints;
  const auto pos = in.pos;
  const EntryDestination<Exec> destination(CL, in, lr);
  const auto direct = lr.direct_chunk;
  const auto rank = lr.rank;
  const LocalRanks<Exec> ranks = lr;
  const IndexSplit split(S);
  const int V = c2_vector_width(K);
  const std::int64_t scratch_n = kC2Scratch, raw_at = kC2Threads;
  // Tokens per team: one per team thread on a device space (V lanes each).
  const std::int64_t per_team = kC2Threads / V;
  const std::int64_t all_tokens = static_cast<std::int64_t>(lr.count) * S;
  const int league = static_cast<int>((all_tokens + per_team - 1) / per_team);
  int level = 0;
  const auto policy = with_scratch<typename T::scratch_i32>(sized_team_policy(launch.exec(), league, kC2Threads, V),
                                                            kC2Scratch, &level);
  launch.parallel_for(
      "moonep::portable::phaseC2_destinations_dedup", policy, KOKKOS_LAMBDA(const member& team) {
        if (ranks.stopped()) return;  // bad input: nothing is touched (the whole team)
        typename T::scratch_i32 scratch(team.team_scratch(level), scratch_n);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, per_team), [&](const std::int64_t t) {
          const std::int64_t ls = team.league_rank() * per_team + t;
          if (ls >= all_tokens) return;
          const std::int64_t l = split.quotient(ls), s = ls - l * S;
          if (s >= ranks.tokens(l)) return;  // a ragged rank's absent token
          std::int32_t* rank_of = scratch.data() + t * V;
          std::int32_t* raw = rank_of + raw_at;
          const std::int64_t first = s * K;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, K),
                               [&](const int k) { destination(l, first + k, rank_of[k], raw[k]); });
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, K), [&](const int k) {
            const std::int64_t i = first + k;
            const std::int32_t d = rank_of[k];
            const TokenRole role = token_role(rank_of, K, k);
            const int before = role.before, same = role.same, primary = role.primary;
            // Loads first: a store through an int32 pointer would order them after it.
            const std::int32_t mine = raw[k], primary_raw = raw[primary];
            const std::int32_t src = static_cast<std::int32_t>(static_cast<std::int64_t>(rank(l)) * NvS + i);
            std::int32_t* to = direct(d).at;
            to = to ? to + slots_at + w * (mine - d * NvS) : staging.data() + w * (l * N + pos(l * N + i));
            std::int32_t link = -1, index = 0;
            if (primary < k) {
              dst_all(l * N + i) = -mine - 1;
              link = static_cast<std::int32_t>(primary_raw - d * NvS);
              index = before - 1;
            } else {
              dst_all(l * N + i) = mine;
              if (same > 1) link = -1 - same;
            }
            if (quads) {
              *reinterpret_cast<SlotQuad*>(to) = SlotQuad{{src, link, index, -1}};
            } else {
              to[0] = src;
              to[1] = link;
              to[2] = index;
            }
          });
        });
      });
}

}  // namespace moonep::impl::portable
