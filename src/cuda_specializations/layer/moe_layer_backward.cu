// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankMoeLayer::backward (moonep/cuda_moe_layer.hpp):
// combine's backward, per non-empty group the GEMMs for the input and the
// weight gradients, dispatch's backward, reduce. Its own file: it needs
// VirtualRankLayer's backward, which the forward does not.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "../host_checks.hpp"
#include "moe_layer_state.hpp"
#include "moonep/error.hpp"

namespace moonep::cuda {

void VirtualRankMoeLayer::backward(const void* grad_out, const void* experts, void* grad_x, void* grad_w,
                                   void* grad_experts, cudaStream_t stream) {
  State& s = *s_;
  if (!grad_out || !experts || !grad_x || !grad_w || !grad_experts)
    throw InputError("moonep::cuda::VirtualRankMoeLayer::backward: a buffer is null");
  if (!s.training)
    throw InputError("moonep::cuda::VirtualRankMoeLayer::backward: the layer was made without training buffers");
  read_groups(stream);  // refuses an unrunnable plan before anything moves
  const std::int64_t nvs = s.config.slots(), Q = s.Q(), e = s.elem(), B = s.config.copy_slots,
                     R = s.config.ranks, epn = s.config.experts_per_rank();
  // grad_y = w * grad_out per filled slot; grad_w = <grad_out, y>.
  s.out->combine_backward(grad_out, s.y.ptr, s.recv_w.ptr, s.grad_y.ptr, grad_w, stream);
  // Experts whose groups are empty (and copy slots no group uses) get 0;
  // every non-empty group writes its expert's gradient whole (beta 0), an
  // expert having at most one group per rank.
  impl::check_cuda(cudaMemsetAsync(grad_experts, 0, static_cast<std::size_t>(R * epn * Q * e), stream),
                   "zeroing the experts' gradients");
  impl::check_cuda(cudaMemsetAsync(s.grad_copies.ptr, 0, static_cast<std::size_t>(R * B * Q * e), stream),
                   "zeroing the copies' gradients");
  char* gP = static_cast<char*>(grad_experts);
  const char* P = static_cast<const char*>(experts);
  char* gC = static_cast<char*>(s.grad_copies.ptr);
  const char* C = static_cast<const char*>(s.copy_buf.ptr);
  for (const State::Group& g : s.groups) {
    const std::int64_t at = g.own ? g.slot * Q * e : (g.d * B + g.slot) * Q * e;
    const char* M = (g.own ? P : C) + at;
    char* gM = (g.own ? gP : gC) + at;
    const char* gy = static_cast<const char*>(s.grad_y.ptr) + (g.d * nvs + g.from) * s.O * e;
    const char* recv = static_cast<const char*>(s.recv.ptr) + (g.d * nvs + g.from) * s.H * e;
    char* grecv = static_cast<char*>(s.grad_recv.ptr) + (g.d * nvs + g.from) * s.H * e;
    // grad_recv [rows][H] = grad_y [rows][H'] @ M^T
    s.gemm(false, true, g.rows, s.H, s.O, gy, s.O, M, s.O, grecv, s.H, stream);
    // grad_M [H][H'] = recv^T [H][rows] @ grad_y [rows][H']
    s.gemm(true, false, s.H, s.O, g.rows, recv, s.H, gy, s.O, gM, s.O, stream);
  }
  // grad_x = sum over k of grad_recv (recv_w's gradient is not the
  // layer's: the weights act in combine, whose backward gave grad_w).
  s.in->dispatch_backward(s.grad_recv.ptr, nullptr, grad_x, nullptr, stream);
  s.copies->reduce(s.grad_copies.ptr, grad_experts, stream);
}

}  // namespace moonep::cuda
