// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what moonep::cuda::VirtualRankMoeLayer (moonep/cuda_moe_layer.hpp)
// holds, shared by its forward (moe_layer.cu) and backward
// (moe_layer_backward.cu), and the one GEMM call both make.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "../device_buffer.hpp"
#include "element_sizes.hpp"
#include "group_sizes.hpp"
#include "moe_gemm.hpp"
#include "moonep/config.hpp"
#include "moonep/cuda_expert_copies.hpp"
#include "moonep/cuda_layer.hpp"
#include "moonep/cuda_moe_layer.hpp"

namespace moonep::cuda {

struct VirtualRankMoeLayer::State {
  Config config;
  Element type;
  int H = 0, O = 0;  // H and H'
  bool training = false;
  std::unique_ptr<VirtualRankLayer> in, out;  // dispatch side (H), combine side (H')
  std::unique_ptr<VirtualRankExpertCopies> copies;
  std::unique_ptr<impl::PlanGroupSizes> group_sizes;  // read_groups' copy
  bool groups_read = false;
  impl::DeviceBuffer recv, recv_w, y, copy_buf, grad_y, grad_recv, grad_copies;
  std::unique_ptr<impl::BlasHandle> blas;
  ~State();

  std::int64_t elem() const { return element_bytes(type); }
  std::int64_t Q() const { return static_cast<std::int64_t>(H) * O; }

  // The non-empty groups of the last read_groups (moe_gemm.hpp).
  using Group = impl::MoeGroup;
  std::vector<Group> groups;  // rebuilt by read_groups, capacity made once

  // C = op(A) @ op(B) (beta 0) for row-major A, B, C of this layer's
  // element type: `m` x `n` result, inner size `k`; op a transpose when
  // asked. Accumulates in float (double for f64) on `stream`.
  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
            std::int64_t lda, const void* b, std::int64_t ldb, void* c, std::int64_t ldc, cudaStream_t stream) const;
};

}  // namespace moonep::cuda
