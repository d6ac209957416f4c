// Test support for the CUDA tests (test_cuda_planner, test_gpu_world):
// routing in device memory and the routing shapes of the sweeps.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/config.hpp"
#include "moonep/synthetic.hpp"

namespace moonep::test {

using moonep::Config;
using moonep::Routing;

inline void cuda_ok(cudaError_t err) {
  if (err != cudaSuccess) FAIL(std::string("CUDA: ") + cudaGetErrorString(err));
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

 private:
  std::vector<int32_t*> topk_, tpe_;
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

}  // namespace moonep::test
