// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_a_local.hpp — the rank-local work that needs nothing from
// other ranks, for every local rank at once: the per-block expert histogram
// (which is both each rank's tokens-per-expert and the validation of its
// routing), Phase A's clearing of the receive slots, and Phase C1, the
// stable counting sort of each rank's entries by expert.
//
// Entries of rank l are cut into `nblocks` contiguous blocks of `block_len`.
// A ragged rank (docs/spec/planning.md "Ragged steps") keeps the blocks of
// S*K entries; the kernels stop at its N_l = s_l*K (LocalRanks::entries).
// Each entry's sorted position is where its block's e-entries start plus
// the number of earlier equal experts in its block, so equal experts keep
// their flat order (stable). How, by form (HostForm or DeviceForm,
// portable_types.hpp):
//  * host: a few long blocks per thread, each walked serially by one
//    thread that counts as it goes (no team, no scratch). hist[l][e][b]
//    counts expert e in block b of rank l (block index fastest); base
//    [l][e][b] is the position of block b's first e-entry in the
//    concatenation of every rank's sorted entries (rank l's part starts at
//    l*N), one walk per rank over its E*nblocks counters (validate_host:
//    two kernels); clear_slots and stable_counting_sort are two more.
//  * device: short blocks, one team each, and parallel_for kernels only
//    (no scan, no reduction into a value: each can be a node of the step
//    graph, portable_types.hpp). hist[l][b][e] (expert fastest: the teams
//    write and read it coalesced) is counted in team scratch with atomics
//    (validate_histogram, one team per block); validate_block_offsets, a
//    few teams per rank (each a group of experts, a thread per expert and
//    segment of blocks), turns the rank's blocks into base[l][b][e] (its
//    e-entries in the blocks before b) and counts, and the rank's last team
//    to finish its estart (a team scan over E) and the rank's problems (in
//    the step graph, from the histogram's tallies, every team its share:
//    no team waits for another);
//    phaseAC1_clear_and_scatter, one team per block, clears its share of
//    the rank's receive slots (Phase A) and ranks each entry among the
//    earlier entries of its block, held in team scratch (C1; four of them
//    per scratch load): estart + base + that rank.
// Both give the same positions; the style changes the blocks and kernels.
//
// What must stay true: the histogram never writes out of bounds for a bad
// expert id (it only counts it), and touches nothing but this planner's
// private scratch (validation runs before any shared state is touched).
#pragma once

#include <cstdint>
#include <string>

#include "moonep/impl/alignment.hpp"
#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_c2_outputs.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/world.hpp"

namespace moonep::impl::portable {

// How validate_block_offsets (device form) cuts a rank's E x nblocks
// counters: `groups` teams per rank of `experts` experts each (about eight
// teams per rank, 8 to 32 experts: whole 32-byte sectors of a hist row),
// and each expert's blocks into `segments` runs of `seg` blocks (at least
// kMinSeg, at most kMaxSegments runs: the team scratch, experts *
// segments int32, stays within 4 KiB). At the headline (E = 256, 128
// blocks) 8 teams of 32 experts x 8 segments of 16 blocks per rank.
struct BlockOffsetsShape {
  static constexpr int kMinSeg = 16, kMaxSegments = 32;
  int experts = 1, groups = 1, seg = 1, segments = 1;
  static BlockOffsetsShape of(int E, int nb) {
    BlockOffsetsShape g;
    int eg = ((E + 7) / 8 + 7) / 8 * 8;
    eg = eg < 8 ? 8 : eg > 32 ? 32 : eg;
    g.experts = eg < E ? eg : E;
    g.groups = (E + g.experts - 1) / g.experts;
    g.seg = (nb + kMaxSegments - 1) / kMaxSegments;
    if (g.seg < kMinSeg) g.seg = kMinSeg;
    g.segments = (nb + g.seg - 1) / g.seg;
    if (g.segments < 1) g.segments = 1;
    return g;
  }
  std::int64_t items() const { return static_cast<std::int64_t>(experts) * segments; }
};

template <class Exec>
struct InputScratch {
  using T = Types<Exec>;
  int L = 0, E = 1;
  std::int64_t N = 1;
  bool host_style = true;      // how blocks are walked (see above)
  int nblocks = 1;             // blocks per rank
  std::int64_t block_len = 1;  // entries per block (the last may be shorter)
  typename T::ivec hist;       // per-block counts: host [L][E][nblocks], device [L][nblocks][E]
  typename T::ivec base;       // host: [L*E*nblocks + 1] exclusive prefix of hist (the host scatter
                               // advances it); device: [L][nblocks][E] e-entries in the blocks before
  typename T::ivec counts;     // [L][E] tokens per expert of each rank
  typename T::ivec estart;     // [L][E] first sorted position of each expert in its rank
  typename T::ivec pos;        // [L][N] sorted position of each entry in its rank
  Kokkos::View<std::int64_t, typename T::mem> bad;  // host: ids outside [0, E) the histogram saw
  typename T::ivec block_bad;  // device: [L][nblocks] ids outside [0, E) in each block
  typename T::ivec done;       // device: [L] teams of validate_block_offsets done this step (0 between steps)
  typename T::ivec tallies;    // device: [L][E] tokens per expert summed by validate_histogram's teams
                               // (when passed; zero between steps, see there)
  // The step's status on the device, read back by the host in one copy:
  // [0] the validation result, problems found (bad ids, mismatching counts,
  // bad token counts; LocalRanks::stop points here), [1] the pairs Phase B
  // found (RootScratch::npairs, on rank 0's process).
  typename T::lvec status;
  Kokkos::View<std::int64_t, typename T::mem, Kokkos::MemoryUnmanaged> problems;  // status[0]

  InputScratch() = default;
  InputScratch(const Exec& exec, int L_, int E_, std::int64_t N_, bool host_style_)
      : L(L_), E(E_), N(N_), host_style(host_style_) {
    const std::string p = "moonep::portable::input.";
    block_len = choose_block_len(exec, host_style, L, E, N);
    nblocks = static_cast<int>((N + block_len - 1) / block_len);
    const std::size_t nh = static_cast<std::size_t>(L) * E * nblocks;
    hist = compat::uninitialized_view<typename T::ivec>(p + "hist", nh);
    base = compat::uninitialized_view<typename T::ivec>(p + "base", nh + 1);
    counts = typename T::ivec(p + "counts", static_cast<std::size_t>(L) * E);
    estart = typename T::ivec(p + "estart", static_cast<std::size_t>(L) * E);
    pos = compat::uninitialized_view<typename T::ivec>(p + "pos", static_cast<std::size_t>(L * N));
    bad = Kokkos::View<std::int64_t, typename T::mem>(p + "bad");
    if (!host_style) {
      block_bad = typename T::ivec(p + "block_bad", static_cast<std::size_t>(L) * nblocks);
      done = typename T::ivec(p + "done", static_cast<std::size_t>(L));  // zeroed once, reset by the kernel
      tallies = typename T::ivec(p + "tallies", static_cast<std::size_t>(L) * E);  // zeroed once, then by Phase B
    }
    status = typename T::lvec(p + "status", 2);
    problems = Kokkos::View<std::int64_t, typename T::mem, Kokkos::MemoryUnmanaged>(status.data());
  }

  // Host: about four blocks per thread over all local ranks (balance across
  // ranks and threads), none shorter than 2048 entries (each block costs
  // its E counters); one block per rank on a single thread. Device: blocks
  // a team ranks quickly in scratch, at least E long (the histogram then
  // stays no larger than the entries).
  static std::int64_t choose_block_len(const Exec& exec, bool host_style, int L, int E, std::int64_t N) {
    std::int64_t len = N;
    if (host_style) {
      const std::int64_t threads = exec.concurrency();
      if (threads > 1) {
        const std::int64_t per_rank = (4 * threads + L - 1) / L;
        len = (N + per_rank - 1) / per_rank;
        if (len < 2048) len = 2048;
      }
    } else {
      len = E < 256 ? 256 : E > 1024 ? 1024 : E;
    }
    return len < N ? len : N;
  }
};

// Validation and tokens per expert of every local rank, host form:
// per-block histograms (bad ids only counted), then one walk per rank over
// its blocks: the counts, the sorted starts and the comparison with the
// given tokens_per_expert. Leaves the number of problems over all local
// ranks (bad ids, mismatching counts, bad token counts) in s.problems, on
// the device: nothing is read back here (the planner reads it once, or
// leaves it to the later kernels).
template <class Exec>
void validate_host(const Exec& exec, const InputScratch<Exec>& s, const LocalRanks<Exec>& lr, bool has_tpe) {
  using T = Types<Exec>;
  const int E = s.E, nb = s.nblocks;
  const std::int64_t N = s.N, len = s.block_len;
  const auto hist = s.hist;
  const auto routing = lr.routing;
  const LocalRanks<Exec> ranks = lr;  // entries(l): N_l of a ragged step
  Kokkos::parallel_reduce(
      "moonep::portable::validate_histogram", typename T::range(exec, 0, static_cast<std::int64_t>(s.L) * nb),
      KOKKOS_LAMBDA(const std::int64_t lb, std::int64_t& nbad) {
        const std::int64_t l = lb / nb, b = lb % nb;
        const std::int32_t* ids = routing(l).at;
        std::int32_t* h = hist.data() + l * E * nb + b;  // h[e * nb] counts expert e
        for (int e = 0; e < E; ++e) h[e * nb] = 0;
        const std::int64_t n = ranks.entries(l);
        const std::int64_t end = (b + 1) * len < n ? (b + 1) * len : n;
        for (std::int64_t i = b * len; i < end; ++i) {
          const std::int32_t e = ids[i];
          if (e < 0 || e >= E) {
            ++nbad;
          } else {
            ++h[e * nb];
          }
        }
      },
      s.bad);
  const auto base = s.base;
  const auto counts = s.counts;
  const auto estart = s.estart;
  const auto tpe = lr.tpe;
  const auto bad = s.bad;
  const auto problems = s.problems;
  // One walk per rank over its few blocks per expert: no scan (whose
  // passes synchronise every thread) for E*nblocks counters.
  Kokkos::parallel_reduce(
      "moonep::portable::validate_counts", typename T::range(exec, 0, s.L),
      KOKKOS_LAMBDA(const std::int64_t l, std::int64_t& acc) {
        const std::int32_t rank_start = static_cast<std::int32_t>(l * N);
        std::int32_t run = rank_start;
        for (int e = 0; e < E; ++e) {
          const std::int64_t le = l * E + e;
          const std::int32_t first = run;
          for (int b = 0; b < nb; ++b) {
            base(le * nb + b) = run;
            run += hist(le * nb + b);
          }
          counts(le) = run - first;
          estart(le) = first - rank_start;
          if (has_tpe && tpe(l).at[e] != run - first) ++acc;
        }
        if (ranks.bad_tokens(l)) ++acc;
        if (l == 0) acc += bad();
      },
      problems);
}

// validate_device's first kernel, one team per block. With `tallies`
// ([L][E], zero on entry; only an in-process step graph passes them) each
// team also adds its block's counts into its rank's row with atomics, so
// that the row holds the rank's tokens per expert when the kernel ends:
// Phase B then needs nothing of the second kernel and runs beside it
// (PortablePlanner::build_step_graph; Phase B's second kernel zeroes them
// again). Integer sums: the same whatever the order of the teams.
template <class Exec>
void validate_histogram(const Launcher<Exec>& launch, const InputScratch<Exec>& s, const LocalRanks<Exec>& lr,
                        std::int32_t* tallies) {
  using T = Types<Exec>;
  using member = typename T::member;
  const int E = s.E, nb = s.nblocks;
  const std::int64_t len = s.block_len;
  const auto hist = s.hist;
  const auto block_bad = s.block_bad;
  const auto problems = s.problems;
  const auto routing = lr.routing;
  const LocalRanks<Exec> ranks = lr;  // entries(l): N_l of a ragged step
  int level = 0;
  // Scratch: the block's E counters, then its count of bad ids (h(E)):
  // a scratch atomic where a bad id occurs (none on valid input), which
  // the barrier before the stores orders, instead of a team reduction
  // (its barriers and broadcast on every step's longest path).
  const auto policy = with_scratch<typename T::scratch_i32>(
      typename T::team_policy(launch.exec(), s.L * nb, Kokkos::AUTO), E + 1, &level);
  launch.parallel_for(
      "moonep::portable::validate_histogram", policy, KOKKOS_LAMBDA(const member& team) {
        const std::int64_t lb = team.league_rank(), l = lb / nb, b = lb % nb;
        const std::int32_t* ids = routing(l).at;
        typename T::scratch_i32 h(team.team_scratch(level), E + 1);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, E + 1), [&](const int e) { h(e) = 0; });
        team.team_barrier();
        const std::int64_t n = ranks.entries(l), begin = b * len;
        const std::int64_t stop = (b + 1) * len < n ? (b + 1) * len : n, end = stop > begin ? stop : begin;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, begin, end), [&](const std::int64_t i) {
          const std::int32_t e = ids[i];
          Kokkos::atomic_add(&h(e < 0 || e >= E ? E : e), 1);
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, E), [&](const int e) {
          const std::int32_t c = h(e);
          hist(lb * E + e) = c;
          if (tallies && c != 0) Kokkos::atomic_add(tallies + l * E + e, c);
        });
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          block_bad(lb) = h(E);
          if (lb == 0) problems() = 0;  // the next kernel's teams add to it
        });
      });
}

// validate_device's second kernel (see below).
template <class Exec>
void validate_block_offsets(const Launcher<Exec>& launch, const InputScratch<Exec>& s, const LocalRanks<Exec>& lr,
                            const std::int32_t* tallies = nullptr) {
  using T = Types<Exec>;
  using member = typename T::member;
  const int E = s.E, nb = s.nblocks;
  const auto hist = s.hist;
  const auto block_bad = s.block_bad;
  const auto problems = s.problems;
  const LocalRanks<Exec> ranks = lr;
  const auto base = s.base;
  const auto counts = s.counts;
  const auto estart = s.estart;
  const auto tpe = lr.tpe;
  const auto done = s.done;
  // validate_block_offsets: G teams per rank, each a group of EG experts,
  // a thread per (expert, segment of `seg` blocks) item (expert fastest:
  // a warp's loads of hist[l][b][e0..] are coalesced). One team per rank
  // left most of a GPU's multiprocessors idle and made each thread walk all
  // nb blocks, a long chain of dependent loads. Pass 1:
  // each item sums its segment into team scratch; pass 2: it adds the sums
  // of its expert's earlier segments and stores its bases (kPrefetch
  // counts loaded before their bases are stored: the compiler cannot move
  // a load of hist past a store to base, both int32 views, so one at a
  // time each block cost a load's latency), and the last segment stores
  // counts[l][e].
  // What needs the whole rank (estart, a scan of counts over E, and the
  // rank's problems) is done by the rank's team that finishes last
  // (last_team_to_arrive on done[l], portable_types.hpp), which reads the
  // other teams' counts through volatile loads. What must stay true:
  // done[l] is back at 0 after every step, whatever the input (every team
  // always counts itself, bad input included; the next step's kernel runs
  // after this one ends); the scan and the problem count are those of a
  // single team per rank (same order, same value).
  // With `tallies` (the step graph's: each rank's counts, complete when
  // validate_histogram has ended) no team waits for the others: each scans
  // the tallies over E first and stores the starts of its own experts, and
  // adds its share of the rank's problems (its experts' mismatches, its
  // share of the blocks' bad ids, the rank's token count on group 0) with
  // an atomic where there is one. The last team's chain (arrival, scan,
  // two reductions) was a third of the kernel on the step's longest path.
  const BlockOffsetsShape shape = BlockOffsetsShape::of(E, nb);
  const int EG = shape.experts, G = shape.groups;
  const std::int64_t seg = shape.seg, NS = shape.segments, items = shape.items();
  using scratch = typename T::scratch_i32;
  const int level = compat::scratch_level_for(scratch::shmem_size(static_cast<std::size_t>(items)));
  const auto offsets = KOKKOS_LAMBDA(const member& team) {
    constexpr std::int64_t kPrefetch = 16;
    const std::int64_t l = team.league_rank() / G, h0 = l * nb * E;
    const int g = team.league_rank() % G, e0 = g * EG;
    const std::int32_t* tal = tallies ? tallies + l * E : nullptr;
    if (tal) {
      Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, E), [&](const int e, std::int32_t& run, const bool final) {
        const std::int32_t c = tal[e];
        if (final && e >= e0 && e < e0 + EG) estart(l * E + e) = run;
        run += c;
      });
    }
    scratch sums(team.team_scratch(level), items);  // sums(sg * EG + k): expert e0 + k's blocks of segment sg
    if (NS > 1) {  // (one segment: nothing comes before it; at small S this pass was a round trip more)
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, items), [&](const std::int64_t i) {
        const std::int64_t e = e0 + i % EG, b0 = i / EG * seg, b1 = b0 + seg < nb ? b0 + seg : nb;
        std::int32_t sum = 0;
        if (e < E) {
          for (std::int64_t c0 = b0; c0 < b1; c0 += kPrefetch) {  // kPrefetch loads in flight, then their sum
            std::int32_t got[kPrefetch];
            for (std::int64_t j = 0; j < kPrefetch; ++j) got[j] = c0 + j < b1 ? hist(h0 + (c0 + j) * E + e) : 0;
            for (std::int64_t j = 0; j < kPrefetch; ++j) sum += got[j];
          }
        }
        sums(i) = sum;
      });
      team.team_barrier();
    }
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, items), [&](const std::int64_t i) {
      const std::int64_t k = i % EG, e = e0 + k, sg = i / EG;
      if (e >= E) return;
      std::int32_t run = 0;
      for (std::int64_t j = 0; j < sg; ++j) run += sums(j * EG + k);
      const std::int64_t b1 = (sg + 1) * seg < nb ? (sg + 1) * seg : nb;
      for (std::int64_t b0 = sg * seg; b0 < b1; b0 += kPrefetch) {
        std::int32_t got[kPrefetch];
        const std::int64_t n = b1 - b0 < kPrefetch ? b1 - b0 : kPrefetch;
        for (std::int64_t j = 0; j < kPrefetch; ++j) got[j] = j < n ? hist(h0 + (b0 + j) * E + e) : 0;
        for (std::int64_t j = 0; j < n; ++j) {
          base(h0 + (b0 + j) * E + e) = run;
          run += got[j];
        }
      }
      if (sg == NS - 1) counts(l * E + e) = run;
    });
    if (tal) {
      const std::int32_t* given = tpe(l).at;  // tokens_per_expert, or null
      const std::int64_t b0 = g * static_cast<std::int64_t>(nb) / G, b1 = (g + 1) * static_cast<std::int64_t>(nb) / G;
      const std::int64_t n = EG > b1 - b0 ? EG : b1 - b0;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](const std::int64_t i) {
        const std::int64_t e = e0 + i;
        std::int64_t p = 0;
        if (i < EG && e < E && given && given[e] != tal[e]) ++p;
        if (i < b1 - b0) p += block_bad(l * nb + b0 + i);
        if (i == 0 && g == 0 && ranks.bad_tokens(l)) ++p;
        if (p > 0) Kokkos::atomic_add(&problems(), p);
      });
      return;
    }
    // The rank's last team: every team of rank l has stored its counts.
    if (!last_team_to_arrive(team, &done(l), G)) return;
    const volatile std::int32_t* rank_counts = counts.data() + l * E;
    Kokkos::parallel_scan(Kokkos::TeamThreadRange(team, E), [&](const int e, std::int32_t& run, const bool final) {
      const std::int32_t c = rank_counts[e];
      if (final) estart(l * E + e) = run;
      run += c;
    });
    const std::int32_t* given = tpe(l).at;  // tokens_per_expert, or null
    std::int64_t mismatches = 0, bad_ids = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, E),
        [&](const int e, std::int64_t& acc) { acc += given && given[e] != rank_counts[e] ? 1 : 0; }, mismatches);
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, nb), [&](const int b, std::int64_t& acc) { acc += block_bad(l * nb + b); },
        bad_ids);
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      const std::int64_t p = mismatches + bad_ids + (ranks.bad_tokens(l) ? 1 : 0);
      if (p > 0) Kokkos::atomic_add(&problems(), p);
    });
  };
  // A thread per item, or per expert where the rank's last team scans more
  // (E > items: small S, one segment), so that its scan runs in one round.
  int unused_level = 0;
  launch.parallel_for(
      "moonep::portable::validate_block_offsets",
      one_round_team_policy<scratch>(launch.exec(), s.L * G, items > E ? items : E, items, &unused_level, offsets),
      offsets);
}

// The same, device form, in two kernels (validate_histogram, one team per
// block, then validate_block_offsets, a few per rank) that leave the same
// counts, starts and problem count; hist and base are laid out per block
// (see above). The first zeroes the problem count,
// to which the second's teams add their rank's problems (a given
// tokens_per_expert is compared where its pointer is set).
template <class Exec>
void validate_device(const Launcher<Exec>& launch, const InputScratch<Exec>& s, const LocalRanks<Exec>& lr) {
  validate_histogram(launch, s, lr, nullptr);
  validate_block_offsets(launch, s, lr);
}

// Phase A, every local rank, host form: its receive slots start empty (-1)
// every step (the sources fill the used ones in Phase C2), and its tokens
// per expert go to row `rank` of rank 0's tpe_in, in place when rank 0's
// chunk is stored into directly (else the caller puts them; see
// put_counts_run).
template <class Exec>
void clear_slots(const Exec& exec, const ChunkLayout& CL, const InputScratch<Exec>& s, const LocalRanks<Exec>& lr) {
  using T = Types<Exec>;
  const int E = CL.E;
  const std::int64_t slots_len = CL.slot_ints * CL.NvS, width = slots_len + E, slots_at = CL.slots, tpe_in = CL.tpe_in;
  const auto chunk = lr.chunk;
  const auto rank = lr.rank;
  const auto direct = lr.direct_chunk;
  const auto counts = s.counts;
  const LocalRanks<Exec> ranks = lr;
  // A thread clears runs of 4096 values (a plain loop the compiler
  // vectorizes).
  const std::int64_t grain = 4096, per_rank = (width + grain - 1) / grain;
  const IndexSplit split(per_rank);
  Kokkos::parallel_for(
      "moonep::portable::phaseA_clear_slots", typename T::range(exec, 0, lr.count * per_rank),
      KOKKOS_LAMBDA(const std::int64_t i) {
        if (ranks.stopped()) return;  // bad input: nothing is touched
        const std::int64_t l = split.quotient(i), k0 = (i - l * per_rank) * grain;
        const std::int64_t k1 = k0 + grain < width ? k0 + grain : width;
        std::int32_t* slots = chunk(l).at + slots_at;
        for (std::int64_t k = k0; k < k1 && k < slots_len; ++k) slots[k] = -1;
        if (std::int32_t* root = direct(0).at) {
          std::int32_t* row = root + tpe_in + static_cast<std::int64_t>(rank(l)) * E - slots_len;
          for (std::int64_t k = k0 > slots_len ? k0 : slots_len; k < k1; ++k) row[k] = counts(l * E + k - slots_len);
        }
      });
}

// The put of rank `rank`'s tokens per expert (counts[l], E values) into row
// `rank` of rank 0's tpe_in, for worlds where rank 0 is not stored into
// directly.
inline PutRun put_counts_run(const ChunkLayout& CL, int rank, int local_index) {
  return PutRun{0, 0, CL.tpe_in + static_cast<std::int64_t>(rank) * CL.E,
                static_cast<std::int64_t>(local_index) * CL.E, CL.E};
}

// Phase C1, every local rank, host form: pos[l][i] = position of entry i of
// rank l in its rank's stable sort by expert. The walk consumes `base` (its
// per-block starts are advanced as entries are placed).
template <class Exec>
void stable_counting_sort(const Exec& exec, const InputScratch<Exec>& s, const LocalRanks<Exec>& lr) {
  using T = Types<Exec>;
  const int E = s.E, nb = s.nblocks;
  const std::int64_t N = s.N, len = s.block_len;
  const auto base = s.base;
  const auto pos = s.pos;
  const auto routing = lr.routing;
  const LocalRanks<Exec> ranks = lr;
  Kokkos::parallel_for(
      "moonep::portable::phaseC1_stable_scatter", typename T::range(exec, 0, static_cast<std::int64_t>(s.L) * nb),
      KOKKOS_LAMBDA(const std::int64_t lb) {
        if (ranks.stopped()) return;
        const std::int64_t l = lb / nb, b = lb % nb;
        const std::int32_t* ids = routing(l).at;
        std::int32_t* next = base.data() + l * E * nb + b;  // next[e * nb]: where block b's next e goes
        const std::int32_t rank_start = static_cast<std::int32_t>(l * N);
        const std::int64_t n = ranks.entries(l);
        const std::int64_t end = (b + 1) * len < n ? (b + 1) * len : n;
        for (std::int64_t i = b * len; i < end; ++i) pos(l * N + i) = next[ids[i] * nb]++ - rank_start;
      });
}

// Four entry ids of a block, read from team scratch as one 16-byte load
// by clear_and_scatter's ranking, and the int32 team scratch that kernel
// asks for a block of `len` entries: whole quads, and a quad more, so
// that the block can start at the next 16-byte boundary (Kokkos aligns
// team scratch to 8 bytes).
using IdQuad = Int32x4;
inline constexpr std::int64_t kIdQuadInts = 4;
inline std::int64_t ac1_scratch_ints(std::int64_t len) {
  return (len + kIdQuadInts - 1) / kIdQuadInts * kIdQuadInts + kIdQuadInts;
}

// Phase A and C1 in one kernel, device form, one team per block (l, b):
// the team clears its share of rank l's receive slots and of its row of
// rank 0's tpe_in (as clear_slots), then places its block's entries:
// pos = estart + base + the earlier equal experts of the block. When C2
// writes the outputs itself (`outputs.on`, phase_c2_outputs.hpp), nothing
// fills the receive slots: the teams clear rank l's src_info and zero its
// dup_counts instead.
template <class Exec>
void clear_and_scatter(const Launcher<Exec>& launch, const ChunkLayout& CL, const InputScratch<Exec>& s,
                       const LocalRanks<Exec>& lr, const C2Outputs<Exec>& outputs) {
  using T = Types<Exec>;
  using member = typename T::member;
  const int E = s.E, nb = s.nblocks;
  const std::int64_t N = s.N, len = s.block_len;
  const bool outs = outputs.on;
  const C2Outputs<Exec> out = outputs;
  // Values cleared before the counts row: the slots', or the outputs'.
  const std::int64_t slots_len = outs ? outputs.clear_width() : CL.slot_ints * CL.NvS;
  const std::int64_t width = slots_len + E, slots_at = CL.slots, tpe_in = CL.tpe_in;
  const std::int64_t share = (width + nb - 1) / nb;  // values each team clears
  const auto base = s.base;
  const auto estart = s.estart;
  const auto counts = s.counts;
  const auto pos = s.pos;
  const auto routing = lr.routing;
  const auto chunk = lr.chunk;
  const auto rank = lr.rank;
  const auto direct = lr.direct_chunk;
  const LocalRanks<Exec> ranks = lr;
  int level = 0;
  const std::int64_t quads = (len + kIdQuadInts - 1) / kIdQuadInts;
  const auto policy = with_scratch<typename T::scratch_i32>(
      typename T::team_policy(launch.exec(), s.L * nb, Kokkos::AUTO), ac1_scratch_ints(len), &level);
  launch.parallel_for(
      "moonep::portable::phaseAC1_clear_and_scatter", policy, KOKKOS_LAMBDA(const member& team) {
        if (ranks.stopped()) return;  // bad input: nothing is touched (the whole team, before any barrier)
        const std::int64_t l = team.league_rank() / nb, b = team.league_rank() % nb;
        // Phase A: values [k0, k1) of rank l's slots (or outputs), then of its
        // counts row.
        std::int32_t* slots = chunk(l).at + slots_at;
        std::int32_t* root = direct(0).at;
        std::int32_t* row = root ? root + tpe_in + static_cast<std::int64_t>(rank(l)) * E - slots_len : nullptr;
        const std::int64_t k0 = b * share < width ? b * share : width;
        const std::int64_t k1 = k0 + share < width ? k0 + share : width;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, k0, k1), [&](const std::int64_t k) {
          if (k < slots_len) {
            if (outs) {
              out.clear(l, k);
            } else {
              slots[k] = -1;
            }
          } else if (row) {
            row[k] = counts(l * E + k - slots_len);
          }
        });
        // C1: the block's entries, ranked in scratch (16-byte aligned: an
        // entry compares four earlier ids per load, with 32-bit counters,
        // since the kernel's time is its compare loop's instructions). The
        // quads are read only after the barrier that ends the stores of the
        // ids.
        const std::int64_t begin = b * len, n_l = ranks.entries(l);
        const std::int64_t stop = (b + 1) * len < n_l ? (b + 1) * len : n_l, n = stop > begin ? stop - begin : 0;
        const std::int32_t* ids = routing(l).at + begin;
        std::int32_t* block = static_cast<std::int32_t*>(
            team.team_scratch(level).get_shmem_aligned(kIdQuadInts * quads * sizeof(std::int32_t), sizeof(IdQuad)));
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](const std::int64_t t) { block[t] = ids[t]; });
        team.team_barrier();
        const std::int32_t* starts = estart.data() + l * E;
        const std::int32_t* before = base.data() + (l * nb + b) * E;
        const IdQuad* block4 = reinterpret_cast<const IdQuad*>(block);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](const std::int64_t t) {
          const int tt = static_cast<int>(t);  // < block_len <= 1024
          const std::int32_t e = block[tt];
          int earlier = 0;
          const int full = tt / kIdQuadInts;
          for (int j = 0; j < full; ++j) {
            const IdQuad q = block4[j];
            earlier += (q.v[0] == e ? 1 : 0) + (q.v[1] == e ? 1 : 0) + (q.v[2] == e ? 1 : 0) + (q.v[3] == e ? 1 : 0);
          }
          for (int j = full * kIdQuadInts; j < tt; ++j) earlier += block[j] == e ? 1 : 0;
          pos(l * N + begin + t) = starts[e] + before[e] + earlier;
        });
      });
}

}  // namespace moonep::impl::portable
