// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test support for the CUDA layer's tests (test_cuda_layer,
// test_gpu_world_layer, test_cuda_expert_copies, test_cuda_moe_layer): a
// layer_test::Step (support/layer_cases.hpp)
// planned by a VirtualRankPlanner, rank-major device arrays made from
// PerRank host buffers, the Element of each host type, values and NaNs of
// each, and bitwise comparison.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "moonep/bf16.hpp"
#include "moonep/cuda_layer.hpp"
#include "moonep/cuda_planner.hpp"
#include "support/cuda_test_support.hpp"
#include "support/layer_cases.hpp"

namespace cuda_layer_test {

using moonep::cuda::Element;

template <class T>
Element element_of();
template <>
inline Element element_of<float>() { return Element::f32; }
template <>
inline Element element_of<double>() { return Element::f64; }
template <>
inline Element element_of<moonep::bf16>() { return Element::bf16; }

// A double as T (bf16: rounded to nearest even), and T's quiet NaN.
template <class T>
T value(double v) { return static_cast<T>(v); }
template <>
inline moonep::bf16 value<moonep::bf16>(double v) { return moonep::bf16(static_cast<float>(v)); }
template <class T>
T nan_value() { return value<T>(std::numeric_limits<double>::quiet_NaN()); }

// The same bits (a NaN equals a NaN of the same bits): layer_cases.hpp's.
using layer_test::same_bits;

// n values on the device (16 spare bytes, so a kernel that overran by a
// piece would show under compute-sanitizer rather than corrupt the heap).
template <class V>
struct DeviceArray {
  V* p = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(const std::vector<V>& host) : n(host.size()) {
    moonep::test::cuda_ok(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(V) + 16));
    moonep::test::cuda_ok(cudaMemcpy(p, host.data(), n * sizeof(V), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<V> get() const {
    std::vector<V> h(n);
    moonep::test::cuda_ok(cudaMemcpy(h.data(), p, n * sizeof(V), cudaMemcpyDeviceToHost));
    return h;
  }
};

template <class V>
std::vector<V> flat(const moonep::PerRank<V>& a) {
  std::vector<V> f;
  for (const auto& r : a) f.insert(f.end(), r.begin(), r.end());
  return f;
}
template <class V>
moonep::PerRank<V> per_rank(const std::vector<V>& f, int ranks) {
  moonep::PerRank<V> out(static_cast<std::size_t>(ranks));
  const std::size_t each = f.size() / static_cast<std::size_t>(ranks);
  for (int r = 0; r < ranks; ++r) out[r].assign(f.begin() + r * each, f.begin() + (r + 1) * each);
  return out;
}

// The step planned on the GPU (ragged steps through device counts); the
// planner's plan copied back must be the reference's (s.plan), so the CUDA
// operations and the reference apply the same plan.
struct PlannedStep {
  std::unique_ptr<moonep::cuda::VirtualRankPlanner> planner;
  std::unique_ptr<moonep::test::DeviceRouting> routing;
  std::unique_ptr<moonep::test::DeviceCounts> counts;
  moonep::HostPlan plan;
};
inline void plan_on_gpu(const layer_test::Step& s, PlannedStep& out) {
  const bool ragged = s.plan.tokens_per_rank.has_value();
  out.planner = std::make_unique<moonep::cuda::VirtualRankPlanner>(s.c);
  out.routing = std::make_unique<moonep::test::DeviceRouting>(s.c, moonep::test::padded_to_full(s.c, s.routing));
  out.counts = std::make_unique<moonep::test::DeviceCounts>(s.c.ranks);
  if (ragged) out.counts->write(*s.plan.tokens_per_rank);
  out.planner->plan(out.routing->topk(), nullptr, nullptr, ragged ? out.counts->data() : nullptr);
  out.plan = out.planner->copy_out(nullptr);
  REQUIRE(moonep::plan_difference(out.plan, s.plan) == "");
}

}  // namespace cuda_layer_test
