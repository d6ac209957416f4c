// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankExpertCopies (moonep/cuda_expert_copies.hpp):
// fetch (one kernel: blocks per copy slot, a slot's Q values moved as bits)
// and reduce (one kernel: blocks per expert, the expert's copies found in
// increasing d then b, added in the accumulation type, rounded once); the
// kernels are copy_kernels.cuh's, every rank's buffers rank-major.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../host_checks.hpp"
#include "moonep/cuda_expert_copies.hpp"
#include "moonep/error.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/layer_reference.hpp"
#include "copy_kernels.cuh"
#include "element_sizes.hpp"
#include "group_sizes.hpp"

namespace moonep::cuda {
namespace {

using i64 = std::int64_t;
using copy_kernels::CopyParams;

}  // namespace

struct VirtualRankExpertCopies::State {
  Config config;
  Element type;
  CopyParams p{};
  std::unique_ptr<impl::PlanGroupSizes> group_sizes;  // B < epn only: what the refusal reads
};

VirtualRankExpertCopies::VirtualRankExpertCopies(const VirtualRankPlanner& planner, std::int64_t params, Element type)
    : s_(std::make_unique<State>()) {
  const Config& c = planner.config();
  if (params < 1)
    throw InputError("moonep::cuda::VirtualRankExpertCopies: Q must be at least 1, got " + std::to_string(params));
  State& s = *s_;
  s.config = c;
  s.type = type;
  CopyParams& p = s.p;
  p.R = c.ranks;
  p.E = c.experts;
  p.B = c.copy_slots;
  p.epn = c.experts_per_rank();
  p.Q = params;
  p.table = planner.rank_plan(0).experts_to_copy;
  p.stride = c.ranks > 1 ? planner.rank_plan(1).experts_to_copy - planner.rank_plan(0).experts_to_copy : 0;
  std::vector<const std::int32_t*> cu_seqlens;  // each rank's, device
  for (int r = 0; r < c.ranks; ++r) {
    // The kernels compute rank r's table from rank 0's: checked once here.
    if (planner.rank_plan(r).experts_to_copy != p.table + static_cast<i64>(r) * p.stride)
      throw RuntimeError("moonep::cuda::VirtualRankExpertCopies: the planner's rank outputs are not evenly strided");
    cu_seqlens.push_back(planner.rank_plan(r).cu_seqlens);
  }
  if (c.copy_slots < p.epn) s.group_sizes = std::make_unique<impl::PlanGroupSizes>(c, cu_seqlens, "expert copies");
}

VirtualRankExpertCopies::~VirtualRankExpertCopies() = default;
std::int64_t VirtualRankExpertCopies::params() const { return s_->p.Q; }
Element VirtualRankExpertCopies::element() const { return s_->type; }

void VirtualRankExpertCopies::check_runnable(cudaStream_t stream) const {
  const State& s = *s_;
  if (!s.group_sizes) return;  // B >= epn: no plan can hold a remote expert without a copy
  s.group_sizes->read(stream);
  impl::refuse_uncopied(s.config, s.group_sizes->sizes());
}

void VirtualRankExpertCopies::fetch(const void* experts, void* copies, cudaStream_t stream) const {
  if (!experts || !copies) throw InputError("moonep::cuda::VirtualRankExpertCopies::fetch: a buffer is null");
  check_runnable(stream);
  const CopyParams& p = s_->p;
  const i64 bytes = p.Q * element_bytes(s_->type), slots = static_cast<i64>(p.R) * p.B;
  if (slots == 0) return;
  const bool vec = bytes % 16 == 0 && aligned16(experts) && aligned16(copies);
  copy_kernels::launch_fetch(p, vec, bytes, 0, p.R, experts, p.epn * bytes, copies, p.B * bytes, stream);
  impl::check_cuda(cudaGetLastError(), "launching the fetch kernel");
}

void VirtualRankExpertCopies::reduce(const void* grad_copies, void* grad_experts, cudaStream_t stream) const {
  if (!grad_copies || !grad_experts)
    throw InputError("moonep::cuda::VirtualRankExpertCopies::reduce: a buffer is null");
  check_runnable(stream);
  const CopyParams& p = s_->p;
  if (p.B == 0) return;
  const i64 bytes = p.Q * element_bytes(s_->type);
  const bool vec = bytes % 16 == 0 && aligned16(grad_copies) && aligned16(grad_experts);
  const i64 stride = p.B * bytes;  // from rank d's copy slots to rank d+1's
  switch (s_->type) {
    case Element::f32: copy_kernels::launch_reduce<float>(p, vec, 0, p.E, grad_copies, stride, grad_experts, stream); break;
    case Element::f64: copy_kernels::launch_reduce<double>(p, vec, 0, p.E, grad_copies, stride, grad_experts, stream); break;
    case Element::bf16:
      copy_kernels::launch_reduce<__nv_bfloat16>(p, vec, 0, p.E, grad_copies, stride, grad_experts, stream);
      break;
  }
  impl::check_cuda(cudaGetLastError(), "launching the reduce kernel");
}

}  // namespace moonep::cuda
