// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Problems made on the device, one per graph replay (soak_problem.hpp).
#include "soak_problem.hpp"

namespace moonep::test {
namespace {

__global__ void next_problem(const unsigned* step, int R, int E, int S, int K, int H, std::int32_t** routing, float* x,
                             float* w) {
  const unsigned s = *step;
  const std::int64_t n_ids = static_cast<std::int64_t>(R) * S * K, n_x = static_cast<std::int64_t>(R) * S * H;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n_ids + n_x;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = (static_cast<std::uint64_t>(s) << 40) ^ (static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 29;
    if (i < n_ids) {
      const std::int64_t per_rank = static_cast<std::int64_t>(S) * K;
      // A quarter of the ids uniform, the rest on the first quarter of the
      // experts: ranks 0 and 1 overloaded, so work and copies move.
      const unsigned u = static_cast<unsigned>(z >> 8);
      const int e = (u & 3u) == 0 ? static_cast<int>(u % static_cast<unsigned>(E))
                                  : static_cast<int>(u % static_cast<unsigned>(E > 3 ? E / 4 : E));
      routing[i / per_rank][i % per_rank] = e;
      w[i] = static_cast<float>(static_cast<int>(z >> 60) - 8) / 4;
    } else {
      x[i - n_ids] = static_cast<float>(static_cast<int>((z >> 58) & 15u) - 8) / 4;
    }
  }
}

__global__ void count_step(unsigned* step) { ++*step; }

}  // namespace

void enqueue_next_problem(const unsigned* step, const Config& c, int H, std::int32_t** routing, float* x, float* w,
                          cudaStream_t stream) {
  next_problem<<<256, 256, 0, stream>>>(step, c.ranks, c.experts, c.tokens, c.topk, H, routing, x, w);
}

void enqueue_count_step(unsigned* step, cudaStream_t stream) { count_step<<<1, 1, 0, stream>>>(step); }

}  // namespace moonep::test
