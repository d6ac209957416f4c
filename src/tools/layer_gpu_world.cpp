// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --world gpu: every rank its own GPU (rank r on
// devices[r mod n]; a device may repeat), planned by one
// moonep::cuda::GpuWorld held by this process and applied by
// moonep::cuda::GpuWorldLayer (moonep/gpu_world_layer.hpp): slot buffers
// in the world's symmetric memory, each source storing its rows straight
// into the destinations' buffers. Identity experts (y = recv, and in the
// backward grad_recv = grad_y), any --dtype; the same bits as the
// reference. With --experts, moonep::cuda::GpuWorldMoeLayer
// (moonep/gpu_world_moe_layer.hpp: fetch from the owners' symmetric
// memory, dispatch, one cuBLAS GEMM per group on its rank's device,
// combine, and the backward down to reduce): the GEMMs sum in cuBLAS's
// order, so only exact data gives the reference's bits. Compiled only when
// MoonEP has CUDA (layer_gpu_world_unavailable.cpp otherwise).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layer_buffers.hpp"
#include "layer_run.hpp"
#include "moonep/bf16.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_layer.hpp"
#include "moonep/gpu_world_moe_layer.hpp"

namespace moonep::tools {

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(std::string("--world gpu: ") + what + ": " + cudaGetErrorString(e));
}

// n values of V on one device, zeroed or copied from the host.
template <class V>
struct RankArray {
  int device = 0;
  V* p = nullptr;
  std::size_t n = 0;
  RankArray(int dev, std::size_t count) : device(dev), n(count) {
    ok(cudaSetDevice(device), "cudaSetDevice");
    ok(cudaMalloc(reinterpret_cast<void**>(&p), (n ? n : 1) * sizeof(V)), "allocating a buffer");
    ok(cudaMemset(p, 0, (n ? n : 1) * sizeof(V)), "zeroing a buffer");
  }
  RankArray(int dev, const V* host, std::size_t count) : RankArray(dev, count) {
    ok(cudaMemcpy(p, host, n * sizeof(V), cudaMemcpyHostToDevice), "copying an input to its rank's device");
  }
  ~RankArray() {
    cudaSetDevice(device);
    cudaFree(p);
  }
  RankArray(const RankArray&) = delete;
  RankArray& operator=(const RankArray&) = delete;
};

// One RankArray per rank and the table of their pointers.
template <class V>
struct PerRankArrays {
  std::vector<std::unique_ptr<RankArray<V>>> ranks;
  std::vector<void*> ptrs;
  void add(std::unique_ptr<RankArray<V>> a) {
    ptrs.push_back(a->p);
    ranks.push_back(std::move(a));
  }
  const void* const* in() const { return ptrs.data(); }
  void* const* out() const { return ptrs.data(); }
};

// Rank r's part [per] of a flat [R][per] array of doubles, as V.
template <class V>
std::vector<V> part(const std::vector<double>& values, int r, std::size_t per) {
  std::vector<V> out(per);
  for (std::size_t i = 0; i < per; ++i) out[i] = static_cast<V>(static_cast<accum_t<V>>(values[r * per + i]));
  return out;
}
template <class V>
void append(std::vector<double>& to, const void* device_ptr, std::size_t n) {
  std::vector<V> h(n);
  ok(cudaMemcpy(h.data(), device_ptr, n * sizeof(V), cudaMemcpyDefault), "copying a result to the host");
  for (const V& v : h) to.push_back(static_cast<double>(static_cast<accum_t<V>>(v)));
}

cuda::Element element_of(LayerDtype d) {
  return d == LayerDtype::float64 ? cuda::Element::f64
                                  : (d == LayerDtype::bfloat16 ? cuda::Element::bf16 : cuda::Element::f32);
}

// The linear layer (--experts) on the planned step: rank h's experts
// P_h [epn][Q] (M [E][H][H'] from expert h*epn on) written into the
// layer's symmetric memory.
template <class T>
LayerResults linear(const LayerInputs& in, LayerDtype dtype, cuda::GpuWorld& world, const std::vector<int>& devices,
                    cudaStream_t origin) {
  using W = weight_t<T>;
  const Config& c = in.problem.config;
  const int R = c.ranks;
  const std::size_t S = static_cast<std::size_t>(c.tokens), K = static_cast<std::size_t>(c.topk),
                    H = static_cast<std::size_t>(in.hidden), O = static_cast<std::size_t>(in.hidden_out),
                    nvs = static_cast<std::size_t>(c.slots()), PQ = static_cast<std::size_t>(c.experts_per_rank()) * H * O;
  const bool training = in.grad_out != nullptr;
  cuda::GpuWorldMoeLayer layer(world, in.hidden, in.hidden_out, element_of(dtype), training);
  PerRankArrays<T> x, out, g, gx, gm;
  PerRankArrays<W> w, gw;
  for (int r = 0; r < R; ++r) {
    const std::vector<T> p = part<T>(in.experts->values, r, PQ);
    ok(cudaMemcpy(layer.experts(r), p.data(), PQ * sizeof(T), cudaMemcpyHostToDevice), "copying a rank's experts");
    x.add(std::make_unique<RankArray<T>>(devices[r], part<T>(in.x.values, r, S * H).data(), S * H));
    w.add(std::make_unique<RankArray<W>>(devices[r], part<W>(in.w.values, r, S * K).data(), S * K));
    out.add(std::make_unique<RankArray<T>>(devices[r], S * O));
    if (training) {
      g.add(std::make_unique<RankArray<T>>(devices[r], part<T>(in.grad_out->values, r, S * O).data(), S * O));
      gx.add(std::make_unique<RankArray<T>>(devices[r], S * H));
      gw.add(std::make_unique<RankArray<W>>(devices[r], S * K));
      gm.add(std::make_unique<RankArray<T>>(devices[r], PQ));
    }
  }
  ok(cudaSetDevice(devices[0]), "cudaSetDevice");
  layer.forward(x.in(), w.in(), out.out(), origin);  // refuses an unrunnable plan before anything moves
  if (training) layer.backward(g.in(), gx.out(), gw.out(), gm.out(), origin);
  ok(cudaStreamSynchronize(origin), "running the step");
  LayerResults res;
  for (int r = 0; r < R; ++r) append<T>(res.out, out.ptrs[static_cast<std::size_t>(r)], S * O);
  for (int d = 0; d < R; ++d) append<T>(res.recv, layer.layer().recv(d), nvs * H);
  if (training) {
    for (int r = 0; r < R; ++r) append<T>(res.grad_x, gx.ptrs[static_cast<std::size_t>(r)], S * H);
    for (int r = 0; r < R; ++r) append<W>(res.grad_w, gw.ptrs[static_cast<std::size_t>(r)], S * K);
    for (int r = 0; r < R; ++r) append<T>(res.grad_experts, gm.ptrs[static_cast<std::size_t>(r)], PQ);
  }
  return res;
}

template <class T>
LayerResults compute(const LayerInputs& in, LayerDtype dtype, const std::vector<int>& devices) {
  using W = weight_t<T>;
  const Problem& p = in.problem;
  const Config& c = p.config;
  const int R = c.ranks;
  const std::size_t S = static_cast<std::size_t>(c.tokens), K = static_cast<std::size_t>(c.topk),
                    H = static_cast<std::size_t>(in.hidden), nvs = static_cast<std::size_t>(c.slots());
  cuda::GpuWorld world(c, devices);
  // The problem, each rank's part on its device.
  PerRankArrays<std::int32_t> routing, tpe, counts;
  std::vector<std::int64_t> lengths;
  for (int r = 0; r < R; ++r) {
    const auto& ids = p.routing[static_cast<std::size_t>(r)];
    routing.add(std::make_unique<RankArray<std::int32_t>>(devices[r], ids.data(), ids.size()));
    lengths.push_back(static_cast<std::int64_t>(ids.size()));
    if (p.tokens_per_expert) {
      const auto& t = (*p.tokens_per_expert)[static_cast<std::size_t>(r)];
      tpe.add(std::make_unique<RankArray<std::int32_t>>(devices[r], t.data(), t.size()));
    }
    if (p.tokens_per_rank)
      counts.add(std::make_unique<RankArray<std::int32_t>>(devices[r], &(*p.tokens_per_rank)[static_cast<std::size_t>(r)], 1));
  }
  cudaStream_t origin = nullptr;
  ok(cudaSetDevice(devices[0]), "cudaSetDevice");
  ok(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking), "creating the origin stream");
  struct StreamGuard {
    cudaStream_t s;
    int device;
    ~StreamGuard() {
      cudaSetDevice(device);
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  } guard{origin, devices[0]};
  world.plan(reinterpret_cast<const std::int32_t* const*>(routing.in()),
             p.tokens_per_expert ? reinterpret_cast<const std::int32_t* const*>(tpe.in()) : nullptr, origin,
             p.tokens_per_rank ? reinterpret_cast<const std::int32_t* const*>(counts.in()) : nullptr, lengths.data());
  world.check();  // the problem was validated when read; this surfaces anything else
  if (in.experts) return linear<T>(in, dtype, world, devices, origin);

  const bool training = in.grad_out != nullptr;
  cuda::GpuWorldLayer layer(world, in.hidden, in.hidden, element_of(dtype), training);
  PerRankArrays<T> x, out, g, gx;
  PerRankArrays<W> w, gw;
  for (int r = 0; r < R; ++r) {
    x.add(std::make_unique<RankArray<T>>(devices[r], part<T>(in.x.values, r, S * H).data(), S * H));
    w.add(std::make_unique<RankArray<W>>(devices[r], part<W>(in.w.values, r, S * K).data(), S * K));
    out.add(std::make_unique<RankArray<T>>(devices[r], S * H));
    if (training) {
      g.add(std::make_unique<RankArray<T>>(devices[r], part<T>(in.grad_out->values, r, S * H).data(), S * H));
      gx.add(std::make_unique<RankArray<T>>(devices[r], S * H));
      gw.add(std::make_unique<RankArray<W>>(devices[r], S * K));
    }
  }
  const std::size_t slot_bytes = nvs * H * sizeof(T);
  ok(cudaSetDevice(devices[0]), "cudaSetDevice");
  layer.dispatch(x.in(), w.in(), origin);
  // Identity experts: y = recv on every rank.
  for (int d = 0; d < R; ++d)
    ok(cudaMemcpyAsync(layer.y(d), layer.recv(d), slot_bytes, cudaMemcpyDefault, origin), "the identity experts");
  layer.combine(out.out(), true, origin);
  if (training) {
    layer.combine_backward(g.in(), true, gw.out(), origin);
    for (int d = 0; d < R; ++d)  // the identity's backward: grad_recv = grad_y
      ok(cudaMemcpyAsync(layer.grad_recv(d), layer.grad_y(d), slot_bytes, cudaMemcpyDefault, origin),
         "the identity experts' backward");
    layer.dispatch_backward(gx.out(), nullptr, origin);  // no recv_w gradient from identity experts
  }
  ok(cudaStreamSynchronize(origin), "running the step");
  LayerResults res;
  for (int r = 0; r < R; ++r) append<T>(res.out, out.ptrs[static_cast<std::size_t>(r)], S * H);
  for (int d = 0; d < R; ++d) append<T>(res.recv, layer.recv(d), nvs * H);
  if (training) {
    for (int r = 0; r < R; ++r) append<T>(res.grad_x, gx.ptrs[static_cast<std::size_t>(r)], S * H);
    for (int r = 0; r < R; ++r) append<W>(res.grad_w, gw.ptrs[static_cast<std::size_t>(r)], S * K);
  }
  return res;
}

}  // namespace

LayerResults gpu_world_layer(const LayerInputs& in, LayerDtype dtype, const std::vector<int>& listed) {
  std::string why;
  if (!cuda::device_available(&why)) throw RuntimeError("--world gpu: " + why);
  int visible = 0;
  ok(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  std::vector<int> pool = listed;
  if (pool.empty())
    for (int d = 0; d < visible; ++d) pool.push_back(d);
  std::vector<int> devices;
  for (int r = 0; r < in.problem.config.ranks; ++r) devices.push_back(pool[static_cast<std::size_t>(r) % pool.size()]);
  switch (dtype) {
    case LayerDtype::float64: return compute<double>(in, dtype, devices);
    case LayerDtype::bfloat16: return compute<bf16>(in, dtype, devices);
    case LayerDtype::float32: break;
  }
  return compute<float>(in, dtype, devices);
}

}  // namespace moonep::tools
