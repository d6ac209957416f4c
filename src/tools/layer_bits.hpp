// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-layer under MPI (--world mpi, layer_mpi.cpp; --world gpu
// under mpirun, layer_gpu_world_mpi.cpp): each process's rank results as
// the float32 bits the files hold, gathered to rank 0 and unpacked there
// into the [R][...] arrays of the files.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "layer_run.hpp"
#include "moonep/config.hpp"

namespace moonep::tools {

// This rank's results as float32 bits, in the order out, recv, grad_x,
// grad_w, grad_experts: the same count on every process.
using Bits = std::vector<int>;
inline void append_bits(Bits& bits, const double* values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(values[i]);
    int b;
    std::memcpy(&b, &f, sizeof b);
    bits.push_back(b);
  }
}

// Every rank's bits (on rank 0) as the [R][...] arrays of the files.
// H' = H and no expert gradients without --experts.
inline LayerResults unpack_bits(const std::vector<int>& all, const Config& c, int hidden, int hidden_out, bool grads,
                                bool linear) {
  const std::size_t S = c.tokens, H = hidden, O = hidden_out, K = c.topk, nvs = c.slots(), R = c.ranks;
  const std::size_t sizes[5] = {S * O, nvs * H, grads ? S * H : 0, grads ? S * K : 0,
                                grads && linear ? std::size_t(c.experts_per_rank()) * H * O : 0};
  const std::size_t per_rank = sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4];
  LayerResults res;
  std::vector<double>* parts[5] = {&res.out, &res.recv, &res.grad_x, &res.grad_w, &res.grad_experts};
  for (std::size_t r = 0; r < R; ++r) {
    std::size_t at = r * per_rank;
    for (int k = 0; k < 5; ++k)
      for (std::size_t i = 0; i < sizes[k]; ++i, ++at) {
        float v;
        std::memcpy(&v, &all[at], sizeof v);
        parts[k]->push_back(v);
      }
  }
  return res;
}

}  // namespace moonep::tools
