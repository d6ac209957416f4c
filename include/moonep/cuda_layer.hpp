// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/cuda_layer.hpp — the CUDA specialization of dispatch and combine
// (docs/spec/layer.md) for the virtual ranks of a
// moonep::cuda::VirtualRankPlanner (moonep/cuda_planner.hpp): every rank's
// buffers on one GPU, rank-major ([R][rows][H]), plain device pointers and
// a cudaStream_t, no Kokkos needed. Only usable when MoonEP was built with
// CUDA. The portable path (moonep/layer.hpp) and the reference
// (moonep/layer_reference.hpp) give the same bits.
//
// Transport: one warp per token reads its row once and writes it into the
// slot of each of its entries (primaries and duplicates: on one GPU the
// same bits as the contract's epilogue, without reading each primary's
// slot back), every entry's weight beside it; a second kernel zeroes the
// padding. Combine has one warp per token sum, for each primary in
// increasing k, its weighted row and its duplicates' (the token's later
// entries on that rank) in the accumulation type, then the primaries'
// sums in increasing k, rounded to T once: the contract's prologue and
// source sums in the same order, the partial rows kept in registers.
// The backward reuses both walks: combine's backward scatters the
// gradient rows (times each slot's weight) like a dispatch and sums one
// dot product per entry in increasing h; dispatch's backward gathers like
// an unweighted combine. Products and sums are rounded separately (no
// fused multiply-add), as on the host.
//
// What must stay true:
//  * Nothing is allocated, per step or at all beyond the object; no call
//    waits for the host, so a step is capturable in a CUDA graph with the
//    plan's, and replays of any counts work (each rank's count of entries
//    is read from the plan on the device).
//  * Whatever the plan holds, nothing is read or written outside the
//    buffers: every destination, slot and padding range is checked where
//    it is used and skipped when out of range.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "moonep/config.hpp"
#include "moonep/cuda_planner.hpp"

namespace moonep::cuda {

// The element type T of the rows; weights are float (double for f64) and
// accumulate as the weights.
enum class Element { f32, f64, bf16 };

class VirtualRankLayer {
 public:
  // For the plans of `planner` (its outputs' device pointers are read once
  // here), rows of `hidden` elements of `type`. InputError for hidden < 1;
  // RuntimeError if the partial rows cannot be allocated.
  VirtualRankLayer(const VirtualRankPlanner& planner, int hidden, Element type);
  ~VirtualRankLayer();
  VirtualRankLayer(const VirtualRankLayer&) = delete;
  VirtualRankLayer& operator=(const VirtualRankLayer&) = delete;

  int hidden() const;
  Element element() const;

  // After the planner's last step (enqueued on `stream` or before it):
  // x [R][S][H], w [R][S][K] in, recv [R][NvS][H], recv_w [R][NvS] out.
  // Every filled slot gets its token's row and its entry's weight; padding
  // rows and weights zero; slots after the last group untouched.
  // Asynchronous.
  void dispatch(const void* x, const void* w, void* recv, void* recv_w, cudaStream_t stream) const;

  // y [R][NvS][H] (what the experts made of recv), recv_w [R][NvS] as
  // dispatch wrote it (null: unweighted, the experts applied the weights),
  // out [R][S][H]: out[r][t] = sum over k of recv_w * y, in the contract's
  // order, for t < s_r; rows past s_r untouched. Asynchronous.
  void combine(const void* y, const void* recv_w, void* out, cudaStream_t stream) const;

  // Combine's backward. grad_out [R][S][H] (rows t < s_r read), y and
  // recv_w as combine took them. grad_y [R][NvS][H]: every filled slot
  // round_T(recv_w * grad_out[r][t]) (recv_w null: grad_out's row, bits),
  // padding rows zero, slots after the last group untouched. grad_w
  // [R][S][K] (ignored, may be null, when recv_w is null): <grad_out[r][t],
  // y[d_k][loff_k]> summed in increasing h, for t < s_r. Asynchronous.
  void combine_backward(const void* grad_out, const void* y, const void* recv_w, void* grad_y, void* grad_w,
                        cudaStream_t stream) const;

  // Dispatch's backward. grad_recv [R][NvS][H] (filled slots read) ->
  // grad_x [R][S][H]: sum over k of grad_recv[d_k][loff_k] in the
  // contract's order (an unweighted combine), rows past s_r untouched.
  // grad_recv_w [R][NvS] and grad_w [R][S][K] both null, or both set:
  // grad_w[r][t][k] += grad_recv_w[d_k][loff_k]. Asynchronous.
  void dispatch_backward(const void* grad_recv, const void* grad_recv_w, void* grad_x, void* grad_w,
                         cudaStream_t stream) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda
