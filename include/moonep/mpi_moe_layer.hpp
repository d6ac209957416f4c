// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/mpi_moe_layer.hpp — the linear MoE layer (docs/spec/layer.md "The
// linear layer") over an MPI world, one rank per process, built from the
// library's MPI operations: fetch (MpiExpertCopies), dispatch (MpiLayer of
// width H), one GEMM per non-empty group of this rank, combine (MpiLayer of
// width H'); backward: combine's backward, the groups' GEMMs' backward
// (input and weight gradients), dispatch's backward, reduce. The MPI
// counterpart of InProcessMoeLayer (moonep/moe_layer.hpp).
//
// Group g of this rank (slots cu_seqlens[g-1] .. cu_seqlens[g]) runs
// y = recv @ M: for g < E its own expert P[g mod epn], for g = E + b its
// copy slot b. Experts are M_e [H][H'] row-major, this rank's given as
// P [epn][Q] with Q = H*H'. The GEMMs are serial host loops, every value
// one sum in accum_t<T> (increasing inner index) rounded to T once.
//
// Every buffer (recv, y, copies and their gradients, the windows) is made
// in the constructor, nothing per step. Every operation is collective; bad
// input (the plan, a view's extents, a remote expert that is not copied)
// is refused on every process with the same InputError line
// ("forward: rank r: ...", the lowest bad rank's) before anything is
// written. The layer must be destroyed before its world.
#pragma once

#include <cstdint>
#include <vector>

#include "moonep/mpi_expert_copies.hpp"
#include "moonep/mpi_layer.hpp"

namespace moonep {

template <class T>
class MpiMoeLayer {
 public:
  using weight_type = weight_t<T>;
  using accum_type = accum_t<T>;
  using rows_view = typename MpiLayer<T>::rows_view;            // [rows][width]
  using const_rows_view = typename MpiLayer<T>::const_rows_view;
  using weights_view = typename MpiLayer<T>::weights_view;      // w [S][K]
  using grad_weights_view = typename MpiLayer<T>::grad_weights_view;
  using params_view = typename MpiExpertCopies<T>::params_view;  // [epn or B][Q]
  using const_params_view = typename MpiExpertCopies<T>::const_params_view;

  // Collective: the same config (ranks = world.size()), H >= 1 and
  // H' >= 1 on every process, else InputError on every process.
  MpiMoeLayer(MpiWorld& world, const Config& config, int hidden, int hidden_out);

  const Config& config() const { return config_; }
  int hidden() const { return hidden_; }
  int hidden_out() const { return hidden_out_; }
  std::int64_t params() const { return std::int64_t{hidden_} * hidden_out_; }

  // out [S][H'] = sum_k w * (x @ M_e) for t < s_r (rows past s_r
  // untouched), from x [S][H], w [S][K] and this rank's experts P [epn][Q].
  // Keeps recv, y and the copies for backward.
  void forward(const MpiLayerPlan& plan, const const_rows_view& x, const weights_view& w,
               const const_params_view& experts, const rows_view& out);

  // After forward with the same plan, x, w and experts: from grad_out
  // [S][H'], grad_x [S][H] (rows past s_r untouched), grad_w [S][K]
  // (entries past s_r*K untouched) and grad_experts [epn][Q] (this rank's
  // experts' gradients, its own groups' plus its copies' reduced; written,
  // not added to).
  void backward(const MpiLayerPlan& plan, const const_rows_view& grad_out, const const_params_view& experts,
                const rows_view& grad_x, const grad_weights_view& grad_w, const params_view& grad_experts);

  // This rank's step buffers (valid after forward; undefined slots 0).
  rows_view recv() const { return in_.recv(); }
  const rows_view& y() const { return y_; }
  const params_view& copies() const { return copies_buf_; }

 private:
  enum class Pass { forward, backward };
  void run_gemms(const MpiLayerPlan& plan, const T* experts, Pass pass, T* grad_experts);

  Config config_;
  int hidden_, hidden_out_;
  MpiLayer<T> in_, out_;  // dispatch and its backward over H; combine and its backward over H'
  MpiExpertCopies<T> copies_;
  rows_view y_, grad_y_, grad_recv_;
  params_view copies_buf_;
  std::vector<accum_type> acc_;  // [max(H, H')] a GEMM row's sums
};

extern template class MpiMoeLayer<float>;
extern template class MpiMoeLayer<double>;
extern template class MpiMoeLayer<bf16>;

}  // namespace moonep
