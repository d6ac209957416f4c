// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankLayer (moonep/cuda_layer.hpp): dispatch,
// combine and their backward for the virtual ranks of a VirtualRankPlanner.
// This file checks arguments and launches; the kernels are in
// scatter_kernels.cuh (rows out to slots), gather_kernels.cuh (slots back
// to tokens) and entry_kernels.cuh (per-entry weight gradients).
//
//   dispatch          scatter_rows<bits> (x -> recv, w -> recv_w), zero_padding
//   combine           gather_rows (weighted or not)
//   combine_backward  scatter_rows<scaled or bits> (grad_out -> grad_y),
//                     zero_padding, entry_dots (grad_w)
//   dispatch_backward gather_rows unweighted (grad_recv -> grad_x),
//                     add_slot_weights (grad_w += grad_recv_w)
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "../host_checks.hpp"
#include "element_sizes.hpp"
#include "entry_kernels.cuh"
#include "gather_kernels.cuh"
#include "moonep/cuda_layer.hpp"
#include "moonep/error.hpp"
#include "scatter_kernels.cuh"

namespace moonep::cuda {

using layer::i64;
using layer::kThreads;
using layer::LayerParams;

namespace {

// Rows move in 16-byte pieces when a row is a whole number of them and
// every row buffer of the call starts on a 16-byte boundary.
LayerParams with_pieces(LayerParams p, std::initializer_list<const void*> rows) {
  p.vec16 = p.row_bytes % 16 == 0;
  for (const void* v : rows) p.vec16 = p.vec16 && aligned16(v);
  return p;
}

void require(std::initializer_list<const void*> buffers, const char* op) {
  for (const void* b : buffers)
    if (!b) throw InputError(std::string("moonep::cuda::VirtualRankLayer::") + op + ": a buffer is null");
}

i64 tokens(const LayerParams& p) { return static_cast<i64>(p.R) * p.S; }
i64 entries(const LayerParams& p) { return tokens(p) * p.K; }
i64 ranges(const LayerParams& p) { return static_cast<i64>(p.R) * p.groups; }

// The launches of each operation for one element type T (weights A).
template <class T>
struct Launch {
  using A = typename layer::Arith<T>::A;

  static void dispatch(const LayerParams& p, const void* x, const void* w, void* recv, void* recv_w, cudaStream_t s) {
    layer::scatter_rows<T, false><<<layer::blocks_for(tokens(p)), kThreads, 0, s>>>(
        p, static_cast<const T*>(x), static_cast<const A*>(w), static_cast<A*>(recv_w), nullptr, static_cast<T*>(recv));
    layer::zero_padding<T><<<layer::blocks_for(ranges(p)), kThreads, 0, s>>>(p, static_cast<T*>(recv),
                                                                              static_cast<A*>(recv_w));
  }

  static void combine(const LayerParams& p, const void* y, const void* recv_w, void* out, cudaStream_t s) {
    layer::gather_rows<T><<<layer::blocks_for(tokens(p)), kThreads, 0, s>>>(
        p, static_cast<const T*>(y), static_cast<const A*>(recv_w), static_cast<T*>(out));
  }

  static void combine_backward(const LayerParams& p, const void* g, const void* y, const void* recv_w, void* gy,
                               void* gw, cudaStream_t s) {
    const int blocks = layer::blocks_for(tokens(p));
    if (recv_w) {
      layer::scatter_rows<T, true><<<blocks, kThreads, 0, s>>>(p, static_cast<const T*>(g), nullptr, nullptr,
                                                               static_cast<const A*>(recv_w), static_cast<T*>(gy));
    } else {
      layer::scatter_rows<T, false>
          <<<blocks, kThreads, 0, s>>>(p, static_cast<const T*>(g), nullptr, nullptr, nullptr, static_cast<T*>(gy));
    }
    layer::zero_padding<T><<<layer::blocks_for(ranges(p)), kThreads, 0, s>>>(p, static_cast<T*>(gy), nullptr);
    if (recv_w && gw) {
      layer::entry_dots<T><<<layer::blocks_for_threads(entries(p)), kThreads, 0, s>>>(
          p, static_cast<const T*>(g), static_cast<const T*>(y), static_cast<A*>(gw));
    }
  }

  static void dispatch_backward(const LayerParams& p, const void* grecv, const void* grecv_w, void* gx, void* gw,
                                cudaStream_t s) {
    layer::gather_rows<T><<<layer::blocks_for(tokens(p)), kThreads, 0, s>>>(p, static_cast<const T*>(grecv), nullptr,
                                                                            static_cast<T*>(gx));
    if (grecv_w) {
      layer::add_slot_weights<A><<<layer::blocks_for_threads(entries(p)), kThreads, 0, s>>>(
          p, static_cast<const A*>(grecv_w), static_cast<A*>(gw));
    }
  }
};

// f(Launch<T>{}) for the layer's element type T.
template <class F>
void for_element(Element e, F&& f) {
  switch (e) {
    case Element::f32: f(Launch<float>{}); break;
    case Element::f64: f(Launch<double>{}); break;
    case Element::bf16: f(Launch<__nv_bfloat16>{}); break;
  }
}

}  // namespace

struct VirtualRankLayer::State {
  Element type;
  LayerParams p{};
};

VirtualRankLayer::VirtualRankLayer(const VirtualRankPlanner& planner, int hidden, Element type)
    : s_(std::make_unique<State>()) {
  const Config& c = planner.config();
  if (hidden < 1) throw InputError("moonep::cuda::VirtualRankLayer: H must be at least 1, got " + std::to_string(hidden));
  State& s = *s_;
  s.type = type;
  LayerParams& p = s.p;
  p.R = c.ranks;
  p.K = c.topk;
  p.S = c.tokens;
  p.NvS = static_cast<int>(c.slots());
  p.groups = c.groups();
  p.H = hidden;
  p.row_bytes = p.H * element_bytes(type);
  p.plan = planner.rank_plan(0);
  p.plan_stride = c.ranks > 1 ? planner.rank_plan(1).dst - planner.rank_plan(0).dst : 0;
  // Every rank's outputs lie at one stride (the planner's layout); checked
  // here, once, so the kernels can compute them.
  for (int r = 0; r < c.ranks; ++r) {
    const DeviceRankPlan& q = planner.rank_plan(r);
    const i64 off = static_cast<i64>(r) * p.plan_stride;
    if (q.dst != p.plan.dst + off || q.zero_fill_ranges != p.plan.zero_fill_ranges + off ||
        q.entries != p.plan.entries + off) {
      throw RuntimeError("moonep::cuda::VirtualRankLayer: the planner's rank outputs are not evenly strided");
    }
  }
}

VirtualRankLayer::~VirtualRankLayer() = default;
int VirtualRankLayer::hidden() const { return static_cast<int>(s_->p.H); }
Element VirtualRankLayer::element() const { return s_->type; }

void VirtualRankLayer::dispatch(const void* x, const void* w, void* recv, void* recv_w, cudaStream_t stream) const {
  require({x, w, recv, recv_w}, "dispatch");
  const LayerParams p = with_pieces(s_->p, {x, recv});
  for_element(s_->type, [&](auto l) { l.dispatch(p, x, w, recv, recv_w, stream); });
  impl::check_cuda(cudaGetLastError(), "launching the dispatch kernels");
}

void VirtualRankLayer::combine(const void* y, const void* recv_w, void* out, cudaStream_t stream) const {
  require({y, out}, "combine");
  const LayerParams p = with_pieces(s_->p, {y, out});
  for_element(s_->type, [&](auto l) { l.combine(p, y, recv_w, out, stream); });
  impl::check_cuda(cudaGetLastError(), "launching the combine kernel");
}

void VirtualRankLayer::combine_backward(const void* grad_out, const void* y, const void* recv_w, void* grad_y,
                                        void* grad_w, cudaStream_t stream) const {
  require({grad_out, grad_y}, "combine_backward");
  if (recv_w) require({y, grad_w}, "combine_backward (weighted: y and grad_w)");
  const LayerParams p = with_pieces(s_->p, {grad_out, grad_y, recv_w ? y : grad_out});
  for_element(s_->type, [&](auto l) { l.combine_backward(p, grad_out, y, recv_w, grad_y, grad_w, stream); });
  impl::check_cuda(cudaGetLastError(), "launching the combine backward kernels");
}

void VirtualRankLayer::dispatch_backward(const void* grad_recv, const void* grad_recv_w, void* grad_x, void* grad_w,
                                         cudaStream_t stream) const {
  require({grad_recv, grad_x}, "dispatch_backward");
  if ((grad_recv_w == nullptr) != (grad_w == nullptr))
    throw InputError("moonep::cuda::VirtualRankLayer::dispatch_backward: grad_recv_w and grad_w go together (both or neither)");
  const LayerParams p = with_pieces(s_->p, {grad_recv, grad_x});
  for_element(s_->type, [&](auto l) { l.dispatch_backward(p, grad_recv, grad_recv_w, grad_x, grad_w, stream); });
  impl::check_cuda(cudaGetLastError(), "launching the dispatch backward kernels");
}

}  // namespace moonep::cuda
