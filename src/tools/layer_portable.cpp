// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --backend portable: the step on Kokkos' default execution
// space, planned by moonep::Planner over an InProcessWorld (its automatic
// path: the portable phases, or the CUDA specialization where Kokkos::Cuda
// is the default and MoonEP has it) and applied by
// moonep::InProcessLayer (moonep/layer.hpp), or with --experts by
// moonep::InProcessMoeLayer (moonep/moe_layer.hpp) with its portable GEMM
// kernel, whose summation order layer_linear.cpp follows. Every --dtype:
// float, double and bf16 (moonep::bf16, as the reference backend). Its files are
// bit-identical to the reference backend's (the CLI tests compare both
// with the same direct layer on exact data).
#include <Kokkos_Core.hpp>

#include <string>
#include <vector>

#include "kokkos_session.hpp"
#include "layer_run.hpp"
#include "moonep/layer.hpp"
#include "moonep/moe_layer.hpp"
#include "moonep/planner.hpp"
#include "moonep/world.hpp"

namespace moonep::tools {

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

template <class V>
using Rows = Kokkos::View<V***, Kokkos::LayoutRight, Mem>;

// A [R][n][m] array of doubles as a view of V (values rounded to V).
template <class V>
Rows<V> to_view(const char* label, const std::vector<double>& values, std::int64_t r, std::int64_t n,
                std::int64_t m) {
  Rows<V> v(std::string(label), r, n, m);
  auto h = Kokkos::create_mirror_view(v);
  // Through the accumulation type, as the reference backend rounds its
  // inputs (bf16 from float; float and double directly).
  for (std::int64_t i = 0; i < r * n * m; ++i) h.data()[i] = static_cast<V>(static_cast<accum_t<V>>(values[i]));
  Kokkos::deep_copy(v, h);
  return v;
}
template <class View>
std::vector<double> to_values(const View& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    out[i] = static_cast<double>(static_cast<accum_t<typename View::non_const_value_type>>(h.data()[i]));
  return out;
}

Kokkos::View<const std::int32_t*, Mem> int_view(const std::vector<std::int32_t>& host) {
  Kokkos::View<std::int32_t*, Mem> v("moonep-layer::input", host.size());
  Kokkos::deep_copy(v, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(host.data(),
                                                                                                       host.size()));
  return v;
}

// The linear layer (--experts) on the plan.
template <class T>
LayerResults linear(const LayerInputs& in, const Plan<Mem>& plan) {
  using W = weight_t<T>;
  const Config& c = in.problem.config;
  const std::int64_t R = c.ranks, S = c.tokens, K = c.topk, H = in.hidden, O = in.hidden_out;
  const std::int64_t epn = c.experts_per_rank();
  InProcessMoeLayer<T, Exec> layer(c, in.hidden, in.hidden_out, GemmKind::portable);
  const Rows<T> x = to_view<T>("moonep-layer::x", in.x.values, R, S, H);
  const Rows<W> w = to_view<W>("moonep-layer::w", in.w.values, R, S, K);
  const Rows<T> m = to_view<T>("moonep-layer::experts", in.experts->values, R, epn, H * O);  // [E][H][H']
  const Rows<T> out("moonep-layer::out", R, S, O);  // zeroed
  layer.forward(plan, x, w, m, out);
  LayerResults res;
  if (in.grad_out) {
    const Rows<T> g = to_view<T>("moonep-layer::grad_out", in.grad_out->values, R, S, O);
    const Rows<T> gx("moonep-layer::grad_x", R, S, H), gm("moonep-layer::grad_experts", R, epn, H * O);
    const Rows<W> gw("moonep-layer::grad_w", R, S, K);
    layer.backward(plan, g, m, gx, gw, gm);
    res.grad_x = to_values(gx);
    res.grad_w = to_values(gw);
    res.grad_experts = to_values(gm);
  }
  res.out = to_values(out);
  res.recv = to_values(layer.recv());
  return res;
}

template <class T>
LayerResults compute(const LayerInputs& in) {
  using W = weight_t<T>;
  const Problem& p = in.problem;
  const Config& c = p.config;
  const std::int64_t R = c.ranks, S = c.tokens, K = c.topk, H = in.hidden, nvs = c.slots();
  InProcessWorld<Mem> world(c.ranks);
  Planner<Exec> planner(c, world);
  std::vector<Kokkos::View<const std::int32_t*, Mem>> routing, tpe;
  for (const auto& r : p.routing) routing.push_back(int_view(r));
  if (p.tokens_per_expert)
    for (const auto& r : *p.tokens_per_expert) tpe.push_back(int_view(r));
  const auto counts = p.tokens_per_rank ? int_view(*p.tokens_per_rank) : Kokkos::View<const std::int32_t*, Mem>();
  const auto& plan = planner.plan(routing, p.tokens_per_expert ? &tpe : nullptr, p.tokens_per_rank ? &counts : nullptr);
  if (in.experts) return linear<T>(in, plan);

  InProcessLayer<T, Exec> layer(c, in.hidden);
  const Rows<T> x = to_view<T>("moonep-layer::x", in.x.values, R, S, H);
  const Rows<W> w = to_view<W>("moonep-layer::w", in.w.values, R, S, K);
  const Rows<T> recv("moonep-layer::recv", R, nvs, H), out("moonep-layer::out", R, S, H);  // zeroed
  const Kokkos::View<W**, Kokkos::LayoutRight, Mem> recv_w("moonep-layer::recv_w", R, nvs);
  layer.dispatch(plan, x, w, recv, recv_w);
  layer.combine(plan, recv, recv_w, out);  // identity experts: y = recv
  LayerResults res;
  if (in.grad_out) {
    const Rows<T> g = to_view<T>("moonep-layer::grad_out", in.grad_out->values, R, S, H);
    const Rows<T> gy("moonep-layer::grad_y", R, nvs, H), gx("moonep-layer::grad_x", R, S, H);
    const Rows<W> gw("moonep-layer::grad_w", R, S, K);
    layer.combine_backward(plan, g, recv, recv_w, gy, gw);
    layer.dispatch_backward(plan, gy, gx);  // identity experts: recv_w unused, no gradient
    res.grad_x = to_values(gx);
    res.grad_w = to_values(gw);
  }
  res.out = to_values(out);
  res.recv = to_values(recv);
  return res;
}

}  // namespace

LayerResults portable_layer(const LayerInputs& in, LayerDtype dtype) {
  // Started after every input was read and checked: an input error stays
  // the only line on standard error. Every view dies before finalize.
  KokkosSession session("moonep-layer", {});
  switch (dtype) {
    case LayerDtype::float64: return compute<double>(in);
    case LayerDtype::bfloat16: return compute<bf16>(in);
    case LayerDtype::float32: break;
  }
  return compute<float>(in);
}

}  // namespace moonep::tools
