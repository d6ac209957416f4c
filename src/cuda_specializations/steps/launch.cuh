// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: a planning block's view of the launch, shared by every step
// (steps/*.cuh) and the schedule (plan_step_kernel.cu): which rank and
// tokens it holds, where the symmetric buffer, its scratch and the outputs
// are, error recording and the debug trace. Included by .cu files only;
// everything has internal linkage.
#pragma once

#include <climits>
#include <cstdint>

#include "../kernel_params.hpp"
#include "../sync_primitives.cuh"

// Before a loop of code that runs once per launch (most of the planning
// kernel): keep it rolled. The kernel runs once per step and is more code
// than an SM's instruction cache holds, so what it executes is fetched
// anew at each launch; a loop unrolled for a trip count it rarely reaches
// (one or two trips at the headline) costs fetch time and gains nothing.
#define MOONEP_ROLLED _Pragma("unroll 1")

namespace moonep::cuda::impl {
namespace {

using i64 = long long;

struct Block {
  const KernelParams& p;
  int g, lb, rank, tid, lane, warp;
  unsigned epoch;
  // A launch of a GPU world's rank (plan_kernel_*_world), a compile-time
  // constant of each kernel: only such a launch may run beside another
  // rank's previous step or use NVLink multicast. The virtual-rank kernels
  // compile none of that code: the kernel is fetched anew at every launch
  // (see MOONEP_ROLLED), so code a launch never runs still costs it time.
  bool world;

  // The GPU world's multicast mapping of the symmetric buffer, or null.
  __device__ std::int32_t* mc() const { return world ? p.mc_sym : nullptr; }

  __device__ std::int32_t* chunk(int r) const { return p.sym_base + r * p.sym_stride; }
  __device__ std::int32_t* loc() const { return p.loc_base + g * p.loc_stride; }
  __device__ std::int32_t* out() const { return p.out_base + g * p.out_stride; }
  // Output buffer of rank r (every rank's outputs are addressable).
  __device__ std::int32_t* out_of(int r) const { return p.out_base + (r - p.rank_base) * p.out_stride; }
  // The copy of the gathered counts and counters this block reads: rank
  // 0's (unicast: everybody adds into rank 0's chunk), or its own rank's
  // (multicast: every addition reaches every chunk).
  __device__ std::int32_t* sym_home() const { return mc() ? chunk(rank) : chunk(0); }
  // Gathered tokens_per_expert [R][E] of a step (its parity), as read.
  __device__ std::int32_t* tpe_all(unsigned step) const {
    return sym_home() + p.sym.tpe_all + static_cast<i64>(step & 1u) * p.sym.tpe_half;
  }
  // The cross-rank counter `which`, as this block arrives at and polls it.
  __device__ RankCounter counter(Ctrl which) const {
    const i64 at = p.sym.ctrl + static_cast<i64>(which) * kCtrlStride;
    unsigned* home = reinterpret_cast<unsigned*>(sym_home() + at);
    if (mc()) return RankCounter{reinterpret_cast<unsigned*>(mc() + at), home, true};
    return RankCounter{home, home, false};
  }
  // Every rank's blocks run as separate launches (a GPU world): a step may
  // begin on this rank while another rank is still finishing the previous
  // one (see plan_step_kernel.cu, the kDone counter).
  __device__ bool separate_launches() const { return world && p.groups < p.R; }
};

__device__ __forceinline__ void record(unsigned long long* word, int rank, i64 index) {
  atomicMin(word, (static_cast<unsigned long long>(rank) << 32) |
                      static_cast<unsigned long long>(static_cast<unsigned>(index)));
}
__device__ __forceinline__ void internal_error(const KernelParams& p) {
  atomicOr(&p.status->internal, 1u);
}
// A block gave up waiting on counter `which`: thread 0 records it; the
// block then ends.
__device__ __forceinline__ void record_late(const KernelParams& p, Ctrl which) {
  if (threadIdx.x == 0) atomicOr(&p.status->late, 1u << which);
}

__device__ __forceinline__ void trace_point(const KernelParams& p, int k) {
  if (p.trace && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    p.trace[static_cast<i64>(blockIdx.x) * kTracePoints + k] = t;
  }
}
// The SM a block runs on (slot kTracePoints - 3), to see co-residency.
__device__ __forceinline__ void trace_sm(const KernelParams& p) {
  if (p.trace && threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    p.trace[static_cast<i64>(blockIdx.x) * kTracePoints + kTracePoints - 3] = id;
  }
}
// SM clock stamps (kTracePoints-2: start, kTracePoints-1: end) so the
// benchmark can report the clock the step ran at.
__device__ __forceinline__ void trace_clock(const KernelParams& p, int k) {
  if (p.trace && threadIdx.x == 0) {
    p.trace[static_cast<i64>(blockIdx.x) * kTracePoints + k] = clock64();
  }
}

// Entry of the kernel: the debug stamps, the issue of this rank's epoch
// load (the value is needed only after C1, so its latency overlaps it;
// share_epoch() hands it to the block later) and the block's view of the
// launch.
struct Entry {
  Block b;
  unsigned epoch_now;  // thread 0's load of the rank's epoch; 0 elsewhere
};
__device__ __forceinline__ Entry enter_kernel(const KernelParams& p, bool world) {
  trace_clock(p, kTracePoints - 2);
  trace_sm(p);
  const int g = blockIdx.x / p.bpr;
  const unsigned epoch_now =
      threadIdx.x == 0 ? *reinterpret_cast<volatile unsigned*>(p.loc_base + g * p.loc_stride + p.loc.epoch) : 0u;
  return Entry{Block{p, g, static_cast<int>(blockIdx.x % p.bpr), p.rank_base + g, static_cast<int>(threadIdx.x),
                     static_cast<int>(threadIdx.x & 31), static_cast<int>(threadIdx.x >> 5), 0u, world},
               epoch_now};
}

// The launch's dynamic shared memory as int32 words (16-byte aligned).
__device__ __forceinline__ int* dynamic_smem() {
  extern __shared__ int4 smem4[];
  return reinterpret_cast<int*>(smem4);
}

// Thread 0's epoch (enter_kernel) to every thread of the block; a block
// barrier.
__device__ __forceinline__ unsigned share_epoch(unsigned epoch_now) {
  __shared__ unsigned s_epoch;
  if (threadIdx.x == 0) s_epoch = epoch_now;
  __syncthreads();
  return s_epoch;
}

// round_up(count, tp) for 0 <= count < 2^31. The quotient is a multiply by
// the host's tp_magic = floor((2^64 - 1) / tp) + 1 (0 for tp = 1), exact
// for every 32-bit dividend and tp < 2^31 (the error term stays below
// 2^-32 < 1/tp): a few instructions where a division by a runtime value
// is about twenty, and the kernel inlines it in many places of code that
// runs once per launch, where its size is fetch time.
__device__ __forceinline__ int pad_to(const KernelParams& p, int count) {
  if (count <= 0) return 0;
  const unsigned n = static_cast<unsigned>(count) + static_cast<unsigned>(p.tp - 1);
  const unsigned q = p.tp_magic ? static_cast<unsigned>(__umul64hi(n, p.tp_magic)) : n;
  return static_cast<int>(q) * p.tp;
}

// ---- Which tokens a block and each of its warps own ------------------------------
// The first bpr - nworkers blocks of a rank own none (they store the
// rank's layout instead). The rank's s_r tokens (S, or its count in device
// memory) are split evenly over the workers.
struct Slice {
  bool worker;
  int w;          // worker index
  i64 tok0, tok1; // tokens of this block
  i64 ws0, ws1;   // entries of this warp
};

// First entry of warp w's share of the block's slice (w = kWarps: the end).
__device__ __forceinline__ i64 warp_entries_begin(const Slice& s, int K, int w) {
  const i64 e0 = s.tok0 * K, n = (s.tok1 - s.tok0) * K;
  return e0 + n * w / kWarps;
}

// Group g's token count as read: S, or the count in device memory for a
// ragged step; -1 for a count outside 0..S or above the tokens its routing
// holds (routing_tokens <= S).
__device__ __forceinline__ int read_count(const KernelParams& p, int g) {
  const std::int32_t* c = p.counts[g];
  if (!c) return p.S;
  const int s = *c;
  return s >= 0 && s <= p.routing_tokens[g] ? s : -1;
}

// This rank's token count (read_count). A bad count is recorded
// (the host names it) and the rank plans no tokens: nothing is read or
// written out of bounds, and every block of the rank agrees, so the step
// still completes.
__device__ __forceinline__ int rank_tokens(const Block& b) {
  const int s = read_count(b.p, b.g);
  if (s >= 0) return s;
  if (b.tid == 0) record(&b.p.status->bad_count, b.rank, 0);
  return 0;
}

__device__ Slice slice_of(const Block& b) {
  const KernelParams& p = b.p;
  const int lead = p.bpr - p.nworkers;
  Slice s;
  s.worker = b.lb >= lead;
  s.w = b.lb - lead;
  if (!s.worker) {
    s.tok0 = s.tok1 = s.ws0 = s.ws1 = 0;
    return s;
  }
  const int S = rank_tokens(b);
  // In 32 bits where (w + 1) * S fits, as it does at any real size: a
  // 64-bit division is a long subroutine, and this is on every worker's
  // way to its first routing loads.
  const unsigned long long end = static_cast<unsigned long long>(s.w + 1) * static_cast<unsigned>(S);
  if (end <= 0xffffffffull) {
    const unsigned nw = static_cast<unsigned>(p.nworkers);
    s.tok0 = static_cast<unsigned>(s.w) * static_cast<unsigned>(S) / nw;
    s.tok1 = static_cast<unsigned>(end) / nw;
  } else {
    s.tok0 = static_cast<i64>(s.w) * S / p.nworkers;
    s.tok1 = static_cast<i64>(s.w + 1) * S / p.nworkers;
  }
  s.ws0 = warp_entries_begin(s, p.K, b.warp);
  s.ws1 = warp_entries_begin(s, p.K, b.warp + 1);
  return s;
}

}  // namespace
}  // namespace moonep::cuda::impl
