// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The layer on a GPU world (a MoonEP built with CUDA): every rank on GPU 0
// (a device list may repeat a device; {0, 1, 2, 3} would put each rank on
// its own GPU), planned by one moonep::cuda::GpuWorld and run by
// moonep::cuda::GpuWorldMoeLayer: each rank's experts in the world's
// symmetric memory, the copies fetched from their owners, one cuBLAS GEMM
// per group, combine; backward down to the reduce of the copies' gradients.
// Plain device pointers, one per rank, and a CUDA stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <moonep/gpu_world.hpp>
#include <moonep/gpu_world_moe_layer.hpp>

#include "direct_layer.hpp"
#include "moe_data.hpp"

namespace moe {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// One device array of n values per rank (on the current device), zeroed.
template <class V>
struct RankArrays {
  std::vector<V*> p;
  std::size_t n;
  RankArrays(int ranks, std::size_t count) : p(static_cast<std::size_t>(ranks), nullptr), n(count) {
    for (auto& q : p) {
      cuda_ok(cudaMalloc(reinterpret_cast<void**>(&q), n * sizeof(V)), "cudaMalloc");
      cuda_ok(cudaMemset(q, 0, n * sizeof(V)), "cudaMemset");
    }
  }
  ~RankArrays() {
    for (auto* q : p) cudaFree(q);
  }
  RankArrays(const RankArrays&) = delete;
  RankArrays& operator=(const RankArrays&) = delete;
  // Rank r's part of a host array laid out [R][n] (or [R*n]).
  void put(const V* host) {
    for (std::size_t r = 0; r < p.size(); ++r)
      cuda_ok(cudaMemcpy(p[r], host + r * n, n * sizeof(V), cudaMemcpyHostToDevice), "copying to the GPU");
  }
  void get(V* host) const {
    for (std::size_t r = 0; r < p.size(); ++r)
      cuda_ok(cudaMemcpy(host + r * n, p[r], n * sizeof(V), cudaMemcpyDeviceToHost), "copying from the GPU");
  }
  const void* const* in() const { return reinterpret_cast<const void* const*>(p.data()); }
  void* const* out() const { return reinterpret_cast<void* const*>(p.data()); }
};

struct GpuWorldRun {
  moonep::HostPlan plan;
  HostArray3 out, gx, gw, gweights;  // as direct_layer.hpp's
};

inline GpuWorldRun gpu_world_layer(const moonep::Config& c, const moonep::Routing& routing, const LayerData& data,
                                   const Array3& grad_out) {
  const int R = c.ranks, H = data.hidden, Hp = data.out;
  const std::size_t S = static_cast<std::size_t>(c.tokens), K = static_cast<std::size_t>(c.topk),
                    PQ = static_cast<std::size_t>(c.experts_per_rank()) * H * Hp;
  cuda_ok(cudaSetDevice(0), "cudaSetDevice");
  // Plan the step: each rank's routing on its device.
  moonep::cuda::GpuWorld world(c, std::vector<int>(static_cast<std::size_t>(R), 0));
  RankArrays<std::int32_t> ids(R, S * K);
  std::vector<std::int32_t> flat_ids;
  for (const auto& row : routing) flat_ids.insert(flat_ids.end(), row.begin(), row.end());
  ids.put(flat_ids.data());
  world.plan(reinterpret_cast<const std::int32_t* const*>(ids.p.data()), nullptr, nullptr);
  GpuWorldRun run{world.copy_out(), HostArray3("gpu_out", R, S, Hp), HostArray3("gpu_gx", R, S, H),
                  HostArray3("gpu_gw", R, S, K), HostArray3("gpu_gW", c.experts, H, Hp)};

  // The layer, forward and backward, in double. Rank h's experts
  // W[h*epn ..] go into its part of the world's symmetric memory.
  moonep::cuda::GpuWorldMoeLayer layer(world, H, Hp, moonep::cuda::Element::f64);
  const auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.weights);
  for (int h = 0; h < R; ++h)
    cuda_ok(cudaMemcpy(layer.experts(h), W.data() + h * PQ, PQ * sizeof(double), cudaMemcpyHostToDevice),
            "copying a rank's experts");
  RankArrays<double> x(R, S * H), w(R, S * K), g(R, S * Hp), out(R, S * Hp), gx(R, S * H), gw(R, S * K),
      gW(R, PQ);
  x.put(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.x).data());
  w.put(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.w).data());
  g.put(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad_out).data());
  layer.forward(x.in(), w.in(), out.out(), nullptr);
  layer.backward(g.in(), gx.out(), gw.out(), gW.out(), nullptr);
  cuda_ok(cudaDeviceSynchronize(), "running the layer");
  out.get(run.out.data());
  gx.get(run.gx.data());
  gw.get(run.gw.data());
  gW.get(run.gweights.data());
  return run;
}

}  // namespace moe
