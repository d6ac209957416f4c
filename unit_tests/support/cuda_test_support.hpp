// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test support for the CUDA tests (test_cuda_planner, test_gpu_world,
// test_gpu_world_mpi): routing and token counts in device memory, and the
// routing shapes of the sweeps. Ragged steps' counts and routings come from
// ragged_steps.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/config.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/reference.hpp"
#include "moonep/impl/splitmix64.hpp"
#include "moonep/synthetic.hpp"
#include "support/ragged_steps.hpp"

namespace moonep::test {

using moonep::Config;
using moonep::Routing;

inline void cuda_ok(cudaError_t err) {
  if (err != cudaSuccess) FAIL(std::string("CUDA: ") + cudaGetErrorString(err));
}

// Every rank's DeviceRankPlan::entries, which its kernel writes, must hold
// its count of the step times K (`tokens`: the counts, or empty for a full
// step, S each). rank_plan(r): the planner's or world's rank_plan.
template <class RankPlanOf>
void require_entries(const Config& c, const moonep::TokensPerRank& tokens, RankPlanOf rank_plan) {
  for (int r = 0; r < c.ranks; ++r) {
    std::int32_t n = -1;
    cuda_ok(cudaMemcpy(&n, rank_plan(r).entries, sizeof n, cudaMemcpyDeviceToHost));
    INFO("DeviceRankPlan::entries of rank " << r);
    REQUIRE(n == (tokens.empty() ? c.tokens : tokens[static_cast<std::size_t>(r)]) * c.topk);
  }
}

// A routing (and optional tokens_per_expert) held in device memory.
class DeviceRouting {
 public:
  DeviceRouting(const Config& c, const Routing& routing, const moonep::TokensPerExpert* tpe = nullptr) {
    for (int r = 0; r < c.ranks; ++r) {
      int32_t* d = nullptr;
      cuda_ok(cudaMalloc(reinterpret_cast<void**>(&d), routing[r].size() * 4 + 4));
      cuda_ok(cudaMemcpy(d, routing[r].data(), routing[r].size() * 4, cudaMemcpyHostToDevice));
      topk_.push_back(d);
      if (tpe) {
        int32_t* t = nullptr;
        cuda_ok(cudaMalloc(reinterpret_cast<void**>(&t), (*tpe)[r].size() * 4 + 4));
        cuda_ok(cudaMemcpy(t, (*tpe)[r].data(), (*tpe)[r].size() * 4, cudaMemcpyHostToDevice));
        tpe_.push_back(t);
      }
    }
  }
  ~DeviceRouting() {
    for (auto* p : topk_) cudaFree(p);
    for (auto* p : tpe_) cudaFree(p);
  }
  const int32_t* const* topk() const { return topk_.data(); }
  const int32_t* const* tpe() const { return tpe_.empty() ? nullptr : tpe_.data(); }
  void set(int rank, int64_t index, int32_t value) {
    cuda_ok(cudaMemcpy(topk_[rank] + index, &value, 4, cudaMemcpyHostToDevice));
  }
  // Rewrites every rank's routing in place (each row no longer than the
  // one it was made with), finished on return: a captured graph's next
  // replay reads it.
  void write(const Routing& routing) {
    for (std::size_t r = 0; r < topk_.size(); ++r) {
      if (!routing[r].empty()) cuda_ok(cudaMemcpy(topk_[r], routing[r].data(), routing[r].size() * 4, cudaMemcpyHostToDevice));
    }
    cuda_ok(cudaDeviceSynchronize());
  }

 private:
  std::vector<int32_t*> topk_, tpe_;
};

// A ragged step's R token counts s_r in device memory (the current
// device's), rewritten in place so that a captured graph replays new
// counts: data() for cuda::VirtualRankPlanner::plan, per_rank() (rank r's count at
// data() + r) for GpuWorld::plan.
class DeviceCounts {
 public:
  explicit DeviceCounts(int ranks) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&d_), static_cast<std::size_t>(ranks) * 4));
    for (int r = 0; r < ranks; ++r) per_rank_.push_back(d_ + r);
  }
  DeviceCounts(const Config& c, const moonep::TokensPerRank& tokens) : DeviceCounts(c.ranks) { write(tokens); }
  ~DeviceCounts() { cudaFree(d_); }
  DeviceCounts(const DeviceCounts&) = delete;
  DeviceCounts& operator=(const DeviceCounts&) = delete;
  // Finished on return (the next launch on any stream reads these counts).
  void write(const moonep::TokensPerRank& tokens) {
    cuda_ok(cudaMemcpy(d_, tokens.data(), tokens.size() * 4, cudaMemcpyHostToDevice));
    cuda_ok(cudaDeviceSynchronize());
  }
  const int32_t* data() const { return d_; }
  const int32_t* const* per_rank() const { return per_rank_.data(); }

 private:
  int32_t* d_ = nullptr;
  std::vector<const int32_t*> per_rank_;
};

// Routing shapes of the sweep.
enum class Shape { uniform, skew, heavy, one_expert, same_expert_k_times, repeats, owner_zero };
inline const char* name(Shape s) {
  switch (s) {
    case Shape::uniform: return "uniform";
    case Shape::skew: return "lognormal1";
    case Shape::heavy: return "lognormal3";
    case Shape::one_expert: return "one-expert";
    case Shape::same_expert_k_times: return "same-expert-K-times";
    case Shape::repeats: return "iid-with-repeats";
    case Shape::owner_zero: return "all-on-rank0-experts";
  }
  return "?";
}

inline Routing make_routing(const Config& c, Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t N = c.entries();
  Routing r(c.ranks, std::vector<int32_t>(N));
  auto uni = [&](int n) { return static_cast<int32_t>(rng() % static_cast<uint64_t>(n)); };
  switch (shape) {
    case Shape::uniform: return moonep::synthetic_routing(c, 0.0, seed);
    case Shape::skew: return moonep::synthetic_routing(c, 1.0, seed);
    case Shape::heavy: return moonep::synthetic_routing(c, 3.0, seed);
    case Shape::one_expert: {
      const int32_t e = uni(c.experts);
      for (auto& row : r) std::fill(row.begin(), row.end(), e);
      return r;
    }
    case Shape::same_expert_k_times:
      for (auto& row : r)
        for (int s = 0; s < c.tokens; ++s) {
          const int32_t e = uni(c.experts);
          for (int k = 0; k < c.topk; ++k) row[static_cast<int64_t>(s) * c.topk + k] = e;
        }
      return r;
    case Shape::repeats:
      for (auto& row : r)
        for (auto& v : row) v = uni(c.experts);
      return r;
    case Shape::owner_zero:
      for (auto& row : r)
        for (auto& v : row) v = uni(c.experts_per_rank());
      return r;
  }
  return r;
}

// Small ragged steps (the [sanitize] tests' size): empty ranks beside full
// ones, a remainder, every rank empty.
struct RaggedCase {
  Config c;
  Shape shape;
  int bpr;
  moonep::TokensPerRank tokens;
};
inline std::vector<RaggedCase> small_ragged_cases() {
  return {{Config{2, 8, 2, 16, 2, 4}, Shape::skew, 4, {16, 0}},
          {Config{3, 12, 4, 33, 3, 1}, Shape::repeats, 2, {0, 33, 7}},
          {Config{4, 8, 3, 20, 5, 2}, Shape::one_expert, 1, {20, 0, 3, 5}},
          {Config{4, 16, 2, 9, 2, 4}, Shape::uniform, 3, {0, 0, 0, 0}}};
}

// The count vectors a graph-replay test steps through, for R = 8: all S,
// all 0, a hand-picked mix (0, 1, S-1, S/2 and S), seeded ragged counts with
// and without the extremes, and the full and empty steps again between them.
inline std::vector<moonep::TokensPerRank> replay_counts(const Config& c, std::uint64_t seed) {
  const int S = c.tokens;
  const moonep::TokensPerRank all(8, S), none(8, 0);
  moonep::impl::SplitMix64 rng{seed};
  return {all,  none, {S, 0, S, 0, 1, S - 1, S / 2, 0}, ragged_tokens_with_extremes(c, 5), ragged_tokens(c, 0, rng),
          all,  ragged_tokens(c, 4, rng), none, ragged_tokens_with_extremes(c, 6)};
}

// A non-default stream and one CUDA graph captured on it from `record(stream)`,
// instantiated; destroyed with it.
class CapturedGraph {
 public:
  template <class Record>
  explicit CapturedGraph(Record record) {
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cuda_ok(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    record(stream_);
    cuda_ok(cudaStreamEndCapture(stream_, &graph_));
    cuda_ok(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~CapturedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    cudaStreamDestroy(stream_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  cudaStream_t stream() const { return stream_; }
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Replays `graph`, captured once to plan from the buffers `live`
// (routing) and `counts`, once per count vector of replay_counts(c, seed):
// between replays only those buffers' contents change (a new routing cut
// to the counts, the counts). Each plan, `copy_out()` after the replay,
// must be the reference's for its counts, and each rank's entries
// (rank_plan(r).entries) its count times K.
template <class CopyOut, class RankPlanOf>
void require_graph_replays(const Config& c, const CapturedGraph& graph, DeviceRouting& live, DeviceCounts& counts,
                           std::uint64_t seed, CopyOut copy_out, RankPlanOf rank_plan) {
  const std::vector<moonep::TokensPerRank> steps = replay_counts(c, seed);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const moonep::TokensPerRank& tokens = steps[i];
    INFO("replay " << i << ": tokens_per_rank " << ::Catch::Detail::stringify(tokens));
    const Routing cut = cut_to_tokens(c, make_routing(c, i % 2 ? Shape::heavy : Shape::skew, seed + i), tokens);
    live.write(padded_to_full(c, cut));
    counts.write(tokens);
    cuda_ok(cudaGraphLaunch(graph.exec(), graph.stream()));
    cuda_ok(cudaStreamSynchronize(graph.stream()));
    const moonep::HostPlan got = copy_out();
    REQUIRE(got.tokens_per_rank == std::optional<moonep::TokensPerRank>(tokens));
    REQUIRE(moonep::plan_difference(got, moonep::plan_reference(c, cut, nullptr, &tokens)) == "");
    require_entries(c, tokens, rank_plan);
  }
}

}  // namespace moonep::test
