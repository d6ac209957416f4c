// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what the CUDA MoE layers (VirtualRankMoeLayer, GpuWorldMoeLayer)
// share: the row-major GEMM through cuBLAS, a cuBLAS handle with its own
// workspace (made once, so that no GEMM allocates and a captured graph
// holds no allocation), and the list of non-empty groups a plan's group
// sizes give, after the refusal of an unrunnable plan. Defined in
// moe_layer.cu.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "../device_buffer.hpp"
#include "moonep/config.hpp"
#include "moonep/cuda_layer.hpp"

namespace moonep::cuda::impl {

// RuntimeError "cuBLAS error in <what>: <cuBLAS's text>" unless st is a success.
void check_blas(cublasStatus_t st, const char* what);

// A cuBLAS handle on the current device with default math (TF32 never
// used) and a workspace of its own (32 MiB covers Hopper's largest
// request); one per stream that runs GEMMs at the same time as another.
struct BlasHandle {
  cublasHandle_t h = nullptr;
  int device = 0;  // current when made; current again when destroyed
  DeviceBuffer workspace;
  BlasHandle();
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
};

// C = op(A) @ op(B) (beta 0) for row-major A, B, C of `type`: `m` x `n`
// result, inner size `k`; op a transpose when asked. Accumulates in float
// (double for f64) on `stream`, with the handle's device current.
void gemm(cublasHandle_t blas, Element type, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
          std::int64_t k, const void* a, std::int64_t lda, const void* b, std::int64_t ldb, void* c, std::int64_t ldc,
          cudaStream_t stream);

// One non-empty group: rank d's slots from..from+rows (within 0..NvS) run
// an own expert (own: `slot` is the expert id, d's expert slot - d*epn)
// or copy slot `slot`.
struct MoeGroup {
  int d;
  std::int64_t from, rows;
  bool own;
  std::int64_t slot;  // expert id (own) or copy slot b
};

// From every rank's cu_seqlens (host, [R][E+B]): refuse_uncopied's
// InputError (group_sizes.hpp; `groups` is then left empty), else `groups` = the non-empty groups in increasing rank,
// then group; a group's rows clipped to 0..NvS, and an own group of an
// expert the rank does not own never listed.
void list_groups(const Config& c, const std::int32_t* cu_seqlens, std::vector<MoeGroup>& groups);

}  // namespace moonep::cuda::impl
