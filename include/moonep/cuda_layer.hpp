// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/cuda_layer.hpp — the CUDA specialization of dispatch and combine
// (docs/spec/layer.md) for the virtual ranks of a
// moonep::cuda::VirtualRankPlanner (moonep/cuda_planner.hpp): every rank's
// buffers on one GPU, rank-major ([R][rows][H]), plain device pointers and
// a cudaStream_t, no Kokkos needed. Only usable when MoonEP was built with
// CUDA. The portable path (moonep/layer.hpp) and the reference
// (moonep/layer_reference.hpp) give the same bits.
//
// Transport as the contract says: dispatch's first kernel has one warp per
// routed entry store the entry's weight and, for a primary, copy its
// token's row into the destination slot in 16-byte pieces (where H*size is
// a multiple of 16; element by element otherwise); the second kernel, per
// destination, zeroes the padding and copies each primary's row into its
// duplicates' slots (the epilogue). Combine's first kernel adds every
// duplicate's weighted row into its primary's partial row (prologue, in
// the accumulation type, increasing k); the second has one warp per token
// add its primaries' rows (partial where the primary has duplicates, w*y
// otherwise) in increasing k and round to T once. Products and sums are
// rounded separately (no fused multiply-add), as on the host.
//
// What must stay true:
//  * Nothing is allocated per step (the partial rows are allocated once);
//    no call waits for the host, so a step is capturable in a CUDA graph
//    with the plan's, and replays of any counts work (each rank's count of
//    entries is read from the plan on the device).
//  * Whatever the plan holds, nothing is read or written outside the
//    buffers: every destination, slot, padding range and dup index is
//    checked where it is used and skipped when out of range.
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
