// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/layer.hpp — dispatch, combine and their backward
// (docs/spec/layer.md) as Kokkos kernels, for the plan of an in-process world (moonep::InProcessWorld: every
// rank in this process, so every rank's buffers are one view whose first
// extent is the rank). The portable path beside the reference
// (moonep/layer_reference.hpp), which it matches bit for bit.
//
// Views in, views out, one execution space instance; the partial rows of
// the combine prologue are allocated once, for H and T, when the object is
// made, and nothing per step. The operations enqueue kernels on the
// instance and return without fencing (no host synchronisation, so a step
// can be captured with the plan); the caller fences before reading.
// Ragged steps: the counts are read on the device (plan.ranks[r].entries),
// so rows past s_r are never read.
//
// The transport is the contract's: each source rank writes its primaries'
// rows straight into the destination's receive buffer and every entry's
// weight; each destination zeroes its padding and copies primaries' rows
// into their duplicates' slots (dispatch epilogue). Combine weights every
// slot by recv_w at the destination, adds duplicates into their primary
// (prologue, increasing k), and each source adds its primaries' partial
// rows in increasing k, rounding to T once.
//
// T: float, double or moonep::bf16 (moonep/bf16.hpp: a 16-bit struct whose
// conversions are host and device functions, so the same type on every
// Kokkos version and execution space). Rows move as T's bits; every sum is
// in accum_t<T> (float for bf16) and rounded to T once, bf16 to nearest
// even with NaN kept (the conversions of moonep::bf16).
//
// Whatever the plan's views hold, no kernel reads or writes outside a
// buffer: every slot, rank, range and dup index is checked where it is used
// and an entry or row out of range is skipped (the plan checks of the
// reference, check_layer_plan, are what reports such a plan).
#pragma once

#include <string>
#include <type_traits>

#include "moonep/error.hpp"
#include "moonep/impl/exact_arith.hpp"
#include "moonep/impl/in_process_plan_check.hpp"
#include "moonep/impl/layer_concept.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/planner.hpp"

namespace moonep {

namespace impl {
// Dup row j of a rank's plan (docs/spec/planning.md step 8): f(primary,
// duplicate) for each of its duplicates in increasing k; nothing for a row
// past dup_counts[0], and no slot outside 0..nvs-1 is handed to f.
template <class Groups, class Loffs, class Counts, class F>
KOKKOS_INLINE_FUNCTION void for_each_duplicate(const Groups& groups, const Loffs& loffs, const Counts& counts,
                                               std::int64_t j, std::int64_t nvs, const F& f) {
  if (j >= counts(0)) return;
  const std::int64_t primary = groups(j, 0);
  if (primary < 0 || primary >= nvs) return;
  for (std::int64_t q = groups(j, 1); q < groups(j, 1) + groups(j, 2); ++q)
    if (q >= 0 && q < nvs && loffs(q) >= 0 && loffs(q) < nvs) f(primary, static_cast<std::int64_t>(loffs(q)));
}
}  // namespace impl

template <class T, class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class InProcessLayer {
  static_assert(is_layer_element_v<T>, "InProcessLayer: T is float, double or moonep::bf16");

 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using element_type = T;
  using weight_type = weight_t<T>;
  using accum_type = accum_t<T>;
  // [R][rows][H]: x and out (rows S), recv and y (rows NvS).
  using rows_view = Kokkos::View<T***, Kokkos::LayoutRight, memory_space>;
  using const_rows_view = Kokkos::View<const T***, Kokkos::LayoutRight, memory_space>;
  // w [R][S][K]; recv_w [R][NvS].
  using weights_view = Kokkos::View<const weight_type***, Kokkos::LayoutRight, memory_space>;
  using slot_weights_view = Kokkos::View<weight_type**, Kokkos::LayoutRight, memory_space>;
  using const_slot_weights_view = Kokkos::View<const weight_type**, Kokkos::LayoutRight, memory_space>;
  // grad_w [R][S][K].
  using grad_weights_view = Kokkos::View<weight_type***, Kokkos::LayoutRight, memory_space>;
  using plan_type = Plan<memory_space>;

  // Buffers for rows of `hidden` values (H for dispatch; H' for combine:
  // make one object per width). InputError for a bad config or width.
  InProcessLayer(const Config& config, int hidden, ExecutionSpace exec = ExecutionSpace())
      : config_(config), hidden_(hidden), exec_(exec) {
    validate(config);
    if (hidden < 1) throw InputError("InProcessLayer: H must be at least 1, got " + std::to_string(hidden));
    partial_ = Kokkos::View<accum_type***, Kokkos::LayoutRight, memory_space>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "moonep::layer::partial"), config.ranks, config.slots(),
        hidden);
  }

  const Config& config() const { return config_; }
  int hidden() const { return hidden_; }

  // recv[d][loff] = x[r][t], recv_w[d][loff] = w[r][t][k] for every filled
  // slot; padding rows and weights zero; undefined slots untouched.
  void dispatch(const plan_type& plan, const const_rows_view& x, const weights_view& w, const rows_view& recv,
                const slot_weights_view& recv_w) const {
    check_plan(plan, "dispatch");
    const std::int64_t K = config_.topk, H = hidden_;
    check_extents("dispatch", "x", x, config_.tokens, "S");
    check_extents("dispatch", "recv", recv, config_.slots(), "NvS");
    check_weights("dispatch", "w", w);
    check_slot_weights("dispatch", "recv_w", recv_w);
    // 1. Every source pushes its primaries' rows and every entry's weight.
    for (int r = 0; r < config_.ranks; ++r)
      over_entries("moonep::layer::dispatch_rows", plan.ranks[r], H,
                   KOKKOS_LAMBDA(std::int64_t i, std::int64_t h, std::int64_t d, std::int64_t loff, bool primary) {
                     if (h == 0) recv_w(d, loff) = w(r, i / K, i % K);
                     if (primary) recv(d, loff, h) = x(r, i / K, h);
                   });
    for (int d = 0; d < config_.ranks; ++d) {
      // 2. Padding: zero rows, weight 0.
      zero_padding("moonep::layer::dispatch_padding", plan.ranks[d], d, recv, recv_w);
      // 3. Epilogue: duplicates take their primary's row.
      over_duplicates("moonep::layer::dispatch_epilogue", plan.ranks[d],
                      KOKKOS_LAMBDA(std::int64_t p, std::int64_t q, std::int64_t h) { recv(d, q, h) = recv(d, p, h); });
    }
  }

  // out[r][t] = sum_k recv_w[d_k][loff_k] * y[d_k][loff_k] (the weights
  // dispatch wrote) for t < s_r, in the contract's order; rows past s_r
  // untouched.
  void combine(const plan_type& plan, const const_rows_view& y, const const_slot_weights_view& recv_w,
               const rows_view& out) const {
    run_combine(plan, y, recv_w, true, out);
  }
  // The same without weights (experts that applied them).
  void combine_unweighted(const plan_type& plan, const const_rows_view& y, const rows_view& out) const {
    run_combine(plan, y, const_slot_weights_view(), false, out);
  }

  // Combine's backward, given grad_out [R][S][H] (rows t < s_r read):
  // grad_y[d][loff] = recv_w[d][loff] * grad_out[r][t] for every filled
  // slot, zero padding rows, undefined slots untouched; and grad_w
  // [R][S][K] = <grad_out[r][t], y[d_k][loff_k]> for t < s_r, summed in
  // increasing h.
  void combine_backward(const plan_type& plan, const const_rows_view& grad_out, const const_rows_view& y,
                        const const_slot_weights_view& recv_w, const rows_view& grad_y,
                        const grad_weights_view& grad_w) const {
    check_plan(plan, "combine backward");
    check_extents("combine backward", "y", y, config_.slots(), "NvS");
    check_slot_weights("combine backward", "recv_w", recv_w);
    check_weights("combine backward", "grad_w", grad_w);
    run_combine_backward(plan, grad_out, recv_w, true, grad_y);
    const std::int64_t K = config_.topk, H = hidden_;
    for (int r = 0; r < config_.ranks; ++r)
      over_entries("moonep::layer::combine_backward_weights", plan.ranks[r], 1,
                   KOKKOS_LAMBDA(std::int64_t i, std::int64_t, std::int64_t d, std::int64_t loff, bool) {
                     accum_type dot = 0;
                     for (std::int64_t h = 0; h < H; ++h)
                       dot += impl::product_rn(static_cast<accum_type>(grad_out(r, i / K, h)),
                                               static_cast<accum_type>(y(d, loff, h)));
                     grad_w(r, i / K, i % K) = dot;
                   });
  }
  // The same for an unweighted combine: grad_y = grad_out's rows, no grad_w.
  void combine_backward_unweighted(const plan_type& plan, const const_rows_view& grad_out,
                                   const rows_view& grad_y) const {
    check_plan(plan, "combine backward");
    run_combine_backward(plan, grad_out, const_slot_weights_view(), false, grad_y);
  }

  // Dispatch's backward, given grad_recv [R][NvS][H]: grad_x[r][t] = sum_k
  // grad_recv[d_k][loff_k] for t < s_r, summed as an unweighted combine.
  void dispatch_backward(const plan_type& plan, const const_rows_view& grad_recv, const rows_view& grad_x) const {
    run_combine(plan, grad_recv, const_slot_weights_view(), false, grad_x, kDispatchBackward);
  }
  // The same, and grad_w[r][t][k] += grad_recv_w[d_k][loff_k] (grad_w
  // [R][S][K], grad_recv_w [R][NvS]).
  void dispatch_backward(const plan_type& plan, const const_rows_view& grad_recv,
                         const const_slot_weights_view& grad_recv_w, const rows_view& grad_x,
                         const grad_weights_view& grad_w) const {
    check_plan(plan, "dispatch backward");
    check_slot_weights("dispatch backward", "grad_recv_w", grad_recv_w);
    check_weights("dispatch backward", "grad_w", grad_w);
    check_extents("dispatch backward", "grad_recv", grad_recv, config_.slots(), "NvS");
    check_extents("dispatch backward", "grad_x", grad_x, config_.tokens, "S");
    run_combine(plan, grad_recv, const_slot_weights_view(), false, grad_x, kDispatchBackward);
    const std::int64_t K = config_.topk;
    for (int r = 0; r < config_.ranks; ++r)
      over_entries("moonep::layer::dispatch_backward_weights", plan.ranks[r], 1,
                   KOKKOS_LAMBDA(std::int64_t i, std::int64_t, std::int64_t d, std::int64_t loff, bool) {
                     grad_w(r, i / K, i % K) += grad_recv_w(d, loff);
                   });
  }

  // grad_y of combine's backward (weighted: by recv_w at the destination).
  void run_combine_backward(const plan_type& plan, const const_rows_view& grad_out,
                            const const_slot_weights_view& recv_w, bool weighted, const rows_view& grad_y) const {
    const std::int64_t S = config_.tokens, K = config_.topk, nvs = config_.slots(), H = hidden_;
    check_extents("combine backward", "grad_out", grad_out, S, "S");
    check_extents("combine backward", "grad_y", grad_y, nvs, "NvS");
    using policy = impl::layer_policy<ExecutionSpace>;
    for (int d = 0; d < config_.ranks; ++d) {
      const auto src_info = plan.ranks[d].src_info;
      const std::int64_t R = config_.ranks;
      Kokkos::parallel_for(
          "moonep::layer::combine_backward_rows", policy(exec_, 0, nvs * H), KOKKOS_LAMBDA(const std::int64_t n) {
            const std::int64_t s = n / H, h = n % H;
            const std::int64_t src = src_info(s);
            if (src < 0 || src >= R * nvs || (src % nvs) >= S * K) return;
            const T g = grad_out(src / nvs, (src % nvs) / K, h);
            grad_y(d, s, h) =
                weighted ? static_cast<T>(accum_type(recv_w(d, s)) * static_cast<accum_type>(g)) : g;
          });
      zero_padding("moonep::layer::combine_backward_padding", plan.ranks[d], d, grad_y, slot_weights_view());
    }
  }

  // f(i, h, d, loff, primary) for every entry i < N_r of one rank's plan
  // whose destination (rank d, slot loff) lies inside the buffers, and every
  // h < width (one call per element: width H for rows, 1 per entry).
  template <class F>
  void over_entries(const char* label, const RankPlanView<memory_space>& p, std::int64_t width, const F& f) const {
    using policy = impl::layer_policy<ExecutionSpace>;
    const std::int64_t N = config_.entries(), nvs = config_.slots(), R = config_.ranks;
    const auto dst = p.dst;
    const auto entries = p.entries;
    Kokkos::parallel_for(
        label, policy(exec_, 0, N * width), KOKKOS_LAMBDA(const std::int64_t n) {
          const std::int64_t i = n / width;
          if (i >= entries(0) || entries(0) > N) return;
          const std::int32_t code = dst(i);
          const std::int64_t c = code >= 0 ? code : -static_cast<std::int64_t>(code) - 1;
          if (c < R * nvs) f(i, n % width, c / nvs, c % nvs, code >= 0);
        });
  }

  // Zero rows (and weights, when `weights` is allocated) in every padding
  // range of rank d, clipped to the buffer.
  void zero_padding(const char* label, const RankPlanView<memory_space>& p, int d, const rows_view& rows,
                    const slot_weights_view& weights) const {
    using policy = impl::layer_policy<ExecutionSpace>;
    const std::int64_t nvs = config_.slots(), H = hidden_;
    const bool with_weights = weights.data() != nullptr;
    const auto zero_fill = p.zero_fill_ranges;
    Kokkos::parallel_for(
        label, policy(exec_, 0, config_.groups()), KOKKOS_LAMBDA(const std::int64_t g) {
          const std::int64_t from = zero_fill(g, 0) < 0 ? 0 : zero_fill(g, 0);
          const std::int64_t to = from + zero_fill(g, 1) > nvs ? nvs : from + zero_fill(g, 1);
          for (std::int64_t s = from; s < to; ++s) {
            if (with_weights) weights(d, s) = weight_type(0);
            for (std::int64_t h = 0; h < H; ++h) rows(d, s, h) = static_cast<T>(0.0f);
          }
        });
  }

  // f(primary, duplicate, h) for every duplicate slot of one rank's plan
  // and element h < H, a duplicate's calls in increasing k by one thread.
  template <class F>
  void over_duplicates(const char* label, const RankPlanView<memory_space>& p, const F& f) const {
    using policy = impl::layer_policy<ExecutionSpace>;
    const std::int64_t nvs = config_.slots(), H = hidden_;
    const auto groups = p.dup_groups;
    const auto loffs = p.dup_loffs;
    const auto counts = p.dup_counts;
    Kokkos::parallel_for(
        label, policy(exec_, 0, nvs * H), KOKKOS_LAMBDA(const std::int64_t n) {
          impl::for_each_duplicate(groups, loffs, counts, n / H, nvs,
                                   [&](std::int64_t primary, std::int64_t q) { f(primary, q, n % H); });
        });
  }

  // Both combines. (Public, like every member that launches a kernel: CUDA's
  // extended lambdas may not be defined in a private member function.)
  // (Dispatch's backward is this unweighted, with `names` = its own.)
  struct CombineNames {
    const char* op = "combine";
    const char* rows = "y";
    const char* out = "out";
  };
  void run_combine(const plan_type& plan, const const_rows_view& y, const const_slot_weights_view& recv_w,
                   bool weighted, const rows_view& out, const CombineNames& names = CombineNames()) const {
    check_plan(plan, names.op);
    const std::int64_t S = config_.tokens, K = config_.topk, nvs = config_.slots(), H = hidden_, R = config_.ranks;
    check_extents(names.op, names.rows, y, nvs, "NvS");
    check_extents(names.op, names.out, out, S, "S");
    if (weighted) check_slot_weights(names.op, "recv_w", recv_w);
    using policy = impl::layer_policy<ExecutionSpace>;
    const auto partial = partial_;
    for (int d = 0; d < config_.ranks; ++d) {
      // 1. Every filled slot's weighted row, in the accumulation type.
      const auto src_info = plan.ranks[d].src_info;
      Kokkos::parallel_for(
          "moonep::layer::combine_weigh", policy(exec_, 0, nvs * H), KOKKOS_LAMBDA(const std::int64_t n) {
            const std::int64_t s = n / H, h = n % H;
            if (src_info(s) < 0) return;
            const accum_type v = static_cast<accum_type>(y(d, s, h));
            partial(d, s, h) = weighted ? accum_type(recv_w(d, s)) * v : v;
          });
      // 2. Prologue: partial(p) = partial(p) + partial(q) for the duplicates
      // q of p in increasing k, each addition in accum_type as the reference's.
      over_duplicates("moonep::layer::combine_prologue", plan.ranks[d],
                      KOKKOS_LAMBDA(std::int64_t p, std::int64_t q, std::int64_t h) {
                        partial(d, p, h) += partial(d, q, h);
                      });
    }
    // 3. Every source adds its primaries' partial rows in increasing k.
    for (int r = 0; r < config_.ranks; ++r) {
      const auto dst = plan.ranks[r].dst;
      const auto entries = plan.ranks[r].entries;
      Kokkos::parallel_for(
          "moonep::layer::combine_sum", policy(exec_, 0, S * H), KOKKOS_LAMBDA(const std::int64_t n) {
            const std::int64_t t = n / H, h = n % H;
            if (t * K >= entries(0) || entries(0) > S * K) return;
            accum_type acc = 0;
            bool first = true;
            for (std::int64_t k = 0; k < K; ++k) {
              const std::int32_t code = dst(t * K + k);
              if (code < 0 || code >= R * nvs) continue;  // a duplicate: in its primary's partial row
              const accum_type v = partial(code / nvs, code % nvs, h);
              acc = first ? v : acc + v;
              first = false;
            }
            out(r, t, h) = static_cast<T>(acc);
          });
    }
  }

 private:
  // A plan of this configuration and world: every rank, planned (entries
  // set by the planner), for this config.
  void check_plan(const plan_type& plan, const char* op) const { impl::check_in_process_plan(plan, config_, op); }
  template <class V>
  void check_extents(const char* op, const char* name, const V& v, std::int64_t rows, const char* rows_name) const {
    if (v.extent(0) != static_cast<std::size_t>(config_.ranks) || v.extent(1) != static_cast<std::size_t>(rows) ||
        v.extent(2) != static_cast<std::size_t>(hidden_))
      throw InputError(std::string(op) + ": " + name + " is [" + std::to_string(v.extent(0)) + "][" +
                       std::to_string(v.extent(1)) + "][" + std::to_string(v.extent(2)) + "], expected [R][" +
                       rows_name + "][H] = [" + std::to_string(config_.ranks) + "][" + std::to_string(rows) + "][" +
                       std::to_string(hidden_) + "]");
  }
  template <class V>
  void check_weights(const char* op, const char* name, const V& w) const {
    if (w.extent(0) != static_cast<std::size_t>(config_.ranks) || w.extent(1) != static_cast<std::size_t>(config_.tokens) ||
        w.extent(2) != static_cast<std::size_t>(config_.topk))
      throw InputError(std::string(op) + ": " + name + " is not [R][S][K] = [" + std::to_string(config_.ranks) + "][" +
                       std::to_string(config_.tokens) + "][" + std::to_string(config_.topk) + "]");
  }
  template <class V>
  void check_slot_weights(const char* op, const char* name, const V& w) const {
    if (w.extent(0) != static_cast<std::size_t>(config_.ranks) || w.extent(1) != static_cast<std::size_t>(config_.slots()))
      throw InputError(std::string(op) + ": " + name + " is not [R][NvS] = [" + std::to_string(config_.ranks) + "][" +
                       std::to_string(config_.slots()) + "]");
  }

  static constexpr CombineNames kDispatchBackward{"dispatch backward", "grad_recv", "grad_x"};

  Config config_;
  int hidden_;
  ExecutionSpace exec_;
  Kokkos::View<accum_type***, Kokkos::LayoutRight, memory_space> partial_;
};

// The layer interface every view-based layer offers (caller's receive
// buffers), for each element type.
MOONEP_ASSERT_LAYER(InProcessLayer<float, Kokkos::DefaultHostExecutionSpace>);
MOONEP_ASSERT_LAYER(InProcessLayer<double, Kokkos::DefaultExecutionSpace>);
MOONEP_ASSERT_LAYER(InProcessLayer<bf16, Kokkos::DefaultExecutionSpace>);

}  // namespace moonep
