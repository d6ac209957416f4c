// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what the benchmark (perf_tests/gpu_bench.cu) and the floor test
// reach that users do not: the planners' launch shape and the phase-trace
// buffer (in libmoonep, for PlannerAccess is a friend of both planners),
// and the floor launches themselves (bench_floors.cu with floor_kernels.cu,
// the moonep_cuda_bench library, not part of libmoonep and not installed).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "moonep/cuda_planner.hpp"
#include "moonep/gpu_world.hpp"
#include "kernel_params.hpp"

namespace moonep::cuda::impl {

// A planner's one launch: its parameters, kernel, blocks and dynamic
// shared memory (valid as long as the planner).
struct LaunchView {
  const KernelParams* params;
  const void* func;
  int blocks;
  std::int64_t smem;
};

struct PlannerAccess {
  static LaunchView launch(VirtualRankPlanner& planner);
  // Profiling only: a device buffer of ranks*blocks_per_rank*kTracePoints
  // uint64 receiving %globaltimer stamps at phase boundaries (thread 0 of
  // every block; the last two words of a block: SM clock64 at its start
  // and end), or null (the default) for none. In a GpuWorld rank r's
  // blocks take the rows from r*blocks_per_rank, and the buffer must be
  // reachable from every rank's device.
  static void set_trace(VirtualRankPlanner& planner, unsigned long long* trace);
  static void set_trace(GpuWorld& world, unsigned long long* trace);
};

// The floors a step is measured against (floor_kernels.cu), with the
// planner's grid, block size and shared memory, on `stream`:
// an empty cooperative launch, and the same launch doing only what no
// one-launch planner can skip (one routing load per thread, one barrier
// over all blocks). FloorLaunches owns the barrier floor's counter words.
class FloorLaunches {
 public:
  explicit FloorLaunches(VirtualRankPlanner& planner);
  ~FloorLaunches();
  FloorLaunches(const FloorLaunches&) = delete;
  FloorLaunches& operator=(const FloorLaunches&) = delete;
  void launch_empty(cudaStream_t stream);
  // InputError for null routing pointers, before anything is launched.
  void launch_barrier_floor(const std::int32_t* const* d_routing, cudaStream_t stream);

 private:
  VirtualRankPlanner& planner_;
  int* words_ = nullptr;  // word 0: the barrier; from word 4, one per block
};

}  // namespace moonep::cuda::impl
