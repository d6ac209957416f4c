// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/cuda_moe_layer.hpp — the linear MoE layer (docs/spec/layer.md "The
// linear layer") on the CUDA virtual-rank path: every rank on one GPU,
// rank-major buffers, plain device pointers and a cudaStream_t. The CUDA
// twin of moonep::InProcessMoeLayer (moonep/moe_layer.hpp), built from
// VirtualRankExpertCopies (fetch, reduce), two VirtualRankLayers (dispatch
// and its backward over H, combine and its backward over H') and cuBLAS.
//
// Group g of destination rank d (slots cu_seqlens[g-1] .. cu_seqlens[g])
// runs y = recv @ M: for g < E with the rank's own expert P_d[g mod epn]
// (= expert g, at P + g*Q), for g = E + b with its copy slot b. Experts
// are M_e [H][H'] row-major, given as P [R][epn][Q] with Q = H*H'.
//
// GEMMs: one cublasGemmEx per non-empty group, accumulating in float
// (double for f64) and rounding to T once; TF32 is never used. Their sizes
// are the plan's group sizes, which live on the device: read_groups()
// reads every rank's cu_seqlens to the host (one copy into pinned memory
// made once, then a wait for the stream) and the GEMM launches use that
// copy until the next read_groups(). forward() and backward() call it
// first; the enqueue_* parts do not, so a caller may read the groups once
// and capture the parts in a CUDA graph (the graph then replays these
// group sizes: capture again when the plan changes).
//
// What must stay true: every buffer (recv, recv_w, y, copies, and for
// training grad_y, grad_recv, grad_copies; cuBLAS's workspace) is made in
// the constructor, nothing per step; a group's rows are clipped to
// 0..NvS and a group g < E of an expert the rank does not own is never
// run (read_groups refuses such a plan first, in check_experts_runnable's
// words), so no GEMM touches memory outside the buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "moonep/cuda_layer.hpp"
#include "moonep/cuda_planner.hpp"

namespace moonep::cuda {

class VirtualRankMoeLayer {
 public:
  // For the plans of `planner`, tokens of `hidden` (H) values and experts
  // H -> `hidden_out` (H') of `type`. `training`: also make the backward's
  // buffers (without them backward throws InputError). InputError for H or
  // H' below 1; RuntimeError if a buffer or the cuBLAS handle cannot be made.
  VirtualRankMoeLayer(const VirtualRankPlanner& planner, int hidden, int hidden_out, Element type,
                      bool training = true);
  ~VirtualRankMoeLayer();
  VirtualRankMoeLayer(const VirtualRankMoeLayer&) = delete;
  VirtualRankMoeLayer& operator=(const VirtualRankMoeLayer&) = delete;

  int hidden() const;
  int hidden_out() const;
  std::int64_t params() const;  // Q = H*H'
  Element element() const;

  // The whole step, after the planner's step (on `stream` or before it):
  // read_groups, then every enqueue_forward part. x [R][S][H], w [R][S][K]
  // (float; double for f64), experts P [R][epn][Q] in; out [R][S][H'] =
  // sum_k w * (x @ M_e) for t < s_r, rows past s_r untouched. Keeps recv,
  // recv_w, y and the copies for backward. Waits for `stream` once
  // (read_groups); the rest is asynchronous.
  void forward(const void* x, const void* w, const void* experts, void* out, cudaStream_t stream);

  // After forward with the same plan, x, w and experts: grad_out
  // [R][S][H'] in; grad_x [R][S][H] (rows past s_r untouched), grad_w
  // [R][S][K] (entries past s_r*K untouched) and grad_experts [R][epn][Q]
  // (every expert's gradient: its own groups' plus its copies' reduced;
  // written, not added to) out. Waits for `stream` once (read_groups).
  void backward(const void* grad_out, const void* experts, void* grad_x, void* grad_w, void* grad_experts,
                cudaStream_t stream);

  // Every rank's cu_seqlens to the host (waits for `stream`), for the GEMMs
  // that follow; InputError (check_experts_runnable's words) for a plan
  // whose rank would run a remote expert it did not copy.
  void read_groups(cudaStream_t stream);

  // The forward's parts, each asynchronous and capturable, in this order
  // (fetch only needs the plan: it may run on another stream, overlapping
  // dispatch, as long as the GEMMs wait for it).
  void enqueue_fetch(const void* experts, cudaStream_t stream) const;
  void enqueue_dispatch(const void* x, const void* w, cudaStream_t stream) const;
  void enqueue_gemms(const void* experts, cudaStream_t stream) const;  // uses read_groups' sizes
  void enqueue_combine(void* out, cudaStream_t stream) const;

  // The step's buffers on the device (valid after forward; slots no step
  // wrote are zero): recv [R][NvS][H], recv_w [R][NvS], y [R][NvS][H'],
  // copies [R][B][Q].
  const void* recv() const;
  const void* recv_w() const;
  const void* y() const;
  const void* copies() const;

  // How many GEMMs the last read_groups' sizes launch per pass (non-empty
  // groups over all ranks).
  int gemm_count() const;

  struct State;  // private (src/cuda_specializations/layer/moe_layer_state.hpp)

 private:
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda
