// Private: the synchronisation the planning kernel is built on.
// - grid_sync: a software barrier over the blocks of ONE rank (one group of
//   the cooperative launch). Self-resetting: every block adds to one word,
//   the first block adds 2^31 - (n-1) so the total per round is exactly
//   2^31 and the top bit (the generation) flips; no host reset between
//   launches, no host round trip.
// - rank counters: monotonically increasing arrival counters in the
//   symmetric buffer, compared against (epoch+1)*arrivals with wrap-around
//   arithmetic, written with system-scope release and read with
//   system-scope acquire so they work across GPUs as well as across groups.
//   Every wait on them is bounded (KernelParams::timeout_ns): ranks meet
//   only here, and a rank that never launches must not hang the others.
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

// Polling reads: relaxed (an acquire per poll would also invalidate the
// SM's L1 each time, under the feet of co-resident blocks doing real work);
// the waiter issues one fence after the condition holds. A block alone on
// its SM polls with acquire loads instead (poll_counter_acquire).
__device__ __forceinline__ unsigned ld_relaxed_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned ld_relaxed_sys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
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

__device__ __forceinline__ void st_release_gpu(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Cross-rank operations take `sys`: true when ranks are separate GPUs
// (system scope, NVLink), false for virtual ranks of one GPU, where the
// cheaper GPU scope is enough.
__device__ __forceinline__ void fence_for(bool sys) {
  if (sys) __threadfence_system(); else __threadfence();
}
__device__ __forceinline__ void red_release(bool sys, unsigned* p, unsigned v) {
  if (sys) red_release_sys(p, v); else red_release_gpu(p, v);
}
__device__ __forceinline__ unsigned ld_acquire(bool sys, const unsigned* p) {
  return sys ? ld_acquire_sys(p) : ld_acquire_gpu(p);
}

// Acquire side after a relaxed poll: orders the waiter's later reads after
// what the arrivals released. fence.acq_rel is all the release/acquire
// pattern needs; __threadfence() is fence.sc, a heavier full barrier.
__device__ __forceinline__ void fence_acquire(bool sys) {
  if (sys) asm volatile("fence.acq_rel.sys;" ::: "memory");
  else asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

// Barrier over the `nblocks` blocks of this rank. `first` is true for
// exactly one of them. The release of the arrival (after __syncthreads)
// publishes the whole block's writes; no separate fence before it.
// A block that needs nothing the others wrote passes wait = false: it
// arrives (the round still completes) and goes on at once.
// One block's arrival at grid_sync's self-resetting barrier word (`first`
// for exactly one of the nblocks blocks), a release; returns the word
// before it, which generation_passed compares later loads against.
__device__ __forceinline__ unsigned generation_arrive(unsigned* bar, unsigned nblocks, bool first) {
  const unsigned inc = first ? (0x80000000u - (nblocks - 1u)) : 1u;
  return atom_add_release_gpu(bar, inc);
}
// True once the barrier word `now` is in the next generation from `old`.
__device__ __forceinline__ bool generation_passed(unsigned old, unsigned now) {
  return ((old ^ now) & 0x80000000u) != 0u;
}

__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned nblocks, bool first, bool wait = true) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = generation_arrive(bar, nblocks, first);
    if (wait) {
      while (!generation_passed(old, ld_relaxed_gpu(bar))) {
      }
      fence_acquire(false);
    }
  }
  __syncthreads();
}

// Every thread of the block calls; thread t < ndest adds one arrival to
// counter(t), a release that publishes the whole block's writes (they are
// ordered before it by the __syncthreads).
template <class CounterOf>
__device__ __forceinline__ void arrive_all(bool sys, int ndest, CounterOf counter) {
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < ndest) {
    if (sys) __threadfence_system();
    red_release(sys, counter(static_cast<int>(threadIdx.x)), 1u);
  }
}

__device__ __forceinline__ void arrive_one(bool sys, unsigned* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    if (sys) __threadfence_system();
    red_release(sys, counter, 1u);
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
// what the arrivals released, with no fence (wait_counter below polls
// relaxed and fences once). Each load also invalidates the SM's L1, so
// only for a block that runs alone on its SM (the replicated kernel's,
// launched one block per SM; the rank-0 kernel's blocks may share SMs).
// False after timeout_ns: the caller records it and ends the block.
__device__ __forceinline__ bool poll_counter_acquire(bool sys, const unsigned* counter, unsigned target,
                                                     unsigned long long timeout_ns) {
  return spin_until([&] { return ld_acquire(sys, counter); }, target, timeout_ns);
}

// Waits until *counter has reached target (mod 2^32); the whole block
// continues afterwards. Returns the same to every thread of the block:
// true, or false when thread 0 gave up after timeout_ns (the caller then
// records the counter and the block ends, storing nothing more).
__device__ __forceinline__ bool wait_counter(bool sys, const unsigned* counter, unsigned target,
                                             unsigned long long timeout_ns) {
  int late = 0;
  if (threadIdx.x == 0) {
    late = !spin_until([&] { return sys ? ld_relaxed_sys(counter) : ld_relaxed_gpu(counter); }, target, timeout_ns);
    fence_acquire(sys);  // later reads see what the arrivals released
  }
  return __syncthreads_or(late) == 0;
}

}  // namespace moonep::cuda::impl
