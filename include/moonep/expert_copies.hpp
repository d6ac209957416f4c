// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/expert_copies.hpp — fetch and reduce (docs/spec/layer.md "Expert
// copies") as Kokkos kernels, for the plan of an in-process world (every
// rank's parameters are one view whose first extent is the rank). The
// portable path beside fetch_reference and reduce_reference
// (moonep/layer_reference.hpp), which it matches bit for bit.
//
// Parameters are Q values per expert, of the layer's element type:
// P [R][epn][Q] (rank h's own experts, P_h[j] = expert h*epn + j) and
// copies [R][B][Q]; T is float, double or moonep::bf16 (copies move as
// bits, reduce sums in accum_t<T> and rounds once). Views in, views out,
// one execution space instance; nothing is allocated per step and the kernels are enqueued without a
// fence, with one exception that must stay true of every path: a plan
// whose rank would run a remote expert that is not copied is refused
// before anything moves, and only a configuration with B < epn can hold
// one (B >= epn never does, docs/spec/planning.md "Copy slots"); so only
// then do fetch and reduce read the plan's group sizes on the host (one
// small copy, which waits for the plan), into a buffer made once.
//
// Whatever the plan's experts_to_copy holds, no kernel reads or writes
// outside a buffer: a copied expert outside 0..E-1 is skipped
// (check_layer_plan is what reports such a plan).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/impl/in_process_plan_check.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/planner.hpp"

namespace moonep {

template <class T, class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class InProcessExpertCopies {
  static_assert(is_layer_element_v<T>, "InProcessExpertCopies: T is float, double or moonep::bf16");

 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using accum_type = accum_t<T>;
  // [R][experts][Q]: P and grad_P (epn experts), copies and grad_copies (B).
  using params_view = Kokkos::View<T***, Kokkos::LayoutRight, memory_space>;
  using const_params_view = Kokkos::View<const T***, Kokkos::LayoutRight, memory_space>;
  using plan_type = Plan<memory_space>;

  // For experts of `params` (Q) values each. InputError for a bad config or Q.
  InProcessExpertCopies(const Config& config, std::int64_t params, ExecutionSpace exec = ExecutionSpace())
      : config_(config), params_(params), exec_(exec) {
    validate(config);
    if (params < 1)
      throw InputError("InProcessExpertCopies: Q must be at least 1, got " + std::to_string(params));
    if (config.copy_slots < config.experts_per_rank()) {
      groups_.config = config;
      groups_.ranks.resize(static_cast<std::size_t>(config.ranks));
      for (auto& r : groups_.ranks) r.cu_seqlens.resize(static_cast<std::size_t>(config.groups()));
      cu_host_.resize(static_cast<std::size_t>(config.ranks) * config.groups());
    }
  }

  const Config& config() const { return config_; }
  std::int64_t params() const { return params_; }

  // copies[d][b] = P[e div epn][e mod epn] (bits) for every
  // e = experts_to_copy[d][b] >= 0; slots with -1 untouched.
  void fetch(const plan_type& plan, const const_params_view& experts, const params_view& copies) const {
    check("fetch", plan, "P", experts, "copies", copies);
    using policy = impl::layer_policy<ExecutionSpace>;
    const std::int64_t B = config_.copy_slots, Q = params_, epn = config_.experts_per_rank(), E = config_.experts;
    for (int d = 0; d < config_.ranks; ++d) {
      const auto table = plan.ranks[d].experts_to_copy;
      Kokkos::parallel_for(
          "moonep::layer::fetch", policy(exec_, 0, B * Q), KOKKOS_LAMBDA(const std::int64_t n) {
            const std::int64_t b = n / Q, q = n % Q;
            const std::int32_t e = table(d, b);
            if (e >= 0 && e < E) copies(d, b, q) = experts(e / epn, e % epn, q);
          });
    }
  }

  // grad_P[h][j] = round_T(grad_P[h][j] + grad_copies[d1][b1] + ...) over
  // every (d, b) with experts_to_copy[d][b] = h*epn + j, in increasing d
  // then b, summed in accum_t<T>; experts without copies keep their bits.
  // The owner h reads its own plan's table (every rank holds the same).
  void reduce(const plan_type& plan, const const_params_view& grad_copies, const params_view& grad_experts) const {
    check("reduce", plan, "grad_P", grad_experts, "grad_copies", grad_copies);
    using policy = impl::layer_policy<ExecutionSpace>;
    const std::int64_t B = config_.copy_slots, Q = params_, epn = config_.experts_per_rank(), R = config_.ranks;
    for (int h = 0; h < config_.ranks; ++h) {
      const auto table = plan.ranks[h].experts_to_copy;
      Kokkos::parallel_for(
          "moonep::layer::reduce", policy(exec_, 0, epn * Q), KOKKOS_LAMBDA(const std::int64_t n) {
            const std::int64_t j = n / Q, q = n % Q, e = h * epn + j;
            accum_type acc = static_cast<accum_type>(grad_experts(h, j, q));
            bool copied = false;
            for (std::int64_t d = 0; d < R; ++d)
              for (std::int64_t b = 0; b < B; ++b)
                if (table(d, b) == e) {
                  acc += static_cast<accum_type>(grad_copies(d, b, q));
                  copied = true;
                }
            if (copied) grad_experts(h, j, q) = static_cast<T>(acc);
          });
    }
  }

  // check_experts_runnable's InputError for a plan whose rank would run a
  // remote expert that is not copied. Nothing to read when B >= epn;
  // otherwise reads every rank's cu_seqlens on the host (waits for the plan;
  // one copy for a portable Planner's plan).
  void check_runnable(const plan_type& plan) const {
    if (config_.copy_slots >= config_.experts_per_rank()) return;
    const std::size_t G = static_cast<std::size_t>(config_.groups());
    impl::read_group_sizes(plan, config_, cu_host_.data());
    for (std::size_t d = 0; d < groups_.ranks.size(); ++d)
      std::copy(cu_host_.begin() + d * G, cu_host_.begin() + (d + 1) * G, groups_.ranks[d].cu_seqlens.begin());
    check_experts_runnable(groups_);
  }

 private:
  // Everything fetch and reduce refuse, before anything moves: a plan of
  // another configuration or world, views of other extents, and a remote
  // expert that is not copied.
  void check(const char* op, const plan_type& plan, const char* own_name, const const_params_view& own,
             const char* copies_name, const const_params_view& copies) const {
    impl::check_in_process_plan(plan, config_, op);
    check_extents(op, own_name, own, config_.experts_per_rank(), "epn");
    check_extents(op, copies_name, copies, config_.copy_slots, "B");
    check_runnable(plan);
  }
  void check_extents(const char* op, const char* name, const const_params_view& v, std::int64_t experts,
                     const char* experts_name) const {
    if (v.extent(0) != static_cast<std::size_t>(config_.ranks) || v.extent(1) != static_cast<std::size_t>(experts) ||
        v.extent(2) != static_cast<std::size_t>(params_))
      throw InputError(std::string(op) + ": " + name + " is [" + std::to_string(v.extent(0)) + "][" +
                       std::to_string(v.extent(1)) + "][" + std::to_string(v.extent(2)) + "], expected [R][" +
                       experts_name + "][Q] = [" + std::to_string(config_.ranks) + "][" + std::to_string(experts) +
                       "][" + std::to_string(params_) + "]");
  }

  Config config_;
  std::int64_t params_;
  ExecutionSpace exec_;
  // The plan's group sizes on the host, for check_runnable (B < epn only):
  // [R][E+B] as read, and per rank for check_experts_runnable.
  mutable std::vector<std::int32_t> cu_host_;
  mutable HostPlan groups_;
};

}  // namespace moonep
