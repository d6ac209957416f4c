// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The floors a planning step is measured against (perf_tests/gpu_bench.cu),
// launched with the planning kernel's grid, block size and shared memory:
// - empty_kernel: an empty cooperative launch, what any one-launch planner
//   pays before doing anything;
// - barrier_floor_kernel: that launch plus the least any planner of
//   docs/spec/planning.md's steps must do in it. Step 1 needs every rank's counts, so
//   every block reads routing and all blocks pass one barrier before any
//   plan exists: here each thread loads one routing word of its rank, the
//   block arrives at one counter (release) and waits for all the others
//   (acquire polls, as the planning kernel's barrier), and stores one
//   word. No planner that meets the spec in one launch can be faster than
//   this; the benchmark prints it beside the step so the "<= 3x the floor"
//   goal can be read against what is reachable at all.
#include "kernel_params.hpp"
#include "sync_primitives.cuh"

namespace moonep::cuda::impl {

__global__ void empty_kernel() {}

// `bar`: one word, zero before the first launch: grid_sync's
// self-resetting barrier over the whole grid, polled with acquire loads.
// `sink[blockIdx.x]`: what the block's loads saw, so they cannot be
// optimised away.
__global__ void MOONEP_KERNEL_BOUNDS barrier_floor_kernel(const __grid_constant__ KernelParams p, unsigned* bar,
                                                          int* sink) {
  const int rank = static_cast<int>(blockIdx.x) / p.bpr, lb = static_cast<int>(blockIdx.x) % p.bpr;
  const long long n = static_cast<long long>(p.S) * p.K;
  const long long i = static_cast<long long>(lb) * kThreads + threadIdx.x;
  const int v = i < n ? p.routing[rank][i] : 0;
  const int seen = __syncthreads_count(v >= 0);  // every thread's load has arrived
  if (threadIdx.x == 0) {
    const unsigned old = generation_arrive(bar, gridDim.x, blockIdx.x == 0);
    while (!generation_passed(old, ld_acquire_gpu(bar))) {
    }
    sink[blockIdx.x] = seen;
  }
}

}  // namespace moonep::cuda::impl
