// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The reference layer operations: docs/spec/layer.md as serial C++ over a
// HostPlan of all ranks. The code follows the contract's transport (rows
// per primary, the dispatch epilogue and combine prologue through
// dup_groups/dup_loffs, partial rows in the accumulation type) so that its
// summation order is the contract's and every faster path can match it bit
// for bit. All checks come before the first write.
#include <string>

#include "core/layer_checks.hpp"
#include "moonep/layer_reference.hpp"

namespace moonep {

namespace {

using layer::check_buffer;
using layer::check_width;
using layer::decode_dst;
using layer::Destination;

template <class T>
accum_t<T> widen(T v) {
  return static_cast<accum_t<T>>(v);
}
template <class T>
T round_to(accum_t<T> v) {
  return static_cast<T>(v);  // bf16's constructor rounds to nearest even
}

// The source entry (rank r, entry i) of a filled slot's src_info value.
struct Source {
  int rank;
  std::int64_t entry;
};
Source decode_src(std::int32_t src, std::int64_t nvs) {
  return {static_cast<int>(src / nvs), src % nvs};
}

std::string times(const char* a, const char* b) { return std::string(a) + "*" + b; }

// What every operation reads of the plan, once checked.
struct Shape {
  const Config& c;
  std::int64_t nvs;
  std::vector<std::int32_t> tokens;  // s_r
  // The plan is checked before anything is read from it.
  explicit Shape(const HostPlan& plan)
      : c(plan.config), nvs((check_layer_plan(plan), plan.config.slots())), tokens(layer::plan_tokens(plan)) {}
};

// The summed rows of an (optionally weighted) combine, docs/spec/layer.md
// "Combine": out[r][t] = round(sum over k in the contract's order). Used by
// combine (rows = y) and by dispatch's backward (rows = grad_recv, no
// weights). Buffers are checked by the caller.
template <class T>
void sum_rows(const HostPlan& plan, const Shape& s, std::int64_t width, const PerRank<T>& rows,
              const PerRank<weight_t<T>>* w, PerRank<T>& out) {
  using A = accum_t<T>;
  const Config& c = s.c;
  const int K = c.topk;
  auto weight_of = [&](const Source& src) -> A {
    return w ? (*w)[src.rank][src.entry] : A(1);
  };
  // 1. Prologue on every destination: one partial row per primary slot.
  PerRank<A> part(c.ranks);
  for (int d = 0; d < c.ranks; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    part[d].assign(static_cast<std::size_t>(s.nvs * width), A(0));
    for (std::int64_t slot = 0; slot < s.nvs; ++slot) {
      if (p.src_info[slot] < 0) continue;
      const Source src = decode_src(p.src_info[slot], s.nvs);
      if (plan.ranks[src.rank].dst[src.entry] < 0) continue;  // a duplicate: added below
      const A f = weight_of(src);
      for (std::int64_t h = 0; h < width; ++h)
        part[d][slot * width + h] = w ? f * widen(rows[d][slot * width + h]) : widen(rows[d][slot * width + h]);
    }
    for (std::int32_t j = 0; j < p.dup_counts[0]; ++j) {
      const std::int64_t primary = p.dup_groups[3 * j];
      const std::int32_t start = p.dup_groups[3 * j + 1], n = p.dup_groups[3 * j + 2];
      for (std::int32_t q = start; q < start + n; ++q) {
        const std::int64_t slot = p.dup_loffs[q];
        const A f = weight_of(decode_src(p.src_info[slot], s.nvs));
        for (std::int64_t h = 0; h < width; ++h) {
          const A v = widen(rows[d][slot * width + h]);
          part[d][primary * width + h] += w ? f * v : v;
        }
      }
    }
  }
  // 2. Every source adds its primaries' partial rows in increasing k.
  std::vector<A> acc(static_cast<std::size_t>(width));
  for (int r = 0; r < c.ranks; ++r)
    for (std::int64_t t = 0; t < s.tokens[r]; ++t) {
      bool first = true;
      for (int k = 0; k < K; ++k) {
        const Destination to = decode_dst(plan.ranks[r].dst[t * K + k], s.nvs);
        if (!to.primary) continue;
        const A* row = &part[to.rank][to.loff * width];
        for (std::int64_t h = 0; h < width; ++h) acc[h] = first ? row[h] : acc[h] + row[h];
        first = false;
      }
      for (std::int64_t h = 0; h < width; ++h) out[r][t * width + h] = round_to<T>(acc[h]);
    }
}

// Zero rows (and weights) in every padding range of rank d.
template <class T, class V>
void zero_padding(const HostRankPlan& p, int groups, std::int64_t width, std::vector<T>& rows,
                  std::vector<V>* weights) {
  for (int g = 0; g < groups; ++g)
    for (std::int64_t slot = p.zero_fill_ranges[2 * g]; slot < p.zero_fill_ranges[2 * g] + p.zero_fill_ranges[2 * g + 1];
         ++slot) {
      for (std::int64_t h = 0; h < width; ++h) rows[slot * width + h] = round_to<T>(0);
      if (weights) (*weights)[slot] = V(0);
    }
}

}  // namespace

template <class T>
void dispatch_reference(const HostPlan& plan, int hidden, const PerRank<T>& x, const PerRank<weight_t<T>>& w,
                        PerRank<T>& recv, PerRank<weight_t<T>>& recv_w) {
  const char* op = "dispatch";
  const Shape s(plan);
  const Config& c = s.c;
  const int K = c.topk;
  check_width(op, "H", hidden);
  check_buffer(op, "x", x, c.ranks, std::int64_t{c.tokens} * hidden, times("S", "H"));
  check_buffer(op, "w", w, c.ranks, c.entries(), times("S", "K"));
  check_buffer(op, "recv", recv, c.ranks, s.nvs * hidden, times("NvS", "H"));
  check_buffer(op, "recv_w", recv_w, c.ranks, s.nvs, "NvS");
  for (int d = 0; d < c.ranks; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    // Primaries carry their token's row; every filled slot its own weight.
    for (std::int64_t slot = 0; slot < s.nvs; ++slot) {
      if (p.src_info[slot] < 0) continue;
      const Source src = decode_src(p.src_info[slot], s.nvs);
      recv_w[d][slot] = w[src.rank][src.entry];
      if (plan.ranks[src.rank].dst[src.entry] < 0) continue;
      const std::int64_t t = src.entry / K;
      for (std::int64_t h = 0; h < hidden; ++h) recv[d][slot * hidden + h] = x[src.rank][t * hidden + h];
    }
    zero_padding(p, c.groups(), hidden, recv[d], &recv_w[d]);
    // The epilogue: duplicates copy their primary's row.
    for (std::int32_t j = 0; j < p.dup_counts[0]; ++j) {
      const std::int64_t primary = p.dup_groups[3 * j];
      for (std::int32_t q = p.dup_groups[3 * j + 1]; q < p.dup_groups[3 * j + 1] + p.dup_groups[3 * j + 2]; ++q)
        for (std::int64_t h = 0; h < hidden; ++h)
          recv[d][p.dup_loffs[q] * hidden + h] = recv[d][primary * hidden + h];
    }
  }
}

template <class T>
void combine_reference(const HostPlan& plan, int hidden_out, const PerRank<T>& y, const PerRank<weight_t<T>>* w,
                       PerRank<T>& out) {
  const char* op = "combine";
  const Shape s(plan);
  const Config& c = s.c;
  check_width(op, "H'", hidden_out);
  check_buffer(op, "y", y, c.ranks, s.nvs * hidden_out, times("NvS", "H'"));
  if (w) check_buffer(op, "w", *w, c.ranks, c.entries(), times("S", "K"));
  check_buffer(op, "out", out, c.ranks, std::int64_t{c.tokens} * hidden_out, times("S", "H'"));
  sum_rows(plan, s, hidden_out, y, w, out);
}

template <class T>
void combine_backward_reference(const HostPlan& plan, int hidden_out, const PerRank<T>& grad_out,
                                const PerRank<T>& y, const PerRank<weight_t<T>>* w, PerRank<T>& grad_y,
                                PerRank<weight_t<T>>* grad_w) {
  using A = accum_t<T>;
  const char* op = "combine backward";
  const Shape s(plan);
  const Config& c = s.c;
  const int K = c.topk;
  const std::int64_t width = hidden_out;
  check_width(op, "H'", hidden_out);
  check_buffer(op, "grad_out", grad_out, c.ranks, std::int64_t{c.tokens} * width, times("S", "H'"));
  if (w) check_buffer(op, "w", *w, c.ranks, c.entries(), times("S", "K"));
  check_buffer(op, "grad_y", grad_y, c.ranks, s.nvs * width, times("NvS", "H'"));
  if (grad_w) {
    if (!w) throw InputError(std::string(op) + ": grad_w needs the routing weights w (weighted = true)");
    check_buffer(op, "y", y, c.ranks, s.nvs * width, times("NvS", "H'"));
    check_buffer(op, "grad_w", *grad_w, c.ranks, c.entries(), times("S", "K"));
  }
  for (int d = 0; d < c.ranks; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    for (std::int64_t slot = 0; slot < s.nvs; ++slot) {
      if (p.src_info[slot] < 0) continue;
      const Source src = decode_src(p.src_info[slot], s.nvs);
      const T* g = &grad_out[src.rank][(src.entry / K) * width];
      T* gy = &grad_y[d][slot * width];
      if (w) {
        const A f = (*w)[src.rank][src.entry];
        for (std::int64_t h = 0; h < width; ++h) gy[h] = round_to<T>(f * widen(g[h]));
      } else {
        for (std::int64_t h = 0; h < width; ++h) gy[h] = g[h];
      }
    }
    zero_padding<T, A>(p, c.groups(), width, grad_y[d], nullptr);
  }
  if (!grad_w) return;
  for (int r = 0; r < c.ranks; ++r)
    for (std::int64_t i = 0; i < s.tokens[r] * K; ++i) {
      const Destination to = decode_dst(plan.ranks[r].dst[i], s.nvs);
      const T* g = &grad_out[r][(i / K) * width];
      const T* yr = &y[to.rank][to.loff * width];
      A dot = 0;
      for (std::int64_t h = 0; h < width; ++h) dot += widen(g[h]) * widen(yr[h]);
      (*grad_w)[r][i] = dot;
    }
}

template <class T>
void dispatch_backward_reference(const HostPlan& plan, int hidden, const PerRank<T>& grad_recv,
                                 const PerRank<weight_t<T>>* grad_recv_w, PerRank<T>& grad_x,
                                 PerRank<weight_t<T>>* grad_w) {
  const char* op = "dispatch backward";
  const Shape s(plan);
  const Config& c = s.c;
  check_width(op, "H", hidden);
  check_buffer(op, "grad_recv", grad_recv, c.ranks, s.nvs * hidden, times("NvS", "H"));
  check_buffer(op, "grad_x", grad_x, c.ranks, std::int64_t{c.tokens} * hidden, times("S", "H"));
  if ((grad_recv_w == nullptr) != (grad_w == nullptr))
    throw InputError(std::string(op) + ": grad_recv_w and grad_w go together (both or neither)");
  if (grad_w) {
    check_buffer(op, "grad_recv_w", *grad_recv_w, c.ranks, s.nvs, "NvS");
    check_buffer(op, "grad_w", *grad_w, c.ranks, c.entries(), times("S", "K"));
  }
  sum_rows<T>(plan, s, hidden, grad_recv, nullptr, grad_x);
  if (!grad_w) return;
  for (int r = 0; r < c.ranks; ++r)
    for (std::int64_t i = 0; i < s.tokens[r] * c.topk; ++i) {
      const Destination to = decode_dst(plan.ranks[r].dst[i], s.nvs);
      (*grad_w)[r][i] += (*grad_recv_w)[to.rank][to.loff];
    }
}

template <class T>
void fetch_reference(const HostPlan& plan, std::int64_t params, const PerRank<T>& experts, PerRank<T>& copies) {
  const char* op = "fetch";
  const Shape s(plan);
  const Config& c = s.c;
  check_width(op, "Q", params);
  check_buffer(op, "P", experts, c.ranks, c.experts_per_rank() * params, times("epn", "Q"));
  check_buffer(op, "copies", copies, c.ranks, c.copy_slots * params, times("B", "Q"));
  check_experts_runnable(plan);
  const int epn = c.experts_per_rank();
  for (int d = 0; d < c.ranks; ++d)
    for (int b = 0; b < c.copy_slots; ++b) {
      const std::int32_t e = plan.ranks[d].experts_to_copy[std::int64_t{d} * c.copy_slots + b];
      if (e < 0) continue;
      const T* from = &experts[e / epn][(e % epn) * params];
      for (std::int64_t q = 0; q < params; ++q) copies[d][b * params + q] = from[q];
    }
}

template <class T>
void reduce_reference(const HostPlan& plan, std::int64_t params, const PerRank<T>& grad_copies,
                      PerRank<T>& grad_experts) {
  using A = accum_t<T>;
  const char* op = "reduce";
  const Shape s(plan);
  const Config& c = s.c;
  check_width(op, "Q", params);
  check_buffer(op, "grad_copies", grad_copies, c.ranks, c.copy_slots * params, times("B", "Q"));
  check_buffer(op, "grad_P", grad_experts, c.ranks, c.experts_per_rank() * params, times("epn", "Q"));
  check_experts_runnable(plan);
  const int epn = c.experts_per_rank();
  // experts_to_copy is the same table on every rank; rank 0's is read.
  const std::vector<std::int32_t>& table = plan.ranks[0].experts_to_copy;
  std::vector<A> acc(static_cast<std::size_t>(params));
  for (int e = 0; e < c.experts; ++e) {
    T* g = &grad_experts[e / epn][(e % epn) * params];
    bool copied = false;
    for (std::int64_t q = 0; q < params; ++q) acc[q] = widen(g[q]);
    for (int d = 0; d < c.ranks; ++d)
      for (int b = 0; b < c.copy_slots; ++b) {
        if (table[std::int64_t{d} * c.copy_slots + b] != e) continue;
        copied = true;
        for (std::int64_t q = 0; q < params; ++q) acc[q] += widen(grad_copies[d][b * params + q]);
      }
    if (copied)
      for (std::int64_t q = 0; q < params; ++q) g[q] = round_to<T>(acc[q]);
  }
}

#define MOONEP_LAYER_REFERENCE(T)                                                                          \
  template void dispatch_reference<T>(const HostPlan&, int, const PerRank<T>&, const PerRank<weight_t<T>>&, \
                                      PerRank<T>&, PerRank<weight_t<T>>&);                                 \
  template void combine_reference<T>(const HostPlan&, int, const PerRank<T>&, const PerRank<weight_t<T>>*, \
                                     PerRank<T>&);                                                         \
  template void combine_backward_reference<T>(const HostPlan&, int, const PerRank<T>&, const PerRank<T>&,  \
                                              const PerRank<weight_t<T>>*, PerRank<T>&,                    \
                                              PerRank<weight_t<T>>*);                                      \
  template void dispatch_backward_reference<T>(const HostPlan&, int, const PerRank<T>&,                    \
                                               const PerRank<weight_t<T>>*, PerRank<T>&,                   \
                                               PerRank<weight_t<T>>*);                                     \
  template void fetch_reference<T>(const HostPlan&, std::int64_t, const PerRank<T>&, PerRank<T>&);         \
  template void reduce_reference<T>(const HostPlan&, std::int64_t, const PerRank<T>&, PerRank<T>&);
MOONEP_LAYER_REFERENCE(float)
MOONEP_LAYER_REFERENCE(double)
MOONEP_LAYER_REFERENCE(bf16)
#undef MOONEP_LAYER_REFERENCE

}  // namespace moonep
