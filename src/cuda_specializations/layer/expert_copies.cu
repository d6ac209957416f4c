// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankExpertCopies (moonep/cuda_expert_copies.hpp):
// fetch (one kernel: blocks per copy slot, a slot's Q values moved as bits)
// and reduce (one kernel: blocks per expert, the expert's copies found in
// increasing d then b, added in the accumulation type, rounded once).
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

namespace moonep::cuda {
namespace {

using i64 = std::int64_t;

constexpr int kThreads = 256;
// The copies of one expert that reduce lists in shared memory; an expert
// with more (R*B above this and copied that often) is summed by scanning
// the table per element instead (same order, same bits, slower).
constexpr int kListed = 512;

struct CopyParams {
  int R, E, B, epn;
  i64 Q;
  const std::int32_t* table;  // rank 0's experts_to_copy [R][B]
  i64 stride;                 // words from rank r's plan outputs to rank r+1's
};

// Rank r's own experts_to_copy row r, entry b (every rank holds the whole
// [R][B] table; each rank reads its own plan, as the portable path does).
__device__ __forceinline__ std::int32_t copied(const CopyParams& p, int r, int row, int b) {
  return p.table[static_cast<i64>(r) * p.stride + static_cast<i64>(row) * p.B + b];
}

// fetch: blockIdx.y (grid-strided) is slot d*B + b; the x blocks and
// threads stride over the slot's `pieces` units of U bytes (int4 or char).
template <class U>
__global__ void fetch_kernel(CopyParams p, i64 pieces, const U* experts, U* copies) {
  for (i64 slot = blockIdx.y; slot < static_cast<i64>(p.R) * p.B; slot += gridDim.y) {
    const int d = static_cast<int>(slot / p.B), b = static_cast<int>(slot % p.B);
    const std::int32_t e = copied(p, d, d, b);
    if (e < 0 || e >= p.E) continue;
    const U* from = experts + static_cast<i64>(e) * pieces;
    U* to = copies + slot * pieces;
    for (i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; j < pieces;
         j += static_cast<i64>(gridDim.x) * blockDim.x)
      to[j] = from[j];
  }
}

template <class T>
struct Acc;
template <>
struct Acc<float> {
  using A = float;
  __device__ static A load(float v) { return v; }
  __device__ static float store(A a) { return a; }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};
template <>
struct Acc<double> {
  using A = double;
  __device__ static A load(double v) { return v; }
  __device__ static double store(A a) { return a; }
  __device__ static A add(A a, A b) { return __dadd_rn(a, b); }
};
template <>
struct Acc<__nv_bfloat16> {
  using A = float;
  __device__ static A load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(A a) { return __float2bfloat16_rn(a); }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};

// V elements of T that move as one unit (16 bytes when V*sizeof(T) == 16).
template <class T, int V>
struct alignas(V * sizeof(T) == 16 ? 16 : alignof(T)) Piece {
  T v[V];
};

// reduce: blockIdx.y (grid-strided) is expert e = h*epn + j; the first
// warp lists the slots (d*B + b) holding a copy of e, in increasing d then b,
// from the owner h's table; then every thread sums its pieces of V
// elements over that list. An expert without copies is not written.
template <class T, int V>
__global__ void reduce_kernel(CopyParams p, const Piece<T, V>* grad_copies, Piece<T, V>* grad_experts) {
  using M = Acc<T>;
  using A = typename M::A;
  __shared__ int list[kListed];
  __shared__ int count;
  const i64 pieces = p.Q / V;
  for (i64 e = blockIdx.y; e < p.E; e += gridDim.y) {
    const int h = static_cast<int>(e / p.epn);
    __syncthreads();  // the previous expert's list is no longer read
    if (threadIdx.x < 32) {
      // The first warp scans the owner's table 32 slots at a time; a hit's
      // place is the hits before it (lower lanes, earlier rounds), so the
      // list is in increasing slot d*B + b, i.e. increasing d then b.
      const int lane = threadIdx.x, total = p.R * p.B;
      const std::int32_t* row = p.table + static_cast<i64>(h) * p.stride;
      int n = 0;
      for (int base = 0; base < total; base += 32) {
        const int i = base + lane;
        const bool hit = i < total && row[i] == e;
        const unsigned m = __ballot_sync(0xffffffffu, hit);
        const int at = n + __popc(m & ((1u << lane) - 1u));
        if (hit && at < kListed) list[at] = i;
        n += __popc(m);
      }
      if (lane == 0) count = n;
    }
    __syncthreads();
    const int n = count;
    if (n == 0) continue;  // the same for the whole block
    for (i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; j < pieces;
         j += static_cast<i64>(gridDim.x) * blockDim.x) {
      Piece<T, V> own = grad_experts[e * pieces + j];
      A acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = M::load(own.v[k]);
      if (n <= kListed) {
        for (int c = 0; c < n; ++c) {
          const Piece<T, V> g = grad_copies[static_cast<i64>(list[c]) * pieces + j];
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] = M::add(acc[k], M::load(g.v[k]));
        }
      } else {
        for (int d = 0; d < p.R; ++d)
          for (int b = 0; b < p.B; ++b) {
            if (copied(p, h, d, b) != e) continue;
            const Piece<T, V> g = grad_copies[(static_cast<i64>(d) * p.B + b) * pieces + j];
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] = M::add(acc[k], M::load(g.v[k]));
          }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) own.v[k] = M::store(acc[k]);
      grad_experts[e * pieces + j] = own;
    }
  }
}

int element_bytes(Element e) { return e == Element::f64 ? 8 : (e == Element::bf16 ? 2 : 4); }

// Blocks along x for `pieces` units per row: enough for one row to fill
// the GPU (about 2 blocks per SM of an H100), never more than it needs.
// Rows whose slot is unused (or whose expert has no copies) exit at once,
// so a step that uses few of the R*B slots still moves them at full rate.
unsigned x_blocks(i64 pieces) {
  const i64 want = (pieces + kThreads - 1) / kThreads, fill = 2 * 132;
  const i64 b = want < fill ? want : fill;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}
unsigned y_blocks(i64 rows) { return static_cast<unsigned>(rows < 1 ? 1 : (rows > 65535 ? 65535 : rows)); }

bool aligned16(const void* v) { return (reinterpret_cast<std::uintptr_t>(v) & 15u) == 0; }

template <class T>
void launch_reduce(const CopyParams& p, bool vec, const void* gc, void* gp, cudaStream_t stream) {
  const dim3 grid(x_blocks(vec ? p.Q / (16 / sizeof(T)) : p.Q), y_blocks(p.E));
  if (vec) {
    constexpr int V = 16 / sizeof(T);
    reduce_kernel<T, V><<<grid, kThreads, 0, stream>>>(p, static_cast<const Piece<T, V>*>(gc),
                                                       static_cast<Piece<T, V>*>(gp));
  } else {
    reduce_kernel<T, 1><<<grid, kThreads, 0, stream>>>(p, static_cast<const Piece<T, 1>*>(gc),
                                                       static_cast<Piece<T, 1>*>(gp));
  }
}

}  // namespace

struct VirtualRankExpertCopies::State {
  Config config;
  Element type;
  CopyParams p{};
  std::vector<const std::int32_t*> cu_seqlens;  // each rank's, device
  std::int32_t* host_groups = nullptr;          // pinned [R][E+B], B < epn only
  mutable HostPlan groups;                      // what check_experts_runnable reads
  ~State() {
    if (host_groups) cudaFreeHost(host_groups);
  }
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
  for (int r = 0; r < c.ranks; ++r) {
    // The kernels compute rank r's table from rank 0's: checked once here.
    if (planner.rank_plan(r).experts_to_copy != p.table + static_cast<i64>(r) * p.stride)
      throw RuntimeError("moonep::cuda::VirtualRankExpertCopies: the planner's rank outputs are not evenly strided");
    s.cu_seqlens.push_back(planner.rank_plan(r).cu_seqlens);
  }
  if (c.copy_slots < p.epn) {
    const std::size_t G = static_cast<std::size_t>(c.groups());
    impl::check_cuda(cudaMallocHost(reinterpret_cast<void**>(&s.host_groups), c.ranks * G * sizeof(std::int32_t)),
                     "allocating the expert copies' group sizes on the host");
    s.groups.config = c;
    s.groups.ranks.resize(static_cast<std::size_t>(c.ranks));
    for (auto& r : s.groups.ranks) r.cu_seqlens.resize(G);
  }
}

VirtualRankExpertCopies::~VirtualRankExpertCopies() = default;
std::int64_t VirtualRankExpertCopies::params() const { return s_->p.Q; }
Element VirtualRankExpertCopies::element() const { return s_->type; }

void VirtualRankExpertCopies::check_runnable(cudaStream_t stream) const {
  const State& s = *s_;
  if (!s.host_groups) return;  // B >= epn: no plan can hold a remote expert without a copy
  const std::size_t G = static_cast<std::size_t>(s.config.groups());
  for (int r = 0; r < s.config.ranks; ++r)
    impl::check_cuda(cudaMemcpyAsync(s.host_groups + r * G, s.cu_seqlens[static_cast<std::size_t>(r)],
                                     G * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream),
                     "reading the plan's group sizes");
  impl::check_cuda(cudaStreamSynchronize(stream), "waiting for the plan's group sizes");
  for (int r = 0; r < s.config.ranks; ++r)
    std::copy(s.host_groups + r * G, s.host_groups + (r + 1) * G, s.groups.ranks[static_cast<std::size_t>(r)].cu_seqlens.begin());
  check_experts_runnable(s.groups);
}

void VirtualRankExpertCopies::fetch(const void* experts, void* copies, cudaStream_t stream) const {
  if (!experts || !copies) throw InputError("moonep::cuda::VirtualRankExpertCopies::fetch: a buffer is null");
  check_runnable(stream);
  const CopyParams& p = s_->p;
  const i64 bytes = p.Q * element_bytes(s_->type), slots = static_cast<i64>(p.R) * p.B;
  if (slots == 0) return;
  if (bytes % 16 == 0 && aligned16(experts) && aligned16(copies)) {
    const i64 pieces = bytes / 16;
    fetch_kernel<int4><<<dim3(x_blocks(pieces), y_blocks(slots)), kThreads, 0, stream>>>(
        p, pieces, static_cast<const int4*>(experts), static_cast<int4*>(copies));
  } else {
    fetch_kernel<char><<<dim3(x_blocks(bytes), y_blocks(slots)), kThreads, 0, stream>>>(
        p, bytes, static_cast<const char*>(experts), static_cast<char*>(copies));
  }
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
  switch (s_->type) {
    case Element::f32: launch_reduce<float>(p, vec, grad_copies, grad_experts, stream); break;
    case Element::f64: launch_reduce<double>(p, vec, grad_copies, grad_experts, stream); break;
    case Element::bf16: launch_reduce<__nv_bfloat16>(p, vec, grad_copies, grad_experts, stream); break;
  }
  impl::check_cuda(cudaGetLastError(), "launching the reduce kernel");
}

}  // namespace moonep::cuda
