// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what both hosts of the planning kernels share, the virtual-rank
// VirtualRankPlanner (cuda_planner.cu: R ranks in one launch) and the GpuWorld
// (gpu_world/gpu_world.cu: one launch per rank): which kernel runs a shape with how
// many blocks, the chunk layouts and scalars of KernelParams, the
// cooperative launch, and turning a DeviceStatus into the exception the
// user sees.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <vector>

#include "moonep/config.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/host_plan.hpp"
#include "host_checks.hpp"
#include "kernel_params.hpp"

namespace moonep::cuda::impl {

// The planning kernels (plan_step_kernel.cu): shared or global tables, for
// virtual ranks (every rank in one launch) or for one rank of a GPU world
// (one launch per rank; the only ones with the code a world needs: the
// wait for the previous step's end on every rank, NVLink multicast).
__global__ void plan_kernel_shared_tables(const __grid_constant__ KernelParams p);
__global__ void plan_kernel_global_tables(const __grid_constant__ KernelParams p);
__global__ void plan_kernel_shared_tables_world(const __grid_constant__ KernelParams p);
__global__ void plan_kernel_global_tables_world(const __grid_constant__ KernelParams p);

// Who launches the kernel: the virtual-rank VirtualRankPlanner (one launch holds
// every rank) or a GpuWorld (one launch per rank).
enum class Launches { one_for_all_ranks, one_per_rank };

// The status a launch starts from (no bad entry, nothing late).
inline constexpr DeviceStatus kCleanStatus{~0ull, ~0ull, ~0ull, 0u, 0u};
inline bool status_clean(const DeviceStatus& s) {
  return s.bad_entry == ~0ull && s.bad_tpe == ~0ull && s.bad_count == ~0ull && s.internal == 0 && s.late == 0;
}

// The kernel and grid of every rank's part of a step.
struct LaunchChoice {
  Kernel kernel = Kernel::global_tables;
  const void* func = nullptr;
  int bpr = 0;           // blocks per rank
  std::int64_t smem = 0; // dynamic shared memory per block (bytes)
  int nworkers = 1;      // blocks per rank that own entries
  int tile_tokens = 1;   // the rank-0 kernel's C2 tile
  bool stage_tables = false;
};

// Picks the kernel (options.kernel, or the replicated one whenever it
// fits) and the largest blocks per rank <= options.blocks_per_rank for
// which `resident_ranks` ranks' blocks are all co-resident on `device`
// (the cross-rank waits need every arrival to be running). Throws
// RuntimeError naming the limit when none fits. `who` starts messages.
LaunchChoice choose_launch(const Config& config, const Options& options, int device, int resident_ranks,
                           Launches launches, const char* who);

// Every field of KernelParams that follows from the configuration and the
// choice: sizes, the three chunk layouts, the tables' regions (and with
// global tables each block's slice of the rank's scratch).
// Bases, strides, status, trace and routing are the caller's.
void fill_params(KernelParams& p, const Config& config, const LaunchChoice& choice);

// A cooperative launch of `choice.func` with `blocks` blocks.
void launch_cooperative(const void* func, int blocks, std::int64_t smem, void** args, cudaStream_t stream,
                        const char* what);

// The tokens a routing of `routing_len` ids holds room for, at most S
// (KernelParams::routing_tokens); routing_len < 0: S (room for S*K).
int routing_tokens_of(const Config& config, std::int64_t routing_len);

// A rank's inputs as its last launch read them (device pointers on the
// current device; routing_len < 0: room for S*K ids; count null: S tokens).
struct RankInputs {
  const std::int32_t* routing = nullptr;
  std::int64_t routing_len = -1;
  const std::int32_t* tpe = nullptr;
  const std::int32_t* count = nullptr;
};

// The message every planner gives for a rank's bad input
// (validate_rank_input, moonep/reference.hpp: the portable phases' words),
// from the rank's inputs copied back to the host; "" when they are fine.
// Only on the failure path: it copies and waits.
std::string rank_input_error(const Config& config, int rank, const RankInputs& inputs);

// The lowest rank any bad-input key of `st` names; -1 when none does.
int first_bad_rank(const DeviceStatus& st);

// Throws for a launch that ended with `st` (nothing when it is clean):
// InputError with input_error(the lowest bad rank) (rank_input_error, or
// the words another process computed for a rank it holds), RuntimeError
// for a late arrival (late_text says who was missing) or an internal
// inconsistency.
void throw_status(const DeviceStatus& st, const Config& config,
                  const std::function<std::string(int rank)>& input_error, const std::string& late_text);

// Rank plan pointers into a rank's outputs `o` laid out as `out`.
inline DeviceRankPlan device_rank_plan(std::int32_t* o, const OutLayout& out) {
  DeviceRankPlan d{};
#define MOONEP_DEVICE_PLAN_AT(name, ...) d.name = o + out.name;
  MOONEP_PLAN_FIELDS(MOONEP_DEVICE_PLAN_AT)
#undef MOONEP_DEVICE_PLAN_AT
  d.entries = o + out.entries;
  return d;
}

// Every rank's plan from device memory (`before_rank(r)` runs before rank
// r's copies: the GPU world makes r's device current there). With the
// step's counts (checked by the kernel: each in 0..S), rank r's dst is
// cut to its s_r*K entries and the plan carries the counts.
HostPlan copy_plans_out(const Config& config, const std::vector<DeviceRankPlan>& plans,
                        const std::function<void(int rank)>& before_rank,
                        const std::optional<TokensPerRank>& tokens_per_rank = std::nullopt);

// "the counts gather", "the previous step's end" for the bits of
// DeviceStatus::late, joined with "and".
std::string late_counters(unsigned late);

}  // namespace moonep::cuda::impl
