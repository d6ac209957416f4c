// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --experts on --backend reference: the linear layer
// (docs/spec/layer.md "The linear layer") over the reference operations:
// fetch_reference, dispatch_reference, one GEMM per non-empty group,
// combine_reference; backward: combine_backward_reference, each group's
// GEMMs' backward, dispatch_backward_reference, reduce_reference.
//
// What must stay true: each GEMM value is accum_t<T> summed from 0 in
// increasing inner index and rounded to T once, a weight gradient added to
// its (zeroed) buffer as T(A(gM) + sum) — the order of
// InProcessMoeLayer's portable kernel, which --backend portable runs, so
// both backends write the same bits.
#include <string>
#include <vector>

#include "layer_buffers.hpp"
#include "layer_run.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/reference.hpp"

namespace moonep::tools {

namespace {

// Slots from..to of rank d's group g, and the group's parameters: its own
// expert P_d[g mod epn] (g < E) or copy slot g - E.
struct Group {
  std::int64_t from, to, param;  // param: first value in own or copies
  bool own;
};
Group group_of(const HostPlan& plan, int d, int g, std::int64_t q) {
  const Config& c = plan.config;
  const std::vector<std::int32_t>& cu = plan.ranks[d].cu_seqlens;
  const bool own = g < c.experts;
  return {g == 0 ? 0 : cu[g - 1], cu[g], (own ? g % c.experts_per_rank() : g - c.experts) * q, own};
}

}  // namespace

template <class T>
LayerResults reference_linear_layer(const LayerInputs& in) {
  using W = weight_t<T>;
  using A = accum_t<T>;
  const Problem& problem = in.problem;
  const Config& c = problem.config;
  const std::int64_t H = in.hidden, O = in.hidden_out, Q = H * O, nvs = c.slots();
  const HostPlan plan = plan_reference(c, problem.routing, problem.tokens_per_expert ? &*problem.tokens_per_expert : nullptr,
                                       problem.tokens_per_rank ? &*problem.tokens_per_rank : nullptr);
  // M [E][H][H'] is, rank-major, every rank's P [epn][Q].
  const PerRank<T> own = to_ranks<T>(in.experts->values, c.ranks);
  PerRank<T> copies = zeros<T>(c.ranks, c.copy_slots * Q);
  fetch_reference(plan, Q, own, copies);  // refuses a remote expert without a copy, first
  const PerRank<T> x = to_ranks<T>(in.x.values, c.ranks);
  const PerRank<W> w = to_ranks<W>(in.w.values, c.ranks);
  PerRank<T> recv = zeros<T>(c.ranks, nvs * H), y = zeros<T>(c.ranks, nvs * O);
  PerRank<W> recv_w = zeros<W>(c.ranks, nvs);
  dispatch_reference(plan, static_cast<int>(H), x, w, recv, recv_w);
  for (int d = 0; d < c.ranks; ++d)
    for (int g = 0; g < c.groups(); ++g) {
      const Group grp = group_of(plan, d, g, Q);
      const T* m = &(grp.own ? own : copies)[d][grp.param];
      for (std::int64_t s = grp.from; s < grp.to; ++s)
        for (std::int64_t o = 0; o < O; ++o) {
          A acc = 0;
          for (std::int64_t h = 0; h < H; ++h) acc += A(recv[d][s * H + h]) * A(m[h * O + o]);
          y[d][s * O + o] = static_cast<T>(acc);
        }
    }
  PerRank<T> out = zeros<T>(c.ranks, std::int64_t{c.tokens} * O);
  combine_reference<T>(plan, static_cast<int>(O), y, &w, out);
  LayerResults res;
  res.out = from_ranks(out);
  res.recv = from_ranks(recv);
  if (!in.grad_out) return res;

  const PerRank<T> go = to_ranks<T>(in.grad_out->values, c.ranks);
  PerRank<T> gy = zeros<T>(c.ranks, nvs * O), grecv = zeros<T>(c.ranks, nvs * H);
  PerRank<W> gw = zeros<W>(c.ranks, c.entries());
  combine_backward_reference(plan, static_cast<int>(O), go, y, &w, gy, &gw);
  PerRank<T> gown = zeros<T>(c.ranks, c.experts_per_rank() * Q), gcopies = zeros<T>(c.ranks, c.copy_slots * Q);
  for (int d = 0; d < c.ranks; ++d)
    for (int g = 0; g < c.groups(); ++g) {
      const Group grp = group_of(plan, d, g, Q);
      if (grp.to <= grp.from) continue;
      const T* m = &(grp.own ? own : copies)[d][grp.param];
      T* gm = &(grp.own ? gown : gcopies)[d][grp.param];
      for (std::int64_t s = grp.from; s < grp.to; ++s)  // grad_recv = grad_y M^T
        for (std::int64_t h = 0; h < H; ++h) {
          A acc = 0;
          for (std::int64_t o = 0; o < O; ++o) acc += A(gy[d][s * O + o]) * A(m[h * O + o]);
          grecv[d][s * H + h] = static_cast<T>(acc);
        }
      for (std::int64_t h = 0; h < H; ++h)  // grad_M += recv^T grad_y
        for (std::int64_t o = 0; o < O; ++o) {
          A acc = 0;
          for (std::int64_t s = grp.from; s < grp.to; ++s) acc += A(recv[d][s * H + h]) * A(gy[d][s * O + o]);
          gm[h * O + o] = static_cast<T>(A(gm[h * O + o]) + acc);
        }
    }
  PerRank<T> gx = zeros<T>(c.ranks, std::int64_t{c.tokens} * H);
  dispatch_backward_reference<T>(plan, static_cast<int>(H), grecv, nullptr, gx, nullptr);
  reduce_reference(plan, Q, gcopies, gown);
  res.grad_x = from_ranks(gx);
  res.grad_w = from_ranks(gw);
  res.grad_experts = from_ranks(gown);
  return res;
}

template LayerResults reference_linear_layer<float>(const LayerInputs&);
template LayerResults reference_linear_layer<double>(const LayerInputs&);
template LayerResults reference_linear_layer<bf16>(const LayerInputs&);

}  // namespace moonep::tools
