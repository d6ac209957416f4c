// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/phase_c2_outputs.hpp — the plan's per-slot outputs written by
// Phase C2 itself, in an in-process step of the device form: every rank's
// plan store is in this process, so the entry that knows its slot stores
// src_info there, its token's primary reserves its dup_groups row and
// duplicate range, its duplicates fill the range, and C2's teams copy the
// small tables. Phase D's two kernels (a scan of every slot, then the dup
// structures) then do not run: a step graph two kernels shorter, and no
// pass over the receive slots, which nothing writes.
//
// Where: PortablePlanner turns it on for the device form when every rank
// is local and in order (local index l is world rank l), else C2 fills the
// receive slots and Phase D reads them (phase_d_outputs.hpp).
//
// How a row is reserved: dup_counts[d] = (rows, duplicates) of destination
// d, zeroed by Phase A's teams with src_info (set to -1: a slot no entry
// lands in), counts up by atomic reservations. The device kernel reserves
// once per team and destination (team-scratch counters first: one global
// atomic per primary would put every primary of a destination on the same
// two addresses), the host kernel once per primary. So the rows' order,
// and where each duplicate range starts, may vary from run to run, as in
// the CUDA specialization (docs/spec/planning.md, step 8: dup groups
// compare as sets); everything else is the slot path's, bit for bit.
//
// What must stay true: every reservation stays below NvS (rows and
// duplicates of one destination are at most its slots); a duplicate's range
// start is read only after its primary reserved it (the host kernel walks
// a token's entries in k order, the primary first; the device kernel reads
// it after a team barrier); src_info is cleared before C2 stores (Phase A
// runs first, and does nothing on bad input, nor does C2).
#pragma once

#include <cstdint>

#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/phase_d_outputs.hpp"
#include "moonep/impl/portable_types.hpp"

namespace moonep::impl::portable {

template <class Exec>
struct C2Outputs {
  using T = Types<Exec>;
  bool on = false;  // C2 writes the outputs (else the receive slots, then Phase D)
  std::int64_t NvS = 1;
  typename T::ivec src_info, dup_groups, dup_loffs, dup_counts;
  CopyTables<Exec> tables;
  // Where the step graph's last kernel stores the status for the host
  // (PortablePlanner::host_status_; null: none): C2 is the last kernel.
  const std::int64_t* status = nullptr;
  std::int64_t* host_status = nullptr;

  C2Outputs() = default;
  C2Outputs(const ChunkLayout& CL, const LocalRanks<Exec>& lr, const PlanStore<Exec>& out, bool on_)
      : on(on_), NvS(CL.NvS), src_info(out.src_info), dup_groups(out.dup_groups), dup_loffs(out.dup_loffs),
        dup_counts(out.dup_counts), tables(CL, lr, out) {}

  // Phase A's part, value k of rank l's NvS + 2 (src_info, then
  // dup_counts).
  std::int64_t clear_width() const { return NvS + 2; }
  KOKKOS_INLINE_FUNCTION void clear(std::int64_t l, std::int64_t k) const {
    if (k < NvS) {
      src_info(l * NvS + k) = -1;
    } else {
      dup_counts(2 * l + (k - NvS)) = 0;
    }
  }

  // The small tables of every local rank, item i of L * width_.
  std::int64_t table_items(int L) const { return static_cast<std::int64_t>(L) * tables.width_; }
  KOKKOS_INLINE_FUNCTION void copy_table(std::int64_t i) const {
    const std::int64_t l = i / tables.width_;
    tables(l, i - l * tables.width_);
  }

  // The status for the host, by one thread of the step's last kernel.
  KOKKOS_INLINE_FUNCTION void store_status() const {
    if (!host_status) return;
    host_status[0] = status[0];
    host_status[1] = status[1];
  }

  // Destination d's slot loff (d a local index: ranks in order) receives
  // source slot value src.
  KOKKOS_INLINE_FUNCTION void store_src(std::int64_t d, std::int64_t loff, std::int32_t src) const {
    src_info(d * NvS + loff) = src;
  }
  // Reserves `rows` dup_groups rows and `dups` duplicates on destination
  // d: their first row and first duplicate index. Both words in one native
  // 64-bit add where the words are little-endian (rows the low word; it
  // never carries: rows stay below NvS), half the atomics on d's two
  // words that every team reserving on d queues on. A signed std::int64_t:
  // Kokkos 4.6 compiles a fetch-add of an unsigned long long for Cuda to
  // a compare-and-swap loop, which every team on d then retries against
  // the others. Else two 32-bit atomics.
  KOKKOS_INLINE_FUNCTION void reserve(std::int64_t d, std::int32_t rows, std::int32_t dups, std::int32_t& row0,
                                      std::int32_t& dup0) const {
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    // (dup_counts is its own allocation: word 2d is 8-byte aligned)
    std::int64_t* const both = reinterpret_cast<std::int64_t*>(dup_counts.data() + 2 * d);
    const std::int64_t old =
        Kokkos::atomic_fetch_add(both, static_cast<std::int64_t>(dups) * (std::int64_t(1) << 32) + rows);
    row0 = static_cast<std::int32_t>(old & 0xffffffff);
    dup0 = static_cast<std::int32_t>(old >> 32);
#else
    row0 = Kokkos::atomic_fetch_add(&dup_counts(2 * d), rows);
    dup0 = Kokkos::atomic_fetch_add(&dup_counts(2 * d + 1), dups);
#endif
  }
  // A primary's row: its slot, its duplicates' start and count.
  KOKKOS_INLINE_FUNCTION void store_row(std::int64_t d, std::int32_t row, std::int32_t loff, std::int32_t start,
                                        std::int32_t n) const {
    std::int32_t* at = dup_groups.data() + 3 * (d * NvS + row);
    at[0] = loff;
    at[1] = start;
    at[2] = n;
  }
  KOKKOS_INLINE_FUNCTION void store_dup(std::int64_t d, std::int32_t index, std::int32_t loff) const {
    dup_loffs(d * NvS + index) = loff;
  }
};

}  // namespace moonep::impl::portable
