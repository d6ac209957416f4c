// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --backend cuda: the step on the current CUDA device, every
// rank a virtual rank of one moonep::cuda::VirtualRankPlanner, applied by
// moonep::cuda::VirtualRankLayer (moonep/cuda_layer.hpp) with identity
// experts (y = recv), in float, double or bfloat16: its files are
// bit-identical to the reference backend's (the same plan, the planners
// agree, and the same order of every sum). With --experts, by
// moonep::cuda::VirtualRankMoeLayer (moonep/cuda_moe_layer.hpp: fetch,
// dispatch, one cuBLAS GEMM per group, combine, and the backward down to
// reduce): the GEMMs sum in cuBLAS's order, so only exact data gives the
// reference's bits. Compiled only when MoonEP has CUDA
// (layer_cuda_unavailable.cpp otherwise).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layer_buffers.hpp"
#include "layer_run.hpp"
#include "moonep/bf16.hpp"
#include "moonep/cuda_layer.hpp"
#include "moonep/cuda_moe_layer.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"

namespace moonep::tools {

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(std::string("--backend cuda: ") + what + ": " + cudaGetErrorString(e));
}

// One device array of n values of V, zeroed or copied from the host.
template <class V>
struct DeviceArray {
  V* p = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(std::size_t count) : n(count) {
    ok(cudaMalloc(reinterpret_cast<void**>(&p), (n ? n : 1) * sizeof(V)), "allocating a buffer");
    ok(cudaMemset(p, 0, (n ? n : 1) * sizeof(V)), "zeroing a buffer");
  }
  explicit DeviceArray(const std::vector<V>& host) : DeviceArray(host.size()) {
    ok(cudaMemcpy(p, host.data(), n * sizeof(V), cudaMemcpyHostToDevice), "copying an input to the device");
  }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<V> get() const {
    std::vector<V> h(n);
    ok(cudaMemcpy(h.data(), p, n * sizeof(V), cudaMemcpyDeviceToHost), "copying a result to the host");
    return h;
  }
};

template <class V>
std::vector<V> flat(const std::vector<double>& values) {
  std::vector<V> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(static_cast<V>(static_cast<accum_t<V>>(v)));
  return out;
}
template <class V>
std::vector<double> values_of(const std::vector<V>& data) {
  std::vector<double> v;
  v.reserve(data.size());
  for (const V& x : data) v.push_back(static_cast<double>(static_cast<accum_t<V>>(x)));
  return v;
}

cuda::Element element_of(LayerDtype d) {
  return d == LayerDtype::float64 ? cuda::Element::f64
                                  : (d == LayerDtype::bfloat16 ? cuda::Element::bf16 : cuda::Element::f32);
}

// The linear layer (--experts) on the planned step: M [E][H][H'] is every
// rank's P [epn][Q] back to back (expert e at e*Q).
template <class T>
LayerResults linear(const LayerInputs& in, LayerDtype dtype, const cuda::VirtualRankPlanner& planner) {
  using W = weight_t<T>;
  const Config& c = in.problem.config;
  const std::int64_t R = c.ranks, S = c.tokens, K = c.topk, H = in.hidden, O = in.hidden_out, nvs = c.slots();
  cuda::VirtualRankMoeLayer layer(planner, in.hidden, in.hidden_out, element_of(dtype), in.grad_out != nullptr);
  DeviceArray<T> x(flat<T>(in.x.values)), m(flat<T>(in.experts->values)), out(static_cast<std::size_t>(R * S * O));
  DeviceArray<W> w(flat<W>(in.w.values));
  layer.forward(x.p, w.p, m.p, out.p, nullptr);
  LayerResults res;
  if (in.grad_out) {
    DeviceArray<T> g(flat<T>(in.grad_out->values)), gx(static_cast<std::size_t>(R * S * H)), gm(m.n);
    DeviceArray<W> gw(static_cast<std::size_t>(R * S * K));
    layer.backward(g.p, m.p, gx.p, gw.p, gm.p, nullptr);
    ok(cudaDeviceSynchronize(), "running the backward");
    res.grad_x = values_of(gx.get());
    res.grad_w = values_of(gw.get());
    res.grad_experts = values_of(gm.get());
  }
  ok(cudaDeviceSynchronize(), "running the step");
  res.out = values_of(out.get());
  std::vector<T> recv(static_cast<std::size_t>(R * nvs * H));
  ok(cudaMemcpy(recv.data(), layer.recv(), recv.size() * sizeof(T), cudaMemcpyDeviceToHost), "copying recv");
  res.recv = values_of(recv);
  return res;
}

template <class T>
LayerResults compute(const LayerInputs& in, LayerDtype dtype) {
  using W = weight_t<T>;
  const Problem& p = in.problem;
  const Config& c = p.config;
  const std::int64_t R = c.ranks, S = c.tokens, K = c.topk, H = in.hidden, nvs = c.slots();

  cuda::VirtualRankPlanner planner(c);
  // The problem on the device: each rank's routing (s_r*K ids in a ragged
  // step, so its length is passed), tokens_per_expert, the counts.
  std::vector<std::unique_ptr<DeviceArray<std::int32_t>>> keep;
  std::vector<const std::int32_t*> routing, tpe;
  std::vector<std::int64_t> lengths;
  for (const auto& r : p.routing) {
    keep.push_back(std::make_unique<DeviceArray<std::int32_t>>(r));
    routing.push_back(keep.back()->p);
    lengths.push_back(static_cast<std::int64_t>(r.size()));
  }
  if (p.tokens_per_expert)
    for (const auto& r : *p.tokens_per_expert) {
      keep.push_back(std::make_unique<DeviceArray<std::int32_t>>(r));
      tpe.push_back(keep.back()->p);
    }
  const std::int32_t* counts = nullptr;
  if (p.tokens_per_rank) {
    keep.push_back(std::make_unique<DeviceArray<std::int32_t>>(*p.tokens_per_rank));
    counts = keep.back()->p;
  }
  planner.plan(routing.data(), p.tokens_per_expert ? tpe.data() : nullptr, nullptr, counts, lengths.data());
  planner.check(nullptr);  // the problem was validated when read; this surfaces anything else
  if (in.experts) return linear<T>(in, dtype, planner);

  cuda::VirtualRankLayer layer(planner, in.hidden, element_of(dtype));
  DeviceArray<T> x(flat<T>(in.x.values)), recv(static_cast<std::size_t>(R * nvs * H)),
      out(static_cast<std::size_t>(R * S * H));
  DeviceArray<W> w(flat<W>(in.w.values)), recv_w(static_cast<std::size_t>(R * nvs));
  layer.dispatch(x.p, w.p, recv.p, recv_w.p, nullptr);
  layer.combine(recv.p, recv_w.p, out.p, nullptr);  // identity experts: y = recv
  LayerResults res;
  if (in.grad_out) {
    DeviceArray<T> g(flat<T>(in.grad_out->values)), gy(static_cast<std::size_t>(R * nvs * H)),
        gx(static_cast<std::size_t>(R * S * H));
    DeviceArray<W> gw(static_cast<std::size_t>(R * S * K));
    layer.combine_backward(g.p, recv.p, recv_w.p, gy.p, gw.p, nullptr);
    layer.dispatch_backward(gy.p, nullptr, gx.p, nullptr, nullptr);  // identity experts: no recv_w gradient
    ok(cudaDeviceSynchronize(), "running the backward");
    res.grad_x = values_of(gx.get());
    res.grad_w = values_of(gw.get());
  }
  ok(cudaDeviceSynchronize(), "running the step");
  res.out = values_of(out.get());
  res.recv = values_of(recv.get());
  return res;
}

}  // namespace

LayerResults cuda_layer(const LayerInputs& in, LayerDtype dtype) {
  std::string why;
  if (!cuda::device_available(&why)) throw RuntimeError("--backend cuda: " + why);
  switch (dtype) {
    case LayerDtype::float64: return compute<double>(in, dtype);
    case LayerDtype::bfloat16: return compute<bf16>(in, dtype);
    case LayerDtype::float32: break;
  }
  return compute<float>(in, dtype);
}

}  // namespace moonep::tools
