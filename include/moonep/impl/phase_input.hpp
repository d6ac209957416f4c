// moonep/impl/phase_input.hpp — the rank-local work that needs nothing from
// other ranks: the per-block expert histogram (which is both the rank's
// tokens-per-expert and the validation of its routing), and Phase C1, the
// stable counting sort of the rank's entries by expert.
//
// Entries are cut into `nblocks` contiguous blocks. hist[b][e] counts expert
// e in block b; a scan across blocks turns it into the rank of block b's
// first e-entry among all e-entries; the scatter then walks each block in
// order, so equal experts keep their flat order (stable).
#pragma once

#include <cstdint>

#include "moonep/impl/portable_types.hpp"

namespace moonep::impl::portable {

template <class Exec>
struct InputScratch {
  using T = Types<Exec>;
  int nblocks = 1;
  std::int64_t block_len = 1;
  typename T::imat hist;    // [nblocks][E]
  typename T::ivec counts;  // [E] tokens per expert of this rank
  typename T::ivec estart;  // [E] first sorted position of each expert
  typename T::ivec pos;     // [N] sorted position of each entry

  InputScratch() = default;
  InputScratch(const Exec& exec, int E, std::int64_t N, const std::string& tag) {
    // One block per thread of the backend (one on Serial: a single pass),
    // but not blocks so small that the histograms dominate.
    const std::int64_t by_size = (N + 255) / 256;
    std::int64_t nb = exec.concurrency();
    if (nb > by_size) nb = by_size;
    if (nb < 1) nb = 1;
    nblocks = static_cast<int>(nb);
    block_len = (N + nblocks - 1) / nblocks;
    hist = typename T::imat(Kokkos::view_alloc(Kokkos::WithoutInitializing, tag + "hist"), nblocks, E);
    counts = typename T::ivec(tag + "counts", E);
    estart = typename T::ivec(tag + "estart", E);
    pos = compat::uninitialized_view<typename T::ivec>(tag + "pos", static_cast<std::size_t>(N));
  }
};

// Histogram of `topk` by expert; returns how many entries name an expert
// outside [0, E) (they are skipped: nothing is written out of bounds).
// Also compares against `given_tpe` when has_tpe; mismatches add to the
// result. Touches only the rank's private scratch.
template <class Exec>
std::int64_t histogram_and_check(const Exec& exec, const InputScratch<Exec>& s, int E,
                                 typename Types<Exec>::civec topk,
                                 typename Types<Exec>::civec given_tpe, bool has_tpe) {
  using T = Types<Exec>;
  const auto hist = s.hist;
  const auto counts = s.counts;
  const std::int64_t N = static_cast<std::int64_t>(topk.extent(0));
  const std::int64_t len = s.block_len;
  std::int64_t bad = 0;
  Kokkos::parallel_reduce(
      "moonep::portable::phaseA_block_histogram", typename T::range(exec, 0, s.nblocks),
      KOKKOS_LAMBDA(const int b, std::int64_t& nbad) {
        for (int e = 0; e < E; ++e) hist(b, e) = 0;
        const std::int64_t end = (b + 1) * len < N ? (b + 1) * len : N;
        for (std::int64_t i = b * len; i < end; ++i) {
          const std::int32_t e = topk(i);
          if (e < 0 || e >= E) {
            ++nbad;
          } else {
            ++hist(b, e);
          }
        }
      },
      bad);
  const int nb = s.nblocks;
  std::int64_t mismatch = 0;
  Kokkos::parallel_reduce(
      "moonep::portable::phaseA_scan_blocks", typename T::range(exec, 0, E),
      KOKKOS_LAMBDA(const int e, std::int64_t& nmis) {
        std::int32_t run = 0;
        for (int b = 0; b < nb; ++b) {
          const std::int32_t c = hist(b, e);
          hist(b, e) = run;
          run += c;
        }
        counts(e) = run;
        if (has_tpe && given_tpe(e) != run) ++nmis;
      },
      mismatch);
  return bad + mismatch;
}

// Phase A: a rank's receive slots start empty (-1) every step; the sources
// fill the used ones in Phase C2. Touches the rank's own chunk only.
template <class Exec>
void clear_slots(const Exec& exec, typename Types<Exec>::ivec chunk, std::int64_t begin, std::int64_t len) {
  Kokkos::parallel_for(
      "moonep::portable::phaseA_clear_slots", Kokkos::RangePolicy<Exec>(exec, begin, begin + len),
      KOKKOS_LAMBDA(const std::int64_t i) { chunk(i) = -1; });
}

// Phase C1: pos[i] = position of entry i in the stable sort by expert.
// Consumes hist (its per-block starts are advanced as entries are placed).
template <class Exec>
void stable_counting_sort(const Exec& exec, const InputScratch<Exec>& s, int E,
                          typename Types<Exec>::civec topk) {
  using T = Types<Exec>;
  const auto hist = s.hist;
  const auto counts = s.counts;
  const auto estart = s.estart;
  const auto pos = s.pos;
  Kokkos::parallel_scan(
      "moonep::portable::phaseC1_expert_starts", typename T::range(exec, 0, E),
      KOKKOS_LAMBDA(const int e, std::int32_t& run, const bool final) {
        if (final) estart(e) = run;
        run += counts(e);
      });
  const std::int64_t N = static_cast<std::int64_t>(topk.extent(0));
  const std::int64_t len = s.block_len;
  Kokkos::parallel_for(
      "moonep::portable::phaseC1_stable_scatter", typename T::range(exec, 0, s.nblocks),
      KOKKOS_LAMBDA(const int b) {
        const std::int64_t end = (b + 1) * len < N ? (b + 1) * len : N;
        for (std::int64_t i = b * len; i < end; ++i) {
          const std::int32_t e = topk(i);
          pos(i) = estart(e) + hist(b, e)++;
        }
      });
}

}  // namespace moonep::impl::portable
