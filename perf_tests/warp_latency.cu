// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep_warp_latency: cycles per step of a dependent chain of the warp
// primitives the planning kernels are built from (one warp, or one block of
// 512 threads for __syncthreads), and the step of %globaltimer, which the
// phase trace of moonep_gpu_bench stamps with. Used to decide between
// warp reductions, shuffles and per-lane registers in the serial parts of
// the planning (perf_tests/README.md). Each figure includes the loop's
// own overhead (a dependent add and a branch), so compare them with each
// other, not with published instruction latencies.
#include <cuda_runtime.h>

#include <cstdio>

namespace {

enum Probe { kRedux, kShfl, kShflMax5, kBallot, kSyncthreads, kReduxPair, kProbes };
const char* const kNames[kProbes] = {"__reduce_max_sync",       "__shfl_xor_sync",
                                     "5-level shuffle max",     "__ballot_sync",
                                     "__syncthreads (512 thr)", "__reduce_max + __reduce_min"};

__global__ void chain(long long* cycles, int steps, int probe) {
  int v = static_cast<int>(threadIdx.x);
  unsigned u = threadIdx.x;
  const long long t0 = clock64();
  for (int i = 0; i < steps; ++i) {
    switch (probe) {
      case kRedux: v = __reduce_max_sync(0xffffffffu, v) + static_cast<int>(threadIdx.x & 1); break;
      case kShfl: v = __shfl_xor_sync(0xffffffffu, v, 1) + 1; break;
      case kShflMax5:
        for (int o = 16; o; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
        v += threadIdx.x & 1;
        break;
      case kBallot: u = __ballot_sync(0xffffffffu, (u >> 3) & 1) + threadIdx.x; break;
      case kSyncthreads: __syncthreads(); v += 1; break;
      default: u = (__reduce_max_sync(0xffffffffu, u) ^ __reduce_min_sync(0xffffffffu, u)) + threadIdx.x;
    }
  }
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[0] = t1 - t0;
  if (v == 0x7fffffff || u == 0xffffffffu) cycles[1] = v;  // keeps the chain alive
}

__global__ void timer_step(unsigned long long* ns) {
  unsigned long long a, b;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(a));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(b));
  } while (b == a);
  *ns = b - a;
}

bool ok(cudaError_t e) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "moonep_warp_latency: %s\n", cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  long long* d = nullptr;
  if (!ok(cudaMalloc(&d, 64))) return 1;
  const int steps = 1000;
  std::printf("dependent chain of %d steps, one launch after a warm-up launch\n", steps);
  for (int probe = 0; probe < kProbes; ++probe) {
    const int threads = probe == kSyncthreads ? 512 : 32;
    long long cycles = 0;
    chain<<<1, threads>>>(d, steps, probe);
    chain<<<1, threads>>>(d, steps, probe);
    if (!ok(cudaMemcpy(&cycles, d, 8, cudaMemcpyDeviceToHost))) return 1;
    std::printf("  %-30s %6.1f cycles per step\n", kNames[probe], static_cast<double>(cycles) / steps);
  }
  unsigned long long ns = 0;
  timer_step<<<1, 1>>>(reinterpret_cast<unsigned long long*>(d));
  if (!ok(cudaMemcpy(&ns, d, 8, cudaMemcpyDeviceToHost))) return 1;
  std::printf("  %%globaltimer step: %llu ns\n", ns);
  cudaFree(d);
  return 0;
}
