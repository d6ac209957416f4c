// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the synchronisation the planning kernel is built on.
// - rank counters: monotonically increasing arrival counters in the
//   symmetric buffer, compared against (epoch+1)*arrivals with wrap-around
//   arithmetic, written with system-scope release and read with
//   system-scope acquire so they work across GPUs as well as across groups.
//   Every wait on them is bounded (KernelParams::timeout_ns): ranks meet
//   only here, and a rank that never launches must not hang the others.
//   With NVLink multicast an arrival is one multimem.red into every rank's
//   copy of the counter, and each rank polls its own copy.
// - the generation barrier (generation_arrive / generation_passed): a
//   self-resetting barrier word, for the benchmark's barrier floor.
#pragma once

#include <cstdint>

namespace moonep::cuda::impl {

__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned ld_acquire_sys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned atom_add_release_gpu(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;"
               : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ void red_release_sys(unsigned* p, unsigned v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void red_release_gpu(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Cross-rank operations take `sys`: true when ranks are separate GPUs
// (system scope, NVLink), false for virtual ranks of one GPU, where the
// cheaper GPU scope is enough.
__device__ __forceinline__ void red_release(bool sys, unsigned* p, unsigned v) {
  if (sys) red_release_sys(p, v); else red_release_gpu(p, v);
}
__device__ __forceinline__ unsigned ld_acquire(bool sys, const unsigned* p) {
  return sys ? ld_acquire_sys(p) : ld_acquire_gpu(p);
}

// One block's arrival at a self-resetting barrier word (`first` for
// exactly one of the nblocks blocks: it adds 2^31 - (n-1), the others 1, so
// every round adds exactly 2^31 and flips the top bit, the generation), a
// release; returns the word before it, which generation_passed compares
// later loads against. No host reset between launches.
__device__ __forceinline__ unsigned generation_arrive(unsigned* bar, unsigned nblocks, bool first) {
  const unsigned inc = first ? (0x80000000u - (nblocks - 1u)) : 1u;
  return atom_add_release_gpu(bar, inc);
}
// True once the barrier word `now` is in the next generation from `old`.
__device__ __forceinline__ bool generation_passed(unsigned old, unsigned now) {
  return ((old ^ now) & 0x80000000u) != 0u;
}

// NVLink multicast (sm_90): one operation on a multicast address reaches
// every rank's copy. Counts are added relaxed; an arrival is a release.
// The same memory is also written and read through its unicast alias (a
// rank zeroes and reads its own copy), so the arrival is fenced on both
// sides with fence.proxy.alias, which orders accesses to one location
// through different virtual addresses.
__device__ __forceinline__ void multimem_add_relaxed(std::int32_t* mc, int v) {
  asm volatile("multimem.red.relaxed.sys.global.add.u32 [%0], %1;" ::"l"(mc), "r"(v) : "memory");
}
__device__ __forceinline__ void multimem_arrive_release(unsigned* mc) {
  asm volatile("fence.proxy.alias;" ::: "memory");
  asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" ::"l"(mc), "r"(1u) : "memory");
  asm volatile("fence.proxy.alias;" ::: "memory");
}

// A cross-rank counter as a block uses it: where it arrives (rank 0's
// counter, or every rank's copy through the multicast mapping) and where
// it polls (rank 0's, or its own rank's copy).
struct RankCounter {
  unsigned* arrive_at;
  const unsigned* poll_at;
  bool multicast;
};

// Every thread of the block calls; thread 0 adds one arrival, a release
// that publishes the whole block's writes (ordered before it by the
// __syncthreads).
__device__ __forceinline__ void arrive_one(bool sys, const RankCounter& c) {
  __syncthreads();
  if (threadIdx.x == 0) {
    if (c.multicast) {
      multimem_arrive_release(c.arrive_at);
    } else {
      if (sys) __threadfence_system();
      red_release(sys, c.arrive_at, 1u);
    }
  }
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until load() has reached target (mod 2^32): true, or false once
// timeout_ns have passed without it (another rank never came). The clock
// is read only every 64 polls and not at all when the first poll
// succeeds, so a wait that is met costs what the unbounded spin did.
template <class Load>
__device__ __forceinline__ bool spin_until(Load load, unsigned target, unsigned long long timeout_ns) {
  if (static_cast<int>(load() - target) >= 0) return true;
  const unsigned long long start = global_ns();
  for (unsigned n = 1;; ++n) {
    if (static_cast<int>(load() - target) >= 0) return true;
    if ((n & 63u) == 0u && global_ns() - start > timeout_ns) return false;
  }
}

// The calling thread spins until *counter has reached target (mod 2^32),
// with acquire loads: once it returns true, the thread's later reads see
// what the arrivals released, with no fence. Each load also invalidates
// the SM's L1, which is why the planning blocks run one per SM: a block
// alone on its SM costs no other block anything by polling this way (with
// co-resident blocks doing real work, relaxed polls and one fence after
// would be the better choice). False after timeout_ns: the caller records
// it and ends the block.
__device__ __forceinline__ bool poll_counter_acquire(bool sys, const unsigned* counter, unsigned target,
                                                     unsigned long long timeout_ns) {
  return spin_until([&] { return ld_acquire(sys, counter); }, target, timeout_ns);
}

}  // namespace moonep::cuda::impl
