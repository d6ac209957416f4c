// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankMoeLayer (moonep/cuda_moe_layer.hpp): the
// buffers, the group sizes read to the host, the GEMM through cuBLAS and
// the forward (fetch, dispatch, one GEMM per non-empty group, combine).
// The backward is moe_layer_backward.cu. Also what both CUDA MoE layers
// share (moe_gemm.hpp: the GEMM, the cuBLAS handle, the groups' list).
#include <cublas_v2.h>

#include <cstdint>
#include <string>

#include "../host_checks.hpp"
#include "moe_layer_state.hpp"
#include "moonep/error.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/layer_reference.hpp"

namespace moonep::cuda {

using i64 = std::int64_t;

namespace impl {

void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw RuntimeError(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusString(st));
}

namespace {
constexpr i64 kWorkspaceBytes = i64{32} << 20;
}

BlasHandle::BlasHandle() {
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  workspace.allocate(kWorkspaceBytes, "allocating cuBLAS's workspace");
  check_blas(cublasCreate(&h), "cublasCreate");
  check_blas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check_blas(cublasSetWorkspace(h, workspace.ptr, kWorkspaceBytes), "cublasSetWorkspace");
}
BlasHandle::~BlasHandle() {
  if (!h) return;
  int saved = 0;
  cudaGetDevice(&saved);
  cudaSetDevice(device);
  cublasDestroy(h);
  cudaSetDevice(saved);
}

void gemm(cublasHandle_t blas, Element type, bool trans_a, bool trans_b, i64 m, i64 n, i64 k, const void* a, i64 lda,
          const void* b, i64 ldb, void* c, i64 ldc, cudaStream_t stream) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
  // same pointers and leading dimensions, operands swapped.
  check_blas(cublasSetStream(blas, stream), "cublasSetStream");
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int N = static_cast<int>(n), M = static_cast<int>(m), Kk = static_cast<int>(k);
  if (type == Element::f64) {
    const double one = 1, zero = 0;
    check_blas(cublasGemmEx(blas, ob, oa, N, M, Kk, &one, b, CUDA_R_64F, static_cast<int>(ldb), a, CUDA_R_64F,
                            static_cast<int>(lda), &zero, c, CUDA_R_64F, static_cast<int>(ldc), CUBLAS_COMPUTE_64F,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (f64)");
    return;
  }
  const float one = 1, zero = 0;
  const cudaDataType_t t = type == Element::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  // CUBLAS_COMPUTE_32F (not _FAST_TF32): every product and sum in float.
  check_blas(cublasGemmEx(blas, ob, oa, N, M, Kk, &one, b, t, static_cast<int>(ldb), a, t, static_cast<int>(lda),
                          &zero, c, t, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx");
}

void refuse_uncopied(const Config& c, const std::int32_t* sizes) {
  if (c.copy_slots >= c.experts_per_rank()) return;
  const i64 G = c.groups();
  HostPlan plan;
  plan.config = c;
  plan.ranks.resize(static_cast<std::size_t>(c.ranks));
  for (int r = 0; r < c.ranks; ++r)
    plan.ranks[static_cast<std::size_t>(r)].cu_seqlens.assign(sizes + r * G, sizes + (r + 1) * G);
  check_experts_runnable(plan);
}

void list_groups(const Config& c, const std::int32_t* cu_seqlens, std::vector<MoeGroup>& groups) {
  const i64 G = c.groups(), E = c.experts, epn = c.experts_per_rank(), nvs = c.slots();
  groups.clear();
  // The refusal first, in the reference's words (only B < epn can hold
  // such a plan; the check is a loop over what was read).
  refuse_uncopied(c, cu_seqlens);
  const auto clip = [nvs](i64 v) { return v < 0 ? 0 : (v > nvs ? nvs : v); };
  for (int d = 0; d < c.ranks; ++d) {
    const std::int32_t* cu = cu_seqlens + d * G;
    for (i64 g = 0; g < G; ++g) {
      const i64 from = clip(g == 0 ? 0 : cu[g - 1]), to = clip(cu[g]);
      if (to <= from) continue;
      // An own group of an expert the rank does not own never runs (only a
      // refused plan has one; this keeps P's index in range regardless).
      if (g < E && g / epn != d) continue;
      groups.push_back(MoeGroup{d, from, to - from, g < E, g < E ? g : g - E});
    }
  }
}

}  // namespace impl

VirtualRankMoeLayer::State::~State() {
}

void VirtualRankMoeLayer::State::gemm(bool trans_a, bool trans_b, i64 m, i64 n, i64 k, const void* a, i64 lda,
                                      const void* b, i64 ldb, void* c, i64 ldc, cudaStream_t stream) const {
  impl::gemm(blas->h, type, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, stream);
}

VirtualRankMoeLayer::VirtualRankMoeLayer(const VirtualRankPlanner& planner, int hidden, int hidden_out, Element type,
                                         bool training)
    : s_(std::make_unique<State>()) {
  if (hidden < 1)
    throw InputError("moonep::cuda::VirtualRankMoeLayer: H must be at least 1, got " + std::to_string(hidden));
  if (hidden_out < 1)
    throw InputError("moonep::cuda::VirtualRankMoeLayer: H' must be at least 1, got " + std::to_string(hidden_out));
  State& s = *s_;
  const Config& c = planner.config();
  s.config = c;
  s.type = type;
  s.H = hidden;
  s.O = hidden_out;
  s.training = training;
  s.in = std::make_unique<VirtualRankLayer>(planner, hidden, type);
  s.out = std::make_unique<VirtualRankLayer>(planner, hidden_out, type);
  s.copies = std::make_unique<VirtualRankExpertCopies>(planner, s.Q(), type);
  std::vector<const std::int32_t*> cu_seqlens;
  for (int r = 0; r < c.ranks; ++r) cu_seqlens.push_back(planner.rank_plan(r).cu_seqlens);
  s.group_sizes = std::make_unique<impl::PlanGroupSizes>(c, cu_seqlens, "MoE layer");
  const i64 R = c.ranks, nvs = c.slots(), B = c.copy_slots, e = s.elem(), wbytes = accum_bytes(type);
  s.groups.reserve(static_cast<std::size_t>(R * c.groups()));
  // Zeroed once (DeviceBuffer): slots no step writes read as 0.
  s.recv.allocate(R * nvs * hidden * e, "allocating the MoE layer's recv");
  s.recv_w.allocate(R * nvs * wbytes, "allocating the MoE layer's recv_w");
  s.y.allocate(R * nvs * hidden_out * e, "allocating the MoE layer's y");
  s.copy_buf.allocate(R * B * s.Q() * e, "allocating the MoE layer's copies");
  if (training) {
    s.grad_y.allocate(R * nvs * hidden_out * e, "allocating the MoE layer's grad_y");
    s.grad_recv.allocate(R * nvs * hidden * e, "allocating the MoE layer's grad_recv");
    s.grad_copies.allocate(R * B * s.Q() * e, "allocating the MoE layer's grad_copies");
  }
  s.blas = std::make_unique<impl::BlasHandle>();
}

VirtualRankMoeLayer::~VirtualRankMoeLayer() = default;
int VirtualRankMoeLayer::hidden() const { return s_->H; }
int VirtualRankMoeLayer::hidden_out() const { return s_->O; }
std::int64_t VirtualRankMoeLayer::params() const { return s_->Q(); }
Element VirtualRankMoeLayer::element() const { return s_->type; }
const void* VirtualRankMoeLayer::recv() const { return s_->recv.ptr; }
const void* VirtualRankMoeLayer::recv_w() const { return s_->recv_w.ptr; }
const void* VirtualRankMoeLayer::y() const { return s_->y.ptr; }
const void* VirtualRankMoeLayer::copies() const { return s_->copy_buf.ptr; }
int VirtualRankMoeLayer::gemm_count() const { return static_cast<int>(s_->groups.size()); }

void VirtualRankMoeLayer::read_groups(cudaStream_t stream) {
  State& s = *s_;
  const Config& c = s.config;
  s.group_sizes->read(stream);
  s.groups_read = false;
  impl::list_groups(c, s.group_sizes->sizes(), s.groups);  // refuses an unrunnable plan
  s.groups_read = true;
}

void VirtualRankMoeLayer::enqueue_fetch(const void* experts, cudaStream_t stream) const {
  s_->copies->fetch(experts, s_->copy_buf.ptr, stream);
}

void VirtualRankMoeLayer::enqueue_dispatch(const void* x, const void* w, cudaStream_t stream) const {
  s_->in->dispatch(x, w, s_->recv.ptr, s_->recv_w.ptr, stream);
}

void VirtualRankMoeLayer::enqueue_gemms(const void* experts, cudaStream_t stream) const {
  const State& s = *s_;
  if (!experts) throw InputError("moonep::cuda::VirtualRankMoeLayer: the experts' buffer is null");
  if (!s.groups_read) throw InputError("moonep::cuda::VirtualRankMoeLayer: read_groups() has not run for this plan");
  const i64 nvs = s.config.slots(), Q = s.Q(), e = s.elem(), B = s.config.copy_slots;
  const char* P = static_cast<const char*>(experts);
  const char* copies = static_cast<const char*>(s.copy_buf.ptr);
  for (const State::Group& g : s.groups) {
    const char* M = g.own ? P + g.slot * Q * e : copies + (g.d * B + g.slot) * Q * e;
    const char* a = static_cast<const char*>(s.recv.ptr) + (g.d * nvs + g.from) * s.H * e;
    char* y = static_cast<char*>(s.y.ptr) + (g.d * nvs + g.from) * s.O * e;
    s.gemm(false, false, g.rows, s.O, s.H, a, s.H, M, s.O, y, s.O, stream);
  }
}

void VirtualRankMoeLayer::enqueue_combine(void* out, cudaStream_t stream) const {
  s_->out->combine(s_->y.ptr, s_->recv_w.ptr, out, stream);
}

void VirtualRankMoeLayer::forward(const void* x, const void* w, const void* experts, void* out, cudaStream_t stream) {
  if (!x || !w || !experts || !out) throw InputError("moonep::cuda::VirtualRankMoeLayer::forward: a buffer is null");
  read_groups(stream);  // refuses an unrunnable plan before anything moves
  enqueue_fetch(experts, stream);
  enqueue_dispatch(x, w, stream);
  enqueue_gemms(experts, stream);
  enqueue_combine(out, stream);
}

}  // namespace moonep::cuda
