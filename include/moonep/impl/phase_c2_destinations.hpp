// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_c2_destinations.hpp — Phase C2 on every local source rank at once:
// each entry's destination (binary search over its expert's acum), the
// dedup of step 7, and each slot's (src_info, dup link, dup index) for the
// destination rank's chunk.
//
// Kernels:
//   phaseC2_destinations_dedup  (host form; the device form's:
//                               phase_c2_device.hpp) one thread per token
//                               of every local rank
//                               (up to S; those past a ragged rank's s_l
//                               do nothing):
//                               dst (final, step-7 encoded), and the slot
//                               triple, stored in place into the
//                               destination's slots when this process may
//                               (LocalRanks::direct_chunk), else into the
//                               rank's staging array in sorted order;
//   phaseC2_runs                (only when some destination is not stored
//                               into in place) the put runs of the staging.
//
// Entries of one (expert, destination) pair are consecutive in the sorted
// order and land on consecutive slots of the destination, so the staging
// of a source publishes as one contiguous run per pair. Run p of source l
// is the part of pair p (the shared pairs table's index) that l holds:
// empty when l has none of it or its destination is stored in place. The
// runs array therefore has a fixed size (pair_capacity per source), needs
// no count read back, and a put carries at most pair_capacity runs whatever
// S is (cheap for a world that moves data with MPI_Put).
#pragma once

#include <cstdint>
#include <string>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_a_local.hpp"
#include "moonep/impl/phase_c2_device.hpp"
#include "moonep/impl/phase_c2_outputs.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/world.hpp"

namespace moonep::impl::portable {

template <class Exec>
struct PublishScratch {
  using T = Types<Exec>;
  typename T::ivec staging;                     // [L][N][slot_ints] in sorted order
  Kokkos::View<PutRun*, typename T::mem> runs;  // [L][pair_capacity]
  // Whether the device kernel stores each slot as one SlotQuad: 4 values a
  // slot, and every slot it stores (the direct chunks' slots, the staging)
  // 16-byte aligned (the planner checks the pointers once).
  bool quads = false;

  PublishScratch() = default;
  PublishScratch(const ChunkLayout& CL, int L, bool needs_puts) {
    if (!needs_puts) return;  // every destination is stored into in place
    const std::string p = "moonep::portable::publish.";
    staging = compat::uninitialized_view<typename T::ivec>(p + "staging", static_cast<std::size_t>(CL.slot_ints * L * CL.N));
    runs = Kokkos::View<PutRun*, typename T::mem>(p + "runs", static_cast<std::size_t>(L * CL.pair_capacity));
  }
};

// Writes dst of every local rank (dst_all, [L][N]) and every entry's slot
// triple (in place or into staging), by the host form's kernel (one thread
// walking each token's entries) or, in the device form on a device space,
// the device kernel (phase_c2_device.hpp). The device form on a host space
// (the tests' PortableDeviceForm) keeps the host kernel: there the device
// kernel's vector loops are serial anyway, and its team kernel made
// Kokkos::Threads reallocate its thread scratch in every step of the step
// graph (test_portable_labels, Kokkos develop: Threads reallocates to a
// kernel's own sizes whenever it needs more than the last reallocation
// kept). So that kernel runs in the tests on a GPU (the device runs,
// compute-sanitizer included) and is compiled by CI's cuda leg.
// With `outputs.on` (phase_c2_outputs.hpp) either kernel writes the plan's
// per-slot outputs and small tables instead of the slots; the host kernel
// then reserves each primary's row and range with its own atomics, and
// its first thread stores the status for the host. (The host kernel is a
// template on it, a constant the compiler folds: the host form's kernel
// carries none of that.)
template <bool kOutputs, class Exec>
void host_destinations(const Launcher<Exec>& launch, const ChunkLayout& CL, const InputScratch<Exec>& in,
                       const PublishScratch<Exec>& ps, const LocalRanks<Exec>& lr,
                       typename Types<Exec>::ivec dst_all, const C2Outputs<Exec>& outputs);

template <class Exec>
void destinations_and_dedup(const Launcher<Exec>& launch, const ChunkLayout& CL, const InputScratch<Exec>& in,
                            const PublishScratch<Exec>& ps, const LocalRanks<Exec>& lr,
                            typename Types<Exec>::ivec dst_all, bool host_style, const C2Outputs<Exec>& outputs) {
  if constexpr (!Types<Exec>::host) {  // (a host space never instantiates the device kernel)
    if (!host_style && outputs.on) {
      destinations_and_outputs_device(launch, CL, in, lr, dst_all, outputs);
      return;
    }
    if (!host_style) {
      destinations_and_dedup_device(launch, CL, in, ps.staging, ps.quads, lr, dst_all);
      return;
    }
  }
  if (outputs.on) {
    host_destinations<true>(launch, CL, in, ps, lr, dst_all, outputs);
  } else {
    host_destinations<false>(launch, CL, in, ps, lr, dst_all, outputs);
  }
}

template <bool kOutputs, class Exec>
void host_destinations(const Launcher<Exec>& launch, const ChunkLayout& CL, const InputScratch<Exec>& in,
                       const PublishScratch<Exec>& ps, const LocalRanks<Exec>& lr,
                       typename Types<Exec>::ivec dst_all, const C2Outputs<Exec>& outputs) {
  using T = Types<Exec>;
  const int K = CL.K, S = CL.S;
  const std::int64_t N = CL.N, NvS = CL.NvS, slots_at = CL.slots, w = CL.slot_ints;
  const auto pos = in.pos;
  const auto staging = ps.staging;
  const EntryDestination<Exec> destination(CL, in, lr);
  const auto direct = lr.direct_chunk;
  const auto rank = lr.rank;
  const LocalRanks<Exec> ranks = lr;
  const IndexSplit split(S);
  const C2Outputs<Exec> out = outputs;
  const std::int64_t items = outputs.table_items(lr.count);
  const std::int64_t all = static_cast<std::int64_t>(lr.count) * S;
  launch.parallel_for(
      "moonep::portable::phaseC2_destinations_dedup", typename T::range(launch.exec(), 0, all),
      KOKKOS_LAMBDA(const std::int64_t ls) {
        if (kOutputs) {
          if (ls == 0) out.store_status();  // (bad input or not)
        }
        if (ranks.stopped()) return;  // bad input: nothing is touched
        if (kOutputs) {
          for (std::int64_t i = ls; i < items; i += all) out.copy_table(i);
        }
        const std::int64_t l = split.quotient(ls), s = ls - l * S;
        if (s >= ranks.tokens(l)) return;  // a ragged rank's absent token
        const std::int64_t src_base = static_cast<std::int64_t>(rank(l)) * NvS;
        std::int32_t raw[32];
        std::int32_t rank_of[32];
        const std::int64_t first = s * K;
        for (int k = 0; k < K; ++k) destination(l, first + k, rank_of[k], raw[k]);
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
        std::int32_t dup_start[kOutputs ? kMaxRanks : 1];  // outputs: a primary's reserved range, by destination
        for (int k = 0; k < K; ++k) {
          const std::int64_t i = first + k;
          const std::int32_t d = rank_of[k];
          const int primary = first_k[d];
          std::int32_t link = -1, index = 0;
          if (primary < k) {
            dst_all(l * N + i) = -raw[k] - 1;
            link = static_cast<std::int32_t>(raw[primary] - d * NvS);
            index = index_of[k];
          } else {
            dst_all(l * N + i) = raw[k];
            if (later[d] > 0) link = -2 - later[d];
          }
          if (kOutputs) {  // (k in order: a primary reserves before its duplicates read)
            const std::int32_t loff = static_cast<std::int32_t>(raw[k] - d * NvS);
            out.store_src(d, loff, static_cast<std::int32_t>(src_base + i));
            if (primary < k) {
              out.store_dup(d, dup_start[d] + index, loff);
            } else if (later[d] > 0) {
              std::int32_t row = 0;
              out.reserve(d, 1, later[d], row, dup_start[d]);
              out.store_row(d, row, loff, dup_start[d], later[d]);
            }
            continue;
          }
          std::int32_t* to = direct(d).at;
          to = to ? to + slots_at + w * (raw[k] - d * NvS) : staging.data() + w * (l * N + pos(l * N + i));
          to[0] = static_cast<std::int32_t>(src_base + i);
          to[1] = link;
          to[2] = index;
        }
      });
}

// Runs of every local source: run (l, p) is the part of pair p that source
// l holds, if its destination is not stored into in place (else empty).
template <class Exec>
void publication_runs(const Exec& exec, const ChunkLayout& CL, const InputScratch<Exec>& in,
                      const PublishScratch<Exec>& ps, const LocalRanks<Exec>& lr) {
  using T = Types<Exec>;
  const int E = CL.E;
  const std::int64_t NvS = CL.NvS, slots_at = CL.slots, cap = CL.pair_capacity, w = CL.slot_ints;
  const std::int64_t sh_ptr = CL.sh_ptr, sh_pairs = CL.sh_pairs;
  const std::int64_t ow_cum = CL.own + CL.ow_cum;
  const auto counts = in.counts;
  const auto estart = in.estart;
  const auto runs = ps.runs;
  const auto chunk = lr.chunk;
  const auto shared_tables = lr.shared_tables;
  const auto direct = lr.direct_chunk;
  const LocalRanks<Exec> ranks = lr;
  const IndexSplit split(E);
  Kokkos::parallel_for(
      "moonep::portable::phaseC2_runs", typename T::range(exec, 0, static_cast<std::int64_t>(lr.count) * E),
      KOKKOS_LAMBDA(const std::int64_t le) {
        if (ranks.stopped()) return;
        const std::int64_t l = split.quotient(le);
        const int e = static_cast<int>(le - l * E);
        const std::int32_t* shared = shared_tables(l).at;
        PutRun* out = runs.data() + l * cap;
        // This source's global range of e-entries, and their start in its
        // staging (rank l's part, [N][slot_ints], is the source of its put).
        const std::int64_t c0 = chunk(l).at[ow_cum + e], c1 = c0 + counts(le);
        const std::int64_t j0 = estart(le);
        std::int64_t acum_before = 0;
        const std::int64_t p_end = shared[sh_ptr + e + 1] < cap ? shared[sh_ptr + e + 1] : cap;
        for (std::int64_t p = shared[sh_ptr + e]; p < p_end; ++p) {
          const std::int32_t d = shared[sh_pairs + 3 * p];
          const std::int64_t acum = shared[sh_pairs + 3 * p + 1];
          const std::int64_t b = c0 > acum_before ? c0 : acum_before;
          const std::int64_t x = c1 < acum ? c1 : acum;
          PutRun run{0, 0, 0, 0, 0};
          if (b < x && !direct(d).at) {
            const std::int64_t loff = shared[sh_pairs + 3 * p + 2] + b - d * NvS;
            run = PutRun{d, 0, slots_at + w * loff, w * (j0 + b - c0), w * (x - b)};
          }
          out[p] = run;
          acum_before = acum;
        }
        if (e == E - 1) {
          for (std::int64_t p = p_end; p < cap; ++p) out[p] = PutRun{0, 0, 0, 0, 0};
        }
      });
}

}  // namespace moonep::impl::portable
