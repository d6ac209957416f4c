// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench_access.hpp's FloorLaunches: the floor kernels launched with a
// planner's shape (the moonep_cuda_bench library).
#include <string>

#include "bench_access.hpp"
#include "launch_setup.hpp"
#include "moonep/error.hpp"

namespace moonep::cuda::impl {

__global__ void empty_kernel();
__global__ void barrier_floor_kernel(const __grid_constant__ KernelParams p, unsigned* bar, int* sink);

FloorLaunches::FloorLaunches(VirtualRankPlanner& planner) : planner_(planner) {
  const LaunchView v = PlannerAccess::launch(planner_);
  // The floors take the planning kernel's dynamic shared memory: without
  // the opt-in above 48 KiB their cooperative launch fails.
  for (const void* f : {reinterpret_cast<const void*>(empty_kernel), reinterpret_cast<const void*>(barrier_floor_kernel)}) {
    check_cuda(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(v.smem)),
               "cudaFuncSetAttribute");
  }
  const std::size_t bytes = (4 + static_cast<std::size_t>(v.blocks)) * 4;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&words_), bytes), "allocating the barrier floor's words");
  check_cuda(cudaMemset(words_, 0, bytes), "allocating the barrier floor's words");
}

FloorLaunches::~FloorLaunches() { cudaFree(words_); }

void FloorLaunches::launch_empty(cudaStream_t stream) {
  const LaunchView v = PlannerAccess::launch(planner_);
  launch_cooperative(reinterpret_cast<const void*>(empty_kernel), v.blocks, v.smem, nullptr, stream,
                     "launching the empty kernel");
}

void FloorLaunches::launch_barrier_floor(const std::int32_t* const* d_routing, cudaStream_t stream) {
  const LaunchView v = PlannerAccess::launch(planner_);
  const char* who = "moonep::cuda::impl::FloorLaunches::launch_barrier_floor";
  if (!d_routing) throw InputError(std::string(who) + ": d_routing is null");
  KernelParams p = *v.params;
  for (int r = 0; r < p.R; ++r) {
    if (!d_routing[r]) throw InputError(std::string(who) + ": d_routing[" + std::to_string(r) + "] is null");
    p.routing[r] = d_routing[r];
  }
  unsigned* bar = reinterpret_cast<unsigned*>(words_);
  int* sink = words_ + 4;
  void* args[] = {&p, &bar, &sink};
  launch_cooperative(reinterpret_cast<const void*>(barrier_floor_kernel), v.blocks, v.smem, args, stream,
                     "launching the barrier floor kernel");
}

}  // namespace moonep::cuda::impl
