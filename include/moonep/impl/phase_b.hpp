// moonep/impl/phase_b.hpp — Phase B, run by rank 0: PLANNING.md steps 1-5
// for all ranks, as Kokkos policies, and the tables every rank needs.
//
// Input: every rank's tokens-per-expert in rank 0's chunk (Phase A).
// Output (rank 0's chunk, shared region): expert_ptr, experts_to_copy and
// the (expert, destination) pairs with their acum and dst base; and, in
// rank 0's private `own_stage[d]`, the per-rank tables of every rank d,
// which broadcast() then sends out.
//
// Steps 2-4 are sequences of arg-max/arg-min picks; each pick is a team
// reduction with our own reducers (moonep/impl/reducers.hpp) because the
// tie-breaks are part of the spec.
#pragma once

#include <cstdint>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/impl/reducers.hpp"
#include "moonep/world.hpp"

namespace moonep::impl::portable {

template <class Exec>
struct RootScratch {
  using T = Types<Exec>;
  typename T::ivec total;      // [E] step 1
  Kokkos::View<std::int64_t*, typename T::mem> load;  // [R]
  typename T::ivec donor_of;   // [R] step 2: the one rank a receiver takes from, or -1
  typename T::ivec inflow;     // [R] step 2: how much it takes
  typename T::imat alloc;      // [E][R] step 3, expert major (acum runs along a row)
  typename T::imat expert_offset;  // [R][E] step 5
  typename T::imat own_stage;  // [R][own_len] per-rank tables before the broadcast
  Kokkos::View<PutRun*, typename T::mem> runs;  // [2R]

  RootScratch() = default;
  explicit RootScratch(const ChunkLayout& L) {
    const std::string p = "moonep::portable::root.";
    total = typename T::ivec(p + "total", L.E);
    load = Kokkos::View<std::int64_t*, typename T::mem>(p + "load", L.R);
    donor_of = typename T::ivec(p + "donor_of", L.R);
    inflow = typename T::ivec(p + "inflow", L.R);
    alloc = typename T::imat(p + "alloc", L.E, L.R);
    expert_offset = typename T::imat(p + "expert_offset", L.R, L.E);
    own_stage = typename T::imat(p + "own_stage", L.R, L.own_len);
    runs = Kokkos::View<PutRun*, typename T::mem>(p + "runs", 2 * L.R);
  }
};

// Team scratch for `n` int64 values; picks level 0 while small.
template <class Exec>
typename Types<Exec>::team_policy with_i64_scratch(typename Types<Exec>::team_policy policy,
                                                   std::int64_t n, int* level) {
  const std::size_t bytes = Types<Exec>::scratch_i64::shmem_size(static_cast<std::size_t>(n));
  *level = compat::scratch_level_for(bytes);
  return policy.set_scratch_size(*level, Kokkos::PerTeam(bytes));
}

// Steps 1-5. `chunk0` is rank 0's chunk. Returns the number of
// (expert, destination) pairs, i.e. the used part of the pairs table.
template <class Exec>
std::int64_t plan_root(const Exec& exec, const ChunkLayout& L, const RootScratch<Exec>& rs,
                       typename Types<Exec>::ivec chunk0) {
  using T = Types<Exec>;
  using member = typename T::member;
  const int R = L.R, E = L.E, B = L.B, epn = L.epn;
  const std::int64_t CAP = L.N, NvS = L.NvS, tp = L.tp;
  const std::int64_t tpe_in = L.tpe_in, ow_cum = L.ow_cum, ow_cu = L.ow_cu, ow_zfr = L.ow_zfr,
                     ow_rs = L.ow_rs;
  const std::int64_t sh = L.shared, sh_ptr = L.shared + L.sh_ptr, sh_etc = L.shared + L.sh_etc,
                     sh_pairs = L.shared + L.sh_pairs;
  (void)sh;
  const auto total = rs.total;
  const auto load = rs.load;
  const auto donor_of = rs.donor_of;
  const auto inflow = rs.inflow;
  const auto alloc = rs.alloc;
  const auto expert_offset = rs.expert_offset;
  const auto own = rs.own_stage;

  // Step 1: cum (stored as each rank's exclusive prefix), totals, loads;
  // alloc starts as "everything on the owner". One team per owner rank.
  Kokkos::parallel_for(
      "moonep::portable::phaseB_totals", typename T::team_policy(exec, R, Kokkos::AUTO),
      KOKKOS_LAMBDA(const member& team) {
        const int g = team.league_rank();
        std::int64_t owner_load = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, epn),
            [&](const int j, std::int64_t& acc) {
              const int e = g * epn + j;
              std::int32_t run = 0;
              for (int r = 0; r < R; ++r) {
                own(r, ow_cum + e) = run;
                run += chunk0(tpe_in + static_cast<std::int64_t>(r) * E + e);
              }
              total(e) = run;
              for (int d = 0; d < R; ++d) alloc(e, d) = d == g ? run : 0;
              acc += run;
            },
            owner_load);
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          load(g) = owner_load;
          own(g, ow_rs + 1) = 0;  // copies made of g's experts, counted in step 4
        });
      });

  // Step 2: rank-level moves, one team walking the balances.
  {
    int level = 0;
    auto policy = with_i64_scratch<Exec>(typename T::team_policy(exec, 1, Kokkos::AUTO), R, &level);
    Kokkos::parallel_for(
        "moonep::portable::phaseB_rank_moves", policy, KOKKOS_LAMBDA(const member& team) {
          typename T::scratch_i64 balance(team.team_scratch(level), R);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R), [&](const int r) {
            balance(r) = load(r) - CAP;
            donor_of(r) = -1;
            inflow(r) = 0;
          });
          team.team_barrier();
          for (;;) {
            ValueIndex hi, lo;
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, R),
                [&](const int r, ValueIndex& v) { MaxLowest<typename T::mem>::consider(v, balance(r), r); },
                MaxLowest<typename T::mem>(hi));
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, R),
                [&](const int r, ValueIndex& v) { MinLowest<typename T::mem>::consider(v, balance(r), r); },
                MinLowest<typename T::mem>(lo));
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
    auto policy = with_i64_scratch<Exec>(typename T::team_policy(exec, R, Kokkos::AUTO),
                                         static_cast<std::int64_t>(R) + epn, &level);
    Kokkos::parallel_for(
        "moonep::portable::phaseB_expert_split", policy, KOKKOS_LAMBDA(const member& team) {
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
                [&](const int r, ValueIndex& v) { MaxLowest<typename T::mem>::consider(v, quota(r), r); },
                MaxLowest<typename T::mem>(q));
            if (q.value <= 0) break;
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, epn),
                [&](const int j, ValueIndex& v) { MaxLowest<typename T::mem>::consider(v, remaining(j), j); },
                MaxLowest<typename T::mem>(m));
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

  // Step 4: copy selection, one team per destination d. Only experts of
  // d's single donor can have remote entries on d, so the candidates are
  // that donor's epn experts (local index j <-> expert donor*epn + j keeps
  // "ties to the largest expert id").
  {
    int level = 0;
    auto policy = with_i64_scratch<Exec>(typename T::team_policy(exec, R, Kokkos::AUTO), epn, &level);
    Kokkos::parallel_for(
        "moonep::portable::phaseB_copy_selection", policy, KOKKOS_LAMBDA(const member& team) {
          const int d = team.league_rank();
          const int donor = donor_of(d);
          typename T::scratch_i64 remote(team.team_scratch(level), epn);
          int filled = 0;
          if (donor >= 0) {
            std::int32_t with_tokens = 0;
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, epn),
                [&](const int j, std::int32_t& acc) {
                  remote(j) = alloc(donor * epn + j, d);
                  if (remote(j) > 0) ++acc;
                },
                with_tokens);
            Kokkos::single(Kokkos::PerTeam(team), [&]() { own(d, ow_rs) = with_tokens; });
            team.team_barrier();
            for (; filled < B; ++filled) {
              ValueIndex best;
              Kokkos::parallel_reduce(
                  Kokkos::TeamThreadRange(team, epn),
                  [&](const int j, ValueIndex& v) { MaxHighest<typename T::mem>::consider(v, remote(j), j); },
                  MaxHighest<typename T::mem>(best));
              if (best.value <= 0) break;
              team.team_barrier();
              Kokkos::single(Kokkos::PerTeam(team), [&]() {
                chunk0(sh_etc + static_cast<std::int64_t>(d) * B + filled) = donor * epn + best.index;
                remote(best.index) = 0;
                Kokkos::atomic_add(&own(donor, ow_rs + 1), 1);
              });
              team.team_barrier();
            }
          } else {
            Kokkos::single(Kokkos::PerTeam(team), [&]() { own(d, ow_rs) = 0; });
          }
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, filled, B), [&](const int b) {
            chunk0(sh_etc + static_cast<std::int64_t>(d) * B + b) = -1;
          });
        });
  }

  // Step 5: layout of every rank's receive buffer, a team scan over the
  // E + B groups of destination d.
  {
    int level = 0;
    auto policy = with_i64_scratch<Exec>(typename T::team_policy(exec, R, Kokkos::AUTO), epn, &level);
    Kokkos::parallel_for(
        "moonep::portable::phaseB_layout", policy, KOKKOS_LAMBDA(const member& team) {
          const int d = team.league_rank();
          const int donor = donor_of(d);
          typename T::scratch_i64 picked(team.team_scratch(level), epn);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, epn), [&](const int j) { picked(j) = 0; });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, B), [&](const int b) {
            const std::int32_t e = chunk0(sh_etc + static_cast<std::int64_t>(d) * B + b);
            if (e >= 0) picked(e - donor * epn) = 1;  // picked experts are the donor's
          });
          team.team_barrier();
          Kokkos::parallel_scan(
              Kokkos::TeamThreadRange(team, E + B), [&](const int g, std::int64_t& start, const bool final) {
                std::int32_t expert = -1;
                if (g < E) {
                  const bool is_picked = donor >= 0 && g / epn == donor && picked(g - donor * epn) != 0;
                  expert = is_picked ? -1 : g;
                } else {
                  expert = chunk0(sh_etc + static_cast<std::int64_t>(d) * B + (g - E));
                }
                const std::int64_t count = expert >= 0 ? alloc(expert, d) : 0;
                const std::int64_t padded = padded_size(count, tp);
                if (final) {
                  own(d, ow_cu + g) = static_cast<std::int32_t>(start + padded);
                  const bool pad = count > 0 && padded > count;
                  own(d, ow_zfr + 2 * g) = pad ? static_cast<std::int32_t>(start + count) : 0;
                  own(d, ow_zfr + 2 * g + 1) = pad ? static_cast<std::int32_t>(padded - count) : 0;
                  if (expert >= 0) expert_offset(d, expert) = static_cast<std::int32_t>(start);
                }
                start += padded;
              });
        });
  }

  // The (expert, destination) pairs: count, scan into expert_ptr, fill.
  std::int32_t npairs = 0;
  Kokkos::parallel_scan(
      "moonep::portable::phaseB_pairs_count", typename T::range(exec, 0, E),
      KOKKOS_LAMBDA(const int e, std::int32_t& run, const bool final) {
        std::int32_t c = 0;
        for (int d = 0; d < R; ++d) c += alloc(e, d) > 0 ? 1 : 0;
        if (final) {
          chunk0(sh_ptr + e) = run;
          if (e == E - 1) chunk0(sh_ptr + E) = run + c;
        }
        run += c;
      },
      npairs);
  Kokkos::parallel_for(
      "moonep::portable::phaseB_pairs_fill", typename T::range(exec, 0, E), KOKKOS_LAMBDA(const int e) {
        std::int64_t p = chunk0(sh_ptr + e);
        std::int64_t acum = 0;
        for (int d = 0; d < R; ++d) {
          const std::int32_t a = alloc(e, d);
          if (a <= 0) continue;
          const std::int64_t before = acum;
          acum += a;
          chunk0(sh_pairs + 3 * p) = d;
          chunk0(sh_pairs + 3 * p + 1) = static_cast<std::int32_t>(acum);
          chunk0(sh_pairs + 3 * p + 2) = static_cast<std::int32_t>(d * NvS + expert_offset(d, e) - before);
          ++p;
        }
      });
  return npairs;
}

// Sends each rank its own tables and, unless the world is directly
// addressable (ranks then read rank 0's shared tables in place), the shared
// tables. Completes at the caller's next world.barrier().
template <class Exec>
void broadcast(const Exec& exec, const ChunkLayout& L, const RootScratch<Exec>& rs,
               World<typename Types<Exec>::mem>& world, std::int64_t npairs) {
  using T = Types<Exec>;
  const auto runs = rs.runs;
  const int R = L.R;
  const std::int64_t own_len = L.own_len, own_at = L.own, shared_at = L.shared;
  const std::int64_t shared_used = L.sh_pairs + 3 * npairs;
  Kokkos::parallel_for(
      "moonep::portable::phaseB_broadcast_runs", typename T::range(exec, 0, R), KOKKOS_LAMBDA(const int d) {
        runs(d) = PutRun{d, 0, own_at, d * own_len, own_len};
        runs(R + d) = PutRun{d, 0, shared_at, shared_at, shared_used};
      });
  const typename World<typename T::mem>::source_view own_src(rs.own_stage.data(), rs.own_stage.size());
  world.put_runs(0, own_src, Kokkos::subview(runs, Kokkos::make_pair(0, R)));
  if (!world.directly_addressable() && R > 1) {
    // Rank 0 already holds the shared tables: send to ranks 1..R-1.
    world.put_runs(0, world.local_chunk(0), Kokkos::subview(runs, Kokkos::make_pair(R + 1, 2 * R)));
  }
}

}  // namespace moonep::impl::portable
