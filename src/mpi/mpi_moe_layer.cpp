// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::MpiMoeLayer (moonep/mpi_moe_layer.hpp): the linear layer from
// MpiExpertCopies, two MpiLayers (H and H') and host GEMMs per group.
#include "moonep/mpi_moe_layer.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "mpi/mpi_layer_checks.hpp"

namespace moonep {

template <class T>
MpiMoeLayer<T>::MpiMoeLayer(MpiWorld& world, const Config& config, int hidden, int hidden_out)
    : config_(config),
      hidden_(hidden),
      hidden_out_(hidden_out),
      in_(world, config, hidden),
      out_(world, config, hidden_out),
      copies_(world, config, std::int64_t{hidden} * hidden_out) {
  const std::int64_t nvs = config.slots();
  // Zeroed once: slots no step writes (undefined) read as 0 in y().
  y_ = rows_view("moonep::mpi_moe::y", nvs, hidden_out);
  grad_y_ = rows_view("moonep::mpi_moe::grad_y", nvs, hidden_out);
  grad_recv_ = rows_view("moonep::mpi_moe::grad_recv", nvs, hidden);
  copies_buf_ = params_view("moonep::mpi_moe::copies", config.copy_slots, params());
  acc_.resize(static_cast<std::size_t>(std::max(hidden, hidden_out)));
}

template <class T>
void MpiMoeLayer<T>::forward(const MpiLayerPlan& plan, const const_rows_view& x, const weights_view& w,
                             const const_params_view& experts, const rows_view& out) {
  const std::int64_t S = config_.tokens, K = config_.topk, epn = config_.experts_per_rank();
  copies_.start("forward", plan,
                layer::first_error({layer::extent_error("x", x, S, hidden_, "S", "H"),
                                    layer::extent_error("w", w, S, K, "S", "K"),
                                    layer::extent_error("P", experts, epn, params(), "epn", "Q"),
                                    layer::extent_error("out", out, S, hidden_out_, "S", "H'")}));
  copies_.fetch_checked("forward", plan, experts.data(), copies_buf_);
  in_.dispatch(plan, x, w);
  // The combine (width H') weighs by the weights this dispatch delivered.
  std::memcpy(out_.recv_w().data(), in_.recv_w().data(), sizeof(weight_type) * in_.recv_w().size());
  run_gemms(plan, experts.data(), Pass::forward, nullptr);
  out_.combine(plan, y_, out);
}

template <class T>
void MpiMoeLayer<T>::backward(const MpiLayerPlan& plan, const const_rows_view& grad_out,
                              const const_params_view& experts, const rows_view& grad_x,
                              const grad_weights_view& grad_w, const params_view& grad_experts) {
  const std::int64_t S = config_.tokens, K = config_.topk, epn = config_.experts_per_rank();
  copies_.start("backward", plan,
                layer::first_error({layer::extent_error("grad_out", grad_out, S, hidden_out_, "S", "H'"),
                                    layer::extent_error("P", experts, epn, params(), "epn", "Q"),
                                    layer::extent_error("grad_x", grad_x, S, hidden_, "S", "H"),
                                    layer::extent_error("grad_w", grad_w, S, K, "S", "K"),
                                    layer::extent_error("grad_P", grad_experts, epn, params(), "epn", "Q")}));
  out_.combine_backward(plan, grad_out, y_, grad_y_, grad_w);
  const params_view grad_copies = copies_.grad_copies();
  std::fill(grad_experts.data(), grad_experts.data() + grad_experts.size(), T(0.0f));
  std::fill(grad_copies.data(), grad_copies.data() + grad_copies.size(), T(0.0f));
  run_gemms(plan, experts.data(), Pass::backward, grad_experts.data());
  in_.dispatch_backward(plan, grad_recv_, grad_x);
  copies_.reduce_checked("backward", plan, grad_copies.data(), grad_experts);
}

// Forward: y = recv @ M per group. Backward: grad_recv = grad_y @ M^T and
// grad_M += recv^T @ grad_y (grad_M this rank's own expert's gradient or
// its copy slot's in the copies' window). Every value: a sum in A over the
// inner index in increasing order, rounded once.
template <class T>
void MpiMoeLayer<T>::run_gemms(const MpiLayerPlan& plan, const T* experts, Pass pass, T* grad_experts) {
  using A = accum_type;
  const std::int64_t E = config_.experts, epn = config_.experts_per_rank(), G = config_.groups(), Q = params();
  const std::int64_t H = hidden_, O = hidden_out_;
  const rows_view recv = in_.recv();
  T* grad_copies = copies_.grad_copies().data();
  A* acc = acc_.data();
  for (std::int64_t g = 0; g < G; ++g) {
    const std::int64_t from = g == 0 ? 0 : plan.cu_seqlens[g - 1], to = plan.cu_seqlens[g];
    if (to <= from) continue;
    const std::int64_t slot = g < E ? g % epn : g - E;
    const T* M = g < E ? experts + slot * Q : copies_buf_.data() + slot * Q;  // [H][O]
    if (pass == Pass::forward) {
      for (std::int64_t i = from; i < to; ++i) {
        std::fill(acc, acc + O, A(0));
        for (std::int64_t h = 0; h < H; ++h) {
          const A xv = static_cast<A>(recv(i, h));
          for (std::int64_t o = 0; o < O; ++o) acc[o] += xv * static_cast<A>(M[h * O + o]);
        }
        for (std::int64_t o = 0; o < O; ++o) y_(i, o) = static_cast<T>(acc[o]);
      }
      continue;
    }
    for (std::int64_t i = from; i < to; ++i)
      for (std::int64_t h = 0; h < H; ++h) {
        A sum = 0;
        for (std::int64_t o = 0; o < O; ++o) sum += static_cast<A>(grad_y_(i, o)) * static_cast<A>(M[h * O + o]);
        grad_recv_(i, h) = static_cast<T>(sum);
      }
    T* gm = g < E ? grad_experts + slot * Q : grad_copies + slot * Q;
    for (std::int64_t h = 0; h < H; ++h) {
      std::fill(acc, acc + O, A(0));
      for (std::int64_t i = from; i < to; ++i) {
        const A xv = static_cast<A>(recv(i, h));
        for (std::int64_t o = 0; o < O; ++o) acc[o] += xv * static_cast<A>(grad_y_(i, o));
      }
      for (std::int64_t o = 0; o < O; ++o) gm[h * O + o] = static_cast<T>(static_cast<A>(gm[h * O + o]) + acc[o]);
    }
  }
}

template class MpiMoeLayer<float>;
template class MpiMoeLayer<double>;
template class MpiMoeLayer<bf16>;

}  // namespace moonep
