// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/cuda_expert_copies.hpp — fetch and reduce (docs/spec/layer.md
// "Expert copies") for the virtual ranks of a
// moonep::cuda::VirtualRankPlanner: every rank's parameters on one GPU,
// rank-major, plain device pointers and a cudaStream_t. The CUDA twin of
// moonep::InProcessExpertCopies (moonep/expert_copies.hpp); both give the
// bits of fetch_reference and reduce_reference (moonep/layer_reference.hpp).
//
// Parameters are Q values per expert of the layer's element type (Element,
// moonep/cuda_layer.hpp): P [R][epn][Q] (rank h's experts, P_h[j] = expert
// h*epn + j; so expert e's parameters lie at P + e*Q) and copies [R][B][Q].
//
// What must stay true:
//  * Nothing is allocated per step; kernels read experts_to_copy from the
//    planner's device outputs when they run, so with B >= epn a step is
//    capturable in a CUDA graph and replays follow the plan of each replay.
//  * A plan whose rank would run a remote expert that is not copied is
//    refused (check_experts_runnable's InputError, naming rank and expert)
//    before anything moves. Only B < epn allows such a plan, so only then
//    do fetch and reduce read the plan's group sizes to the host (one copy
//    into pinned memory made once, then a wait for `stream`): with B < epn
//    they synchronise and cannot be captured.
//  * Whatever experts_to_copy holds, nothing is read or written outside
//    the buffers: a copied expert outside 0..E-1 is skipped.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "moonep/cuda_layer.hpp"
#include "moonep/cuda_planner.hpp"

namespace moonep::cuda {

class VirtualRankExpertCopies {
 public:
  // For the plans of `planner` (its outputs' device pointers are read once
  // here), experts of `params` (Q) values of `type`. InputError for Q < 1;
  // RuntimeError if the host staging buffer cannot be allocated.
  VirtualRankExpertCopies(const VirtualRankPlanner& planner, std::int64_t params, Element type);
  ~VirtualRankExpertCopies();
  VirtualRankExpertCopies(const VirtualRankExpertCopies&) = delete;
  VirtualRankExpertCopies& operator=(const VirtualRankExpertCopies&) = delete;

  std::int64_t params() const;
  Element element() const;

  // After the planner's step (on `stream` or before it): experts P
  // [R][epn][Q] in, copies [R][B][Q] out: copies[d][b] = P[e div epn][e mod
  // epn] (bits) for every e = experts_to_copy[d][b] >= 0; slots with -1
  // untouched. Rows move in 16-byte pieces where Q*size is a multiple of 16
  // and both pointers are 16-byte aligned. Asynchronous when B >= epn.
  void fetch(const void* experts, void* copies, cudaStream_t stream) const;

  // grad_copies [R][B][Q] in; grad_experts [R][epn][Q] in and out:
  // grad_experts[h][j] = round_T(grad_experts[h][j] + grad_copies[d][b] +
  // ...) over every (d, b) with experts_to_copy[d][b] = h*epn + j, in
  // increasing d then b, summed in float (double for f64); experts without
  // copies keep their bits. Asynchronous when B >= epn.
  void reduce(const void* grad_copies, void* grad_experts, cudaStream_t stream) const;

  // The refusal alone: nothing when B >= epn; otherwise reads every rank's
  // cu_seqlens (waits for `stream`) and throws check_experts_runnable's
  // InputError for the first rank running an expert it neither owns nor
  // holds in a copy slot.
  void check_runnable(cudaStream_t stream) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda
