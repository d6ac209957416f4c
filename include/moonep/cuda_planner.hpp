// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/cuda_planner.hpp — the CUDA specialization: the whole plan of a
// step (docs/spec/planning.md steps 1-8) in ONE cooperative kernel launch, for codes
// that hold their routing in device memory. Only usable when MoonEP was
// built with CUDA (MOONEP_HAVE_CUDA == 1); plain device pointers and a
// cudaStream_t, no Kokkos needed.
//
// Virtual ranks: moonep::cuda::VirtualRankPlanner runs R ranks on one GPU
// as R groups of blocks of one cooperative launch (moonep::Planner, the
// Kokkos door to every path, runs it for Kokkos::Cuda). The groups share one device buffer as the
// "symmetric buffer" (one chunk per rank, back to back) for the gathered
// counts and the release/acquire counters (GPU scope) they synchronise
// through. Every block plans the step (steps 1-5) itself after one barrier
// over all blocks, with its tables in shared memory where they fit and in
// its own slice of global memory otherwise (see Kernel below).
//
// Ragged steps: plan() takes an optional device array of the R token
// counts s_r; the kernel reads it when it runs, so a CUDA graph captured
// once replays steps of any counts.
//
// Broadcast: with virtual ranks every block plans from the gathered counts
// and stores every result straight into the destination rank's output
// buffer; nothing is broadcast, so this planner has no NVLink multicast
// path (the GPU world, moonep/gpu_world.hpp, has one behind an opt-in).
//
// Benchmark hooks (empty and barrier-floor launches, phase traces) are not
// part of this API: perf_tests reaches them through the private
// src/cuda_specializations/bench_access.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "moonep/config.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/impl/plan_fields.hpp"
#include "moonep/moonep_config.hpp"

#if !MOONEP_HAVE_CUDA
#error "moonep/cuda_planner.hpp needs MoonEP built with CUDA (MoonEP_ENABLE_CUDA=ON)"
#endif

namespace moonep::cuda {
namespace impl {
struct PlannerAccess;  // the benchmark's hooks (src/cuda_specializations/bench_access.hpp)
}

// Where the planning kernel keeps each block's tables (the same kernel,
// the same steps and identical plans either way):
// - shared_tables: in the block's shared memory. The fast path; needs the
//   tables (about (2R + 7) * E words) and the block's entries to fit.
// - global_tables: in the block's own slice of device memory (allocated
//   with the planner: about blocks * ((2R + 7) * E + 6 * entries per
//   block) words). Covers every shape whose blocks can all be resident.
// automatic picks shared_tables whenever it fits (VirtualRankPlanner::kernel() tells).
enum class Kernel { automatic, shared_tables, global_tables };
const char* kernel_name(Kernel k);  // "shared_tables", "global_tables", "automatic"

struct Options {
  // Blocks (of threads_per_block() threads, 512) of the cooperative launch
  // per rank. With virtual ranks the planner lowers it until all
  // R*blocks_per_rank blocks are resident on the GPU at once, one block per
  // SM (every block plans the step: two per SM were slower than half as
  // many blocks); e.g. 16 for 8 ranks on a 132-SM H200 (see
  // VirtualRankPlanner::blocks_per_rank()).
  int blocks_per_rank = 32;
  // Where the tables live; forcing shared_tables for a shape whose tables
  // do not fit throws RuntimeError from the constructor, naming the limit.
  Kernel kernel = Kernel::automatic;
  // Longest wait of any block for another rank's arrival, in seconds
  // (> 0; the default is generous). Past it the step is abandoned and
  // check() throws RuntimeError naming the wait; the planner resets its
  // counters and stays usable. With virtual ranks this fires only if the
  // ranks' blocks were not all running at once.
  double timeout_s = 10;
};

// Device pointers to one rank's plan (docs/spec/planning.md, "A rank's
// plan"); they stay valid as long as the VirtualRankPlanner and are overwritten by
// the next plan() call. dup_groups/dup_loffs: only the prefixes named by
// dup_counts are meaningful; their row order may vary between runs.
struct DeviceRankPlan {
  // One pointer per output of moonep/impl/plan_fields.hpp, named as the
  // output: dst [N], cu_seqlens [E+B], zero_fill_ranges [E+B][2],
  // experts_to_copy [R][B], remote_stats [2], src_info [NvS],
  // dup_groups [NvS][3], dup_loffs [NvS], dup_counts [2].
#define MOONEP_DEVICE_RANK_PLAN_MEMBER(name, ...) std::int32_t* name;
  MOONEP_PLAN_FIELDS(MOONEP_DEVICE_RANK_PLAN_MEMBER)
#undef MOONEP_DEVICE_RANK_PLAN_MEMBER
  // [1] the last step's N_r = s_r*K (S*K in a full step): how many of
  // dst's entries it wrote. Written by the kernel, so a captured graph's
  // replays keep it current without the host reading a count; 0 before
  // the first step, and for a rank whose count was outside 0..S (that
  // step is void: check() throws).
  std::int32_t* entries;
};

// Whether a CUDA device is visible; reason in *why_not otherwise.
bool device_available(std::string* why_not = nullptr);

class VirtualRankPlanner {
 public:
  // Validates the configuration (InputError), picks the current CUDA
  // device, allocates every buffer (RuntimeError if that fails). No
  // allocation happens afterwards.
  explicit VirtualRankPlanner(const Config& config, const Options& options = Options());
  ~VirtualRankPlanner();
  VirtualRankPlanner(const VirtualRankPlanner&) = delete;
  VirtualRankPlanner& operator=(const VirtualRankPlanner&) = delete;

  // Enqueues one planning step on `stream` (asynchronous, no host sync).
  // d_routing[r]: device pointer to rank r's expert ids (s_r*K of them).
  // routing_len: null when every routing has room for S*K ids, else a
  // host array of R lengths: a count s_r with s_r*K above rank r's length
  // is refused (check()) and nothing past it is read. d_tpe: null, or an array of R device pointers (each may
  // be null) to tokens_per_expert[r]; given counts are checked in the
  // kernel. d_tokens_per_rank: null for a full step (every s_r = S), or a
  // device pointer to R counts s_r (docs/spec/planning.md, "Ragged
  // steps"), read by the kernel when it runs: change the counts, not the
  // pointer, between replays of a captured graph. The pointer arrays are
  // host arrays and are read during the call only. Errors found in the
  // kernel (bad expert id, count or tokens_per_expert) surface in check().
  void plan(const std::int32_t* const* d_routing, const std::int32_t* const* d_tpe, cudaStream_t stream,
            const std::int32_t* d_tokens_per_rank = nullptr, const std::int64_t* routing_len = nullptr);

  // Waits for `stream` and throws InputError naming rank and index if the
  // last plan() saw a bad expert id, a token count outside 0..S or above
  // its routing's length, or a wrong tokens_per_expert, in the words of
  // every other planner (validate_rank_input, moonep/reference.hpp; e.g.
  // "routing[2][17] = 300 is not an expert id in [0, 256)"), or
  // RuntimeError on an internal inconsistency. Resets the
  // error state, so the planner stays usable for the next step.
  void check(cudaStream_t stream);

  // Device pointers to rank r's plan; dst holds s_r*K meaningful entries.
  const DeviceRankPlan& rank_plan(int rank) const;
  // check() then copies every rank's plan to host memory; after a ragged
  // step (plan() given counts) the HostPlan carries the counts it read
  // back and each rank's dst holds its s_r*K entries.
  HostPlan copy_out(cudaStream_t stream);

  const Config& config() const;
  int blocks_per_rank() const;  // after any lowering for co-residency
  Kernel kernel() const;        // the kernel chosen (never automatic)
  static int threads_per_block();  // 512 (a build-time constant)

 private:
  friend struct impl::PlannerAccess;
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda
