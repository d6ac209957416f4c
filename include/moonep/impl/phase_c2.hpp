// moonep/impl/phase_c2.hpp — Phase C2 on each source rank: every entry's
// destination (binary search over the expert's acum), the dedup of step 7,
// and the publication of each slot's (src_info, dup link, dup index) into
// the destination rank's chunk.
//
// Entries of one (expert, destination) pair are consecutive in the sorted
// order and land on consecutive slots of the destination, so the staging
// array is kept in sorted order and published as one contiguous run per
// pair: at most pair_capacity runs per rank, whatever S is (cheap for a
// world that moves data with MPI_Put).
#pragma once

#include <cstdint>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_input.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/world.hpp"

namespace moonep::impl::portable {

// Calls f(d, base, g_begin, g_end) for each (e, d) pair that overlaps this
// rank's global range [c0, c0 + counts[e]) of e-entries, in pair order.
template <class Exec>
struct OverlapWalker {
  typename Types<Exec>::ivec shared, own, counts;
  std::int64_t sh_ptr, sh_pairs, ow_cum;

  template <class F>
  KOKKOS_INLINE_FUNCTION void operator()(const int e, F&& f) const {
    const std::int64_t c0 = own(ow_cum + e), c1 = c0 + counts(e);
    std::int64_t acum_before = 0;
    for (std::int64_t p = shared(sh_ptr + e); p < shared(sh_ptr + e + 1); ++p) {
      const std::int64_t acum = shared(sh_pairs + 3 * p + 1);
      const std::int64_t b = c0 > acum_before ? c0 : acum_before;
      const std::int64_t x = c1 < acum ? c1 : acum;
      if (b < x) f(shared(sh_pairs + 3 * p), shared(sh_pairs + 3 * p + 2), b, x);
      if (acum >= c1) break;
      acum_before = acum;
    }
  }
};

template <class Exec>
struct PublishScratch {
  using T = Types<Exec>;
  typename T::ivec staging;                     // [N][3] in sorted order
  Kokkos::View<PutRun*, typename T::mem> runs;  // [pair_capacity]
  typename T::ivec run_start;                   // [E]

  PublishScratch() = default;
  PublishScratch(const ChunkLayout& L, const std::string& tag) {
    staging = compat::uninitialized_view<typename T::ivec>(tag + "staging", static_cast<std::size_t>(3 * L.N));
    runs = Kokkos::View<PutRun*, typename T::mem>(tag + "runs", static_cast<std::size_t>(L.pair_capacity));
    run_start = typename T::ivec(tag + "run_start", L.E);
  }
};

// `shared` holds the shared tables (rank 0's chunk, or this rank's copy),
// `own` this rank's chunk. Writes dst (final, step-7 encoded) and staging.
template <class Exec>
void destinations_and_dedup(const Exec& exec, const ChunkLayout& L, int rank, const InputScratch<Exec>& in,
                            const PublishScratch<Exec>& ps, typename Types<Exec>::civec topk,
                            typename Types<Exec>::ivec shared, typename Types<Exec>::ivec own,
                            typename Types<Exec>::ivec dst) {
  using T = Types<Exec>;
  const int K = L.K;
  const std::int64_t NvS = L.NvS, src_base = static_cast<std::int64_t>(rank) * L.NvS;
  const std::int64_t sh_ptr = L.shared + L.sh_ptr, sh_pairs = L.shared + L.sh_pairs;
  const std::int64_t ow_cum = L.own + L.ow_cum;
  const auto pos = in.pos;
  const auto estart = in.estart;
  const auto staging = ps.staging;
  Kokkos::parallel_for(
      "moonep::portable::phaseC2_destinations_dedup", typename T::range(exec, 0, L.S),
      KOKKOS_LAMBDA(const int s) {
        std::int32_t raw[32];
        std::int32_t rank_of[32];
        const std::int64_t first = static_cast<std::int64_t>(s) * K;
        for (int k = 0; k < K; ++k) {
          const std::int64_t i = first + k;
          const std::int32_t e = topk(i);
          const std::int32_t j = pos(i);
          const std::int64_t G = own(ow_cum + e) + (j - estart(e));
          // First pair of e whose acum exceeds G.
          std::int64_t lo = shared(sh_ptr + e), hi = shared(sh_ptr + e + 1) - 1;
          while (lo < hi) {
            const std::int64_t mid = (lo + hi) / 2;
            if (shared(sh_pairs + 3 * mid + 1) > G) hi = mid; else lo = mid + 1;
          }
          rank_of[k] = shared(sh_pairs + 3 * lo);
          raw[k] = static_cast<std::int32_t>(shared(sh_pairs + 3 * lo + 2) + G);
        }
        // Step 7/8 within the token in O(K): per destination rank, its
        // first k (the primary) and how many later entries share it. R is
        // at most kMaxRanks, so the per-rank tables fit on the stack.
        std::int8_t first_k[kMaxRanks];
        std::int8_t later[kMaxRanks];
        std::int8_t index_of[32];
        for (int k = 0; k < K; ++k) first_k[rank_of[k]] = -1;
        for (int k = 0; k < K; ++k) {
          // Branch-free: whether an entry repeats a rank is data, not pattern.
          const std::int32_t d = rank_of[k];
          const std::int8_t f = first_k[d];
          const bool fresh = f < 0;
          const std::int8_t seen = fresh ? 0 : static_cast<std::int8_t>(later[d] + 1);
          index_of[k] = fresh ? 0 : static_cast<std::int8_t>(seen - 1);
          later[d] = seen;
          first_k[d] = fresh ? static_cast<std::int8_t>(k) : f;
        }
        for (int k = 0; k < K; ++k) {
          const std::int64_t i = first + k;
          const std::int32_t d = rank_of[k];
          const int primary = first_k[d];
          std::int32_t link = -1, index = 0;
          if (primary < k) {
            dst(i) = -raw[k] - 1;
            link = static_cast<std::int32_t>(raw[primary] - d * NvS);
            index = index_of[k];
          } else {
            dst(i) = raw[k];
            if (later[d] > 0) link = -2 - later[d];
          }
          const std::int64_t j3 = 3 * static_cast<std::int64_t>(pos(i));
          staging(j3) = static_cast<std::int32_t>(src_base + i);
          staging(j3 + 1) = link;
          staging(j3 + 2) = index;
        }
      });
}

// One run per (expert, destination) pair this rank has entries for.
// Returns how many (the runs are ps.runs[0, n)).
template <class Exec>
std::int64_t publication_runs(const Exec& exec, const ChunkLayout& L, const InputScratch<Exec>& in,
                              const PublishScratch<Exec>& ps, typename Types<Exec>::ivec shared,
                              typename Types<Exec>::ivec own) {
  using T = Types<Exec>;
  const std::int64_t NvS = L.NvS, slots_at = L.slots, cap = L.pair_capacity;
  const std::int64_t sh_ptr = L.shared + L.sh_ptr, sh_pairs = L.shared + L.sh_pairs;
  const std::int64_t ow_cum = L.own + L.ow_cum;
  const auto counts = in.counts;
  const auto estart = in.estart;
  const auto runs = ps.runs;
  const auto run_start = ps.run_start;
  const OverlapWalker<Exec> for_each_overlap{shared, own, counts, sh_ptr, sh_pairs, ow_cum};
  std::int32_t nruns = 0;
  Kokkos::parallel_scan(
      "moonep::portable::phaseC2_count_runs", typename T::range(exec, 0, L.E),
      KOKKOS_LAMBDA(const int e, std::int32_t& run, const bool final) {
        std::int32_t c = 0;
        if (counts(e) > 0) for_each_overlap(e, [&](std::int64_t, std::int64_t, std::int64_t, std::int64_t) { ++c; });
        if (final) run_start(e) = run;
        run += c;
      },
      nruns);
  if (nruns > cap) {
    throw RuntimeError("moonep portable planner: " + std::to_string(nruns) +
                       " publication runs exceed the bound " + std::to_string(cap) + " (internal error)");
  }
  Kokkos::parallel_for(
      "moonep::portable::phaseC2_fill_runs", typename T::range(exec, 0, L.E), KOKKOS_LAMBDA(const int e) {
        if (counts(e) == 0) return;
        std::int64_t r = run_start(e);
        const std::int64_t c0 = own(ow_cum + e);
        for_each_overlap(e, [&](std::int64_t d, std::int64_t base, std::int64_t b, std::int64_t x) {
          const std::int64_t loff = base + b - d * NvS;
          const std::int64_t j = estart(e) + (b - c0);
          runs(r++) = PutRun{static_cast<std::int32_t>(d), 0, slots_at + 3 * loff, 3 * j, 3 * (x - b)};
        });
      });
  return nruns;
}

}  // namespace moonep::impl::portable
