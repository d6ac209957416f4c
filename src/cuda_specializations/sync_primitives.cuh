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

// Barrier over the `nblocks` blocks of this rank. `first` is true for
// exactly one of them.
__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned nblocks, bool first) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned inc = first ? (0x80000000u - (nblocks - 1u)) : 1u;
    __threadfence();
    const unsigned old = atom_add_release_gpu(bar, inc);
    while (((old ^ ld_acquire_gpu(bar)) & 0x80000000u) == 0u) {
    }
    __threadfence();
  }
  __syncthreads();
}

// Every thread of the block calls; thread t < ndest adds one arrival to
// counter(t) after making the whole block's writes visible system-wide.
template <class CounterOf>
__device__ __forceinline__ void arrive_all(int ndest, CounterOf counter) {
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < ndest) {
    __threadfence_system();
    red_release_sys(counter(static_cast<int>(threadIdx.x)), 1u);
  }
}

__device__ __forceinline__ void arrive_one(unsigned* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    red_release_sys(counter, 1u);
  }
}

// Waits until *counter has reached target (mod 2^32); the whole block
// continues afterwards.
__device__ __forceinline__ void wait_counter(const unsigned* counter, unsigned target) {
  if (threadIdx.x == 0) {
    while (static_cast<int>(ld_acquire_sys(counter) - target) < 0) {
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace moonep::cuda::impl
