// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what the host tells the planning kernel (plan_step_kernel.cu),
// and the tuning policy both sides size things with. Plain C++ (no CUDA
// headers needed) so the host side that computes layouts compiles anywhere.
//
// Three kinds of memory, all addressed as int32 words:
// - the symmetric buffer: one chunk per rank at sym_base + rank*sym_stride.
//   What other ranks write into or read lives here: the cross-rank
//   counters and the gathered tokens_per_expert (rank 0's copy, or every
//   rank's copy through mc_sym when the GPU world uses NVLink multicast).
// - rank-private scratch: loc_base + rank*loc_stride (the rank's step
//   count, the per-worker expert counts later blocks take their bases
//   from, and, with global tables, every block's tables).
// - outputs: out_base + rank*out_stride; other ranks store src_info and
//   dup structures straight into them.
// Every offset is a multiple of 4 words, so 16-byte vector access is legal
// wherever a length is a multiple of 4 too.
#pragma once

#include <cstdint>

#include "block_tables.hpp"
#include "moonep/impl/plan_fields.hpp"

namespace moonep::cuda::impl {

// ---- Tuning policy -----------------------------------------------------------
// Block size and register cap are build-time knobs (MOONEP_CUDA_BLOCK_THREADS,
// MOONEP_CUDA_MAX_REGS) because the compiler needs them as constants; the
// rest is chosen here. 512 threads at 96 registers: the fastest block size
// of 256, 384, 512 and 1024 on an H200; the kernel needs 94 registers, a
// lower cap spills and is slower, a higher one changes nothing
// (docs/design/cuda_planner.md, "Launch shape").
#ifndef MOONEP_CUDA_BLOCK_THREADS
#define MOONEP_CUDA_BLOCK_THREADS 512
#endif
#ifndef MOONEP_CUDA_MAX_REGS
#define MOONEP_CUDA_MAX_REGS 96
#endif
#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define MOONEP_KERNEL_BOUNDS __maxnreg__(MOONEP_CUDA_MAX_REGS)
#else  // no __maxnreg__ before CUDA 12.4: the same cap through the blocks per SM it allows
#define MOONEP_KERNEL_BOUNDS \
  __launch_bounds__(MOONEP_CUDA_BLOCK_THREADS, 65536 / (MOONEP_CUDA_BLOCK_THREADS * MOONEP_CUDA_MAX_REGS))
#endif
// Only 512 threads passes every GPU unit test; other shapes are for
// measurement, behind an explicit opt-in.
#if MOONEP_CUDA_BLOCK_THREADS != 512 && !defined(MOONEP_CUDA_UNVERIFIED_SHAPE)
#error "MOONEP_CUDA_BLOCK_THREADS other than 512 is unverified: define MOONEP_CUDA_UNVERIFIED_SHAPE to build it for measurement"
#endif

struct TuningPolicy {
  static constexpr int threads = MOONEP_CUDA_BLOCK_THREADS;  // per block
  static constexpr int max_regs = MOONEP_CUDA_MAX_REGS;      // per thread (__maxnreg__)
  // Blocks per SM at most: every block plans the step redundantly from
  // the same gathered counts, so two on one SM compete for it; one block
  // per SM with half as many blocks was faster.
  static constexpr int blocks_per_sm = 1;
  // Entries each thread keeps in flight in the per-entry loops (C1's
  // routing loads, step 6's lookups): one batch of step 6 per block at the
  // headline.
  static constexpr int unroll = 5;
};
static_assert(TuningPolicy::threads % 32 == 0 && TuningPolicy::threads >= 128 && TuningPolicy::threads <= 1024,
              "threads per block");
static_assert(TuningPolicy::max_regs >= 24 && TuningPolicy::max_regs <= 255 &&
                  TuningPolicy::threads * TuningPolicy::max_regs <= 65536,
              "MOONEP_CUDA_BLOCK_THREADS * MOONEP_CUDA_MAX_REGS must fit an SM's 65536 registers");

inline constexpr int kThreads = TuningPolicy::threads;  // threads per block
inline constexpr int kWarps = kThreads / 32;            // warps per block
inline constexpr int kUnroll = TuningPolicy::unroll;
inline constexpr int kMaxGroups = 128;                  // ranks in one launch
inline constexpr int kTracePoints = 24;                 // stamps per block (debug trace; last two: SM clock)
inline constexpr int kCtrlStride = 32;                  // words between counters (own 128B line)
// Steps 7-8 count a tile's dup groups and dup loffs in 16 bits each and
// index its entries in 16 bits: a tile holds fewer entries than this.
inline constexpr int kDupCountEntries = 1 << 16;

// Counters at the start of every chunk, kCtrlStride words apart. Unicast:
// rank 0's are the ones every rank arrives at and polls; multicast: every
// rank arrives at all copies at once and polls its own.
enum Ctrl : int {
  kGather = 0,  // one arrival per block of every rank per step: the counts are gathered
  kDone = 1,    // GPU world: one arrival per block per step, at its end (see plan_step_kernel.cu)
  kNumCtrl = 2
};

struct SymLayout {
  std::int64_t ctrl, tpe_all, tpe_half;
  std::int64_t words;  // chunk's symmetric part
};

struct LocLayout {
  std::int64_t epoch;   // steps this rank finished since the last reset
  std::int64_t hist;    // [nworkers][E] each worker block's count of each expert
  std::int64_t tables;  // global tables: [bpr][table_words] (table_layout.hpp)
  std::int64_t words;
};

// A rank's outputs: one offset per field of MOONEP_PLAN_FIELDS
// (moonep/impl/plan_fields.hpp), named as the field.
struct OutLayout {
#define MOONEP_OUT_LAYOUT_OFFSET(name, ...) std::int64_t name;
  MOONEP_PLAN_FIELDS(MOONEP_OUT_LAYOUT_OFFSET)
#undef MOONEP_OUT_LAYOUT_OFFSET
  std::int64_t entries;  // [1] the step's N_r = s_r*K (DeviceRankPlan::entries)
  std::int64_t words;
};

// Errors found in the kernel. Keys are (rank << 32) | index, minimum wins,
// so the report names the first bad entry of the lowest rank.
struct DeviceStatus {
  unsigned long long bad_entry;  // routing[rank][index] not in [0, E)
  unsigned long long bad_tpe;    // tokens_per_expert[rank][e] != count
  unsigned long long bad_count;  // tokens_per_rank[rank] not in [0, S] (index 0); the rank planned 0 tokens
  unsigned int internal;         // a guard that should never fire
  // Bit (1 << Ctrl) for each cross-rank counter a block of this launch
  // gave up on after timeout_ns: the step is void, and the host resets
  // the counters before the next one (no arrival is ever waited for
  // without bound, so a rank that never comes cannot hang the others).
  unsigned int late;
};

// A block's tables (block_tables.hpp), in int32 words from the start of
// its dynamic shared memory or of its slice of the global tables: placed
// once by the host (table_layout.hpp; carved on the device, that layout's
// 64-bit arithmetic was some 200 instructions on every block's way to its
// first routing loads).
struct TableRegions {
#define MOONEP_TABLE_REGION_OFFSET(name, ...) int name;
  MOONEP_BLOCK_TABLES(MOONEP_TABLE_REGION_OFFSET, MOONEP_TABLE_REGION_OFFSET)
#undef MOONEP_TABLE_REGION_OFFSET
};

struct KernelParams {
  int R, E, K, S, B, tp, epn, N, NvS;
  int bpr;          // blocks per rank (group)
  int nworkers;     // blocks per rank that own entries (all but block 0 when bpr > 1)
  int rank_base;    // rank of group 0 of this launch
  int groups;       // ranks in this launch (R: virtual ranks; 1: a GPU world's rank)
  int block_tokens; // most tokens a block owns: ceil(S / nworkers)
  int sys_scope;    // 1: ranks may be separate GPUs (system-scope sync); 0: virtual ranks
  // Longest wait for another rank's arrival (ns, %globaltimer): a block
  // that waits longer records the counter in DeviceStatus::late and ends
  // without storing anything more. Always set (never unbounded).
  unsigned long long timeout_ns;
  unsigned long long tp_magic;  // pad_to's divisor: floor((2^64 - 1) / tp) + 1, 0 for tp = 1
  std::int32_t* sym_base;
  std::int64_t sym_stride;
  std::int32_t* loc_base;
  std::int64_t loc_stride;
  std::int32_t* out_base;
  std::int64_t out_stride;
  SymLayout sym;
  LocLayout loc;
  OutLayout out;
  TableRegions tables;
  std::int64_t table_words;  // one block's global tables (the shared-tables kernel: 0)
  DeviceStatus* status;
  unsigned long long* trace;  // null, or [blocks][kTracePoints] globaltimer stamps
  const std::int32_t* routing[kMaxGroups];  // per group: the rank's expert ids (s_r*K of them, room for S*K)
  const std::int32_t* tpe[kMaxGroups];
  // Per group: null (the rank holds S tokens) or a device pointer to its
  // token count s_r, read when the kernel runs (a ragged step).
  const std::int32_t* counts[kMaxGroups];
  // Per group: the tokens its routing holds room for (at most S): a count
  // above it is refused like one outside 0..S, so the kernel never reads
  // past the caller's routing, whatever the count.
  int routing_tokens[kMaxGroups];
  // The symmetric part of every rank's chunk at once (the same offsets as
  // sym_base's): an NVLink multicast mapping, or null for unicast.
  std::int32_t* mc_sym;
};
// Kernel parameters are passed by value: 4 KiB is the limit every CUDA
// version and architecture takes.
static_assert(sizeof(KernelParams) <= 4096, "KernelParams must fit the 4 KiB kernel parameter space");

// Row stride of acum [E][stride]: odd, so that lookups of 32 random
// experts spread over the shared-memory banks (8-way conflicts at R = 8
// with stride R).
constexpr int acum_stride(int R) { return R | 1; }

// First step of the destination search (step 6): the largest power of two
// <= R - 1, 0 at R = 1. The search counts the ranks d with acum[e][d] <= G;
// acum[e][R-1] is e's total, above every G, so only d <= R - 1 need testing
// (a quarter of the search at R = 8).
constexpr int search_top(int R) {
  int top = 0;
  if (R > 1) {
    top = 1;
    while (2 * top <= R - 1) top *= 2;
  }
  return top;
}

}  // namespace moonep::cuda::impl
