// Private: what the host tells the planning kernel. Plain C++ (no CUDA
// headers needed) so the host side that computes layouts compiles anywhere.
//
// Three kinds of memory, all addressed as int32 words:
// - the symmetric buffer: one chunk per rank at sym_base + rank*sym_stride.
//   Anything another rank writes into (gathered tpe, broadcast tables,
//   src_info, dup structures, barrier counters) lives here.
// - rank-private scratch: loc_base + rank*loc_stride (grid barrier word,
//   epoch, per-block histograms, per-entry ranks, rank 0's planning tables).
// - outputs: out_base + rank*out_stride.
// Every offset is a multiple of 4 words, so 16-byte vector access is legal
// wherever a length is a multiple of 4 too.
#pragma once

#include <cstdint>

#include "moonep/impl/plan_fields.hpp"

namespace moonep::cuda::impl {

// Threads per block, and the register cap per thread both kernels are
// compiled with (__maxnreg__): 512 threads (the fastest of 256, 384, 512
// and 1024 on an H200) at 96 registers (the replicated kernel needs 94;
// lower caps spill and were slower, a higher one changes nothing). The
// tuning policy, as build-time knobs for measuring other shapes
// (docs/design/cuda_planner.md).
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
inline constexpr int kThreads = MOONEP_CUDA_BLOCK_THREADS;  // threads per block
// The replicated kernel runs at most this many blocks per SM: its blocks
// all plan the step redundantly and read the same gathered counts, so two
// of them on one SM compete for it and were slower than one block per SM
// with half as many blocks.
inline constexpr int kReplicatedBlocksPerSM = 1;
static_assert(kThreads % 32 == 0 && kThreads >= 128 && kThreads <= 1024, "threads per block");
// Only 512 threads (the default) passes every GPU unit test. At 1024
// threads the rank-0 kernel needs more shared memory per block (278656
// bytes for R=32 E=2048, over the H200's 232432), so the test that expects
// it to take that shape gets the planner's refusal instead (every plan it
// did compute matched the reference). Other shapes are for measurement,
// behind an explicit opt-in.
#if MOONEP_CUDA_BLOCK_THREADS != 512 && !defined(MOONEP_CUDA_UNVERIFIED_SHAPE)
#error "MOONEP_CUDA_BLOCK_THREADS other than 512 is unverified: define MOONEP_CUDA_UNVERIFIED_SHAPE to build it for measurement"
#endif
static_assert(MOONEP_CUDA_MAX_REGS >= 24 && MOONEP_CUDA_MAX_REGS <= 255 &&
                  MOONEP_CUDA_BLOCK_THREADS * MOONEP_CUDA_MAX_REGS <= 65536,
              "MOONEP_CUDA_BLOCK_THREADS * MOONEP_CUDA_MAX_REGS must fit an SM's 65536 registers");
inline constexpr int kWarps = kThreads / 32;  // warps per block
inline constexpr int kMaxGroups = 128;        // ranks in one launch
inline constexpr int kTileEntries = 4096;     // Phase C2 tile (entries)
inline constexpr int kUnroll = 5;             // entries in flight per thread (one batch per C2 tile at the headline)
inline constexpr int kTracePoints = 24;       // stamps per block (debug trace; last two: SM clock)
inline constexpr int kCtrlStride = 32;        // words between counters (own 128B line)

// Counters at the start of every chunk, kCtrlStride words apart.
enum Ctrl : int {
  kGather = 0,    // rank 0's: one arrival per block of every rank per step
  kTables = 1,    // one arrival per rank (its block 0, steps 4-5 done) per step
  kAcum = 2,      // one arrival per step: steps 1-3 done, acum and cum out
  kNumCtrl = 3
};

// Virtual ranks: only rank 0's chunk holds tables (every rank reads them);
// every chunk holds its counters.
struct SymLayout {
  std::int64_t ctrl, tpe_all, tpe_half, acum, eoff, cum;
  std::int64_t words;  // chunk size
};

struct LocLayout {
  std::int64_t gbar, epoch, hist, pos, alloc, cand, ncand;
  std::int64_t words;
};

// A rank's outputs: one offset per field of MOONEP_PLAN_FIELDS
// (moonep/impl/plan_fields.hpp), named as the field.
struct OutLayout {
#define MOONEP_OUT_LAYOUT_OFFSET(name, ...) std::int64_t name;
  MOONEP_PLAN_FIELDS(MOONEP_OUT_LAYOUT_OFFSET)
#undef MOONEP_OUT_LAYOUT_OFFSET
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

// The replicated kernel's shared-memory regions, in int32 words from the
// start of its dynamic shared memory (replicated_layout.hpp's layout, which
// the host computes once: carved on the device, that layout's 64-bit
// arithmetic was some 200 instructions on every block's way to its first
// routing loads).
struct ReplicatedRegions {
  int ent, pos, sorted, sexp, dd, mask, base, key, rem, bb, hist, acum, cand, cslot, etc, mark, peer, small, sip;
};

struct KernelParams {
  int R, E, K, S, B, tp, epn, N, NvS;
  int bpr;         // blocks per rank (group)
  int nworkers;    // blocks per rank that own entries (all but block 0 when bpr > 1)
  int rank_base;   // rank of group 0 of this launch
  int groups;      // ranks in this launch
  int tile_tokens; // Phase C2 tokens per tile (rank-0 kernel)
  int block_tokens;// most tokens a block owns (replicated kernel: ceil(S / bpr))
  int sys_scope;   // 1: ranks are separate GPUs (system-scope sync); 0: virtual ranks
  // Longest wait for another rank's arrival (ns, %globaltimer): a block
  // that waits longer records the counter in DeviceStatus::late and ends
  // without storing anything more. Always set (never unbounded).
  unsigned long long timeout_ns;
  unsigned long long tp_magic;  // pad_to's divisor: floor((2^64 - 1) / tp) + 1, 0 for tp = 1
  int stage_tables;// 1: C2 copies acum/eoff/cum into shared memory first
  std::int32_t* sym_base;
  std::int64_t sym_stride;
  std::int32_t* loc_base;
  std::int64_t loc_stride;
  std::int32_t* out_base;
  std::int64_t out_stride;
  SymLayout sym;
  LocLayout loc;
  OutLayout out;
  ReplicatedRegions repl;  // the replicated kernel only
  DeviceStatus* status;
  unsigned long long* trace;  // null, or [blocks][kTracePoints] globaltimer stamps
  const std::int32_t* topk[kMaxGroups];
  const std::int32_t* tpe[kMaxGroups];
  // Per group: null (the rank holds S tokens) or a device pointer to its
  // token count s_r, read when the kernel runs (a ragged step).
  const std::int32_t* counts[kMaxGroups];
  // The symmetric part of every rank's chunk at once (the same offsets as
  // sym_base's): an NVLink multicast mapping, or null for unicast.
  std::int32_t* mc_sym;
};

// Row stride of acum [E][stride] in shared memory: odd, so that lookups of
// 32 random experts spread over the banks (8-way conflicts at R = 8 with
// stride R).
constexpr int acum_stride(int R) { return R | 1; }

// First step of the replicated kernel's destination search: the largest
// power of two <= R - 1, 0 at R = 1. The search counts the ranks d with
// acum[e][d] <= G; acum[e][R-1] is e's total, above every G, so only
// d <= R - 1 need testing (a quarter of the search at R = 8).
constexpr int search_top(int R) {
  int top = 0;
  if (R > 1) {
    top = 1;
    while (2 * top <= R - 1) top *= 2;
  }
  return top;
}

// Dynamic shared memory each kernel needs for a problem (bytes).
std::int64_t shared_bytes(int R, int E, int B, int tile_tokens, bool stage_tables);     // plan_kernel
std::int64_t replicated_shared_bytes(int R, int E, int B, int K, int block_tokens);   // replicated

}  // namespace moonep::cuda::impl
