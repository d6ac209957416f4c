// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A new problem for every replay of a captured CUDA graph, made on the
// device (soak tests: no host in the loop). soak_problem.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "moonep/config.hpp"

namespace moonep::test {

// Enqueues a kernel that writes step *step's problem: every rank's S*K
// expert ids into routing[r] (a device array of R device pointers), float
// weights w [R][S][K] and rows x [R][S][H], small multiples of 1/4 (every
// product and sum exact), from a hash of (step, index).
void enqueue_next_problem(const unsigned* step, const Config& c, int H, std::int32_t** routing, float* x, float* w,
                          cudaStream_t stream);
// Enqueues ++*step.
void enqueue_count_step(unsigned* step, cudaStream_t stream);

}  // namespace moonep::test
