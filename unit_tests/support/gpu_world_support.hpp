// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test support for the GPU world's layer tests (test_gpu_world_layer,
// test_gpu_world_expert_copies, test_gpu_world_moe_layer): every world on
// device 0 ({0, 0, ...}: each rank its own chunk, stream and launches, so
// one GPU runs them), one device buffer per rank with its pointer table,
// a layer's per-rank buffers written from and read into host vectors, a
// layer_test::Step planned by a GpuWorld whose plan must be the
// reference's, and the MoE layer's forward parts in one CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/host_plan.hpp"
#include "support/cuda_test_support.hpp"
#include "support/layer_cases.hpp"

namespace gpu_world_test {

using moonep::PerRank;
using moonep::test::cuda_ok;

inline std::vector<int> on_device_zero(int ranks) { return std::vector<int>(static_cast<std::size_t>(ranks), 0); }

// One device buffer per rank (on device 0, 16 spare bytes), with its
// pointer table.
template <class V>
struct RankBuffers {
  std::vector<V*> p;
  std::size_t n = 0;
  RankBuffers(int ranks, std::size_t n_) : p(static_cast<std::size_t>(ranks), nullptr), n(n_) {
    for (auto& q : p) cuda_ok(cudaMalloc(reinterpret_cast<void**>(&q), n * sizeof(V) + 16));
  }
  explicit RankBuffers(const PerRank<V>& host) : RankBuffers(static_cast<int>(host.size()), host[0].size()) {
    set(host);
  }
  ~RankBuffers() {
    for (auto* q : p) cudaFree(q);
  }
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;
  void set(const PerRank<V>& host) {
    for (std::size_t r = 0; r < p.size(); ++r)
      cuda_ok(cudaMemcpy(p[r], host[r].data(), n * sizeof(V), cudaMemcpyHostToDevice));
  }
  PerRank<V> get() const {
    PerRank<V> h(p.size(), std::vector<V>(n));
    for (std::size_t r = 0; r < p.size(); ++r)
      cuda_ok(cudaMemcpy(h[r].data(), p[r], n * sizeof(V), cudaMemcpyDeviceToHost));
    return h;
  }
  void* const* data() { return reinterpret_cast<void* const*>(p.data()); }
  const void* const* cdata() const { return reinterpret_cast<const void* const*>(p.data()); }
};

// A per-rank buffer of a layer (accessor(d) for rank d) written from / read
// into host vectors.
template <class V, class Accessor>
void put_slots(Accessor at, const PerRank<V>& host) {
  for (std::size_t d = 0; d < host.size(); ++d)
    cuda_ok(cudaMemcpy(at(static_cast<int>(d)), host[d].data(), host[d].size() * sizeof(V), cudaMemcpyDefault));
}
template <class V, class Accessor>
PerRank<V> get_slots(Accessor at, int ranks, std::size_t n) {
  PerRank<V> h(static_cast<std::size_t>(ranks), std::vector<V>(n));
  for (int d = 0; d < ranks; ++d) cuda_ok(cudaMemcpy(h[d].data(), at(d), n * sizeof(V), cudaMemcpyDefault));
  return h;
}

// Elements (over every rank) that differ in their bits; first wrong in *first.
template <class V>
std::size_t wrong_bits(const PerRank<V>& got, const PerRank<V>& want, std::string* first = nullptr) {
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < want.size(); ++r)
    for (std::size_t i = 0; i < want[r].size(); ++i) {
      if (layer_test::same_bits(got[r][i], want[r][i])) continue;
      if (first && wrong == 0) *first = "rank " + std::to_string(r) + " element " + std::to_string(i);
      ++wrong;
    }
  return wrong;
}

// A step planned by a GpuWorld over device 0 (ragged steps through device
// counts); the world's plan copied back must be the reference's (s.plan),
// so the world's operations and the reference apply the same plan.
struct WorldStep {
  std::unique_ptr<moonep::cuda::GpuWorld> world;
  std::unique_ptr<moonep::test::DeviceRouting> routing;
  std::unique_ptr<moonep::test::DeviceCounts> counts;
  moonep::HostPlan plan;
};
inline void plan_on_world(const layer_test::Step& s, WorldStep& out) {
  const bool ragged = s.plan.tokens_per_rank.has_value();
  out.world = std::make_unique<moonep::cuda::GpuWorld>(s.c, on_device_zero(s.c.ranks));
  out.routing = std::make_unique<moonep::test::DeviceRouting>(s.c, moonep::test::padded_to_full(s.c, s.routing));
  out.counts = std::make_unique<moonep::test::DeviceCounts>(s.c.ranks);
  if (ragged) out.counts->write(*s.plan.tokens_per_rank);
  out.world->plan(out.routing->topk(), nullptr, nullptr, ragged ? out.counts->per_rank() : nullptr);
  out.plan = out.world->copy_out();
  REQUIRE(moonep::plan_difference(out.plan, s.plan) == "");
}

// A GpuWorldMoeLayer's forward parts captured in one CUDA graph on
// `origin`'s stream, the fetch on a branch of its own beside the dispatch
// (read_groups before).
struct ForwardGraph {
  cudaStream_t side = nullptr;
  cudaEvent_t planned = nullptr, fetched = nullptr;
  ForwardGraph() {
    cuda_ok(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cuda_ok(cudaEventCreateWithFlags(&planned, cudaEventDisableTiming));
    cuda_ok(cudaEventCreateWithFlags(&fetched, cudaEventDisableTiming));
  }
  ~ForwardGraph() {
    cudaEventDestroy(planned);
    cudaEventDestroy(fetched);
    cudaStreamDestroy(side);
  }
  template <class Layer>
  void record(const Layer& layer, const void* const* x, const void* const* w, void* const* out,
              cudaStream_t origin) const {
    cuda_ok(cudaEventRecord(planned, origin));
    cuda_ok(cudaStreamWaitEvent(side, planned, 0));
    layer.enqueue_fetch(side);
    cuda_ok(cudaEventRecord(fetched, side));
    layer.enqueue_dispatch(x, w, origin);
    cuda_ok(cudaStreamWaitEvent(origin, fetched, 0));
    layer.enqueue_gemms(origin);
    layer.enqueue_combine(out, origin);
  }
  // read_groups, then the parts captured once and the graph replayed
  // `times` times, waited for.
  template <class Layer>
  static void replay(Layer& layer, const void* const* x, const void* const* w, void* const* out, int times) {
    layer.read_groups(nullptr);
    const ForwardGraph branch;
    const moonep::test::CapturedGraph g([&](cudaStream_t origin) { branch.record(layer, x, w, out, origin); });
    for (int replay = 0; replay < times; ++replay) cuda_ok(cudaGraphLaunch(g.exec(), g.stream()));
    cuda_ok(cudaStreamSynchronize(g.stream()));
  }
};

}  // namespace gpu_world_test
