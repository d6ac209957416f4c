// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankLayer (moonep/cuda_layer.hpp): dispatch and
// combine for the virtual ranks of a VirtualRankPlanner, four small kernels
// (dispatch rows, dispatch tail; combine prologue, combine sum), one warp
// per unit of work, rows moved in 16-byte pieces where they can be.
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "../device_buffer.hpp"
#include "../host_checks.hpp"
#include "moonep/cuda_layer.hpp"
#include "moonep/error.hpp"

namespace moonep::cuda {
namespace {

using i64 = std::int64_t;

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 32 * kWarpsPerBlock;

// What every kernel of the layer knows: the shape, the plans (rank r's
// outputs at rank 0's pointers + r*plan_stride words) and the buffers.
struct LayerParams {
  int R, K, S, NvS, groups;
  i64 H;            // elements per row
  i64 row_bytes;    // H * element size
  int elem;         // element size in bytes
  bool vec16;       // rows move as int4: row_bytes % 16 == 0 and every base 16-byte aligned
  DeviceRankPlan plan;  // rank 0's
  i64 plan_stride;  // words from rank r's plan fields to rank r+1's
};

__device__ __forceinline__ const std::int32_t* field(const std::int32_t* rank0, const LayerParams& p, int r) {
  return rank0 + static_cast<i64>(r) * p.plan_stride;
}

// The warp copies one row of p.row_bytes (lane-strided, 16 bytes a piece
// where it can).
__device__ __forceinline__ void copy_row(const LayerParams& p, const char* from, char* to, int lane) {
  if (p.vec16) {
    const int4* f = reinterpret_cast<const int4*>(from);
    int4* t = reinterpret_cast<int4*>(to);
    const i64 n = p.row_bytes / 16;
#pragma unroll 4
    for (i64 j = lane; j < n; j += 32) t[j] = __ldg(f + j);
  } else {
    for (i64 j = lane; j < p.row_bytes; j += 32) to[j] = from[j];
  }
}

__device__ __forceinline__ void zero_row(const LayerParams& p, char* to, int lane) {
  if (p.vec16) {
    int4* t = reinterpret_cast<int4*>(to);
    const i64 n = p.row_bytes / 16;
    for (i64 j = lane; j < n; j += 32) t[j] = make_int4(0, 0, 0, 0);
  } else {
    for (i64 j = lane; j < p.row_bytes; j += 32) to[j] = 0;
  }
}

// Dispatch, 1: a warp per entry (r, i) of every rank: its weight, and for a
// primary its token's row into the destination slot.
template <class W>
__global__ void dispatch_rows(LayerParams p, const char* x, const W* w, char* recv, W* recv_w) {
  const int lane = threadIdx.x & 31;
  const i64 warp = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const i64 warps = (static_cast<i64>(gridDim.x) * blockDim.x) >> 5;
  const i64 N = static_cast<i64>(p.S) * p.K, slots = static_cast<i64>(p.R) * p.NvS;
  for (i64 e = warp; e < static_cast<i64>(p.R) * N; e += warps) {
    const int r = static_cast<int>(e / N);
    const i64 i = e % N;
    const i64 n_r = *field(p.plan.entries, p, r);
    if (i >= n_r || n_r > N) continue;
    const std::int32_t code = field(p.plan.dst, p, r)[i];
    const i64 c = code >= 0 ? code : -static_cast<i64>(code) - 1;
    if (c >= slots) continue;
    if (lane == 0) recv_w[c] = w[static_cast<i64>(r) * N + i];
    if (code >= 0) copy_row(p, x + (static_cast<i64>(r) * p.S + i / p.K) * p.row_bytes, recv + c * p.row_bytes, lane);
  }
}

// Dispatch, 2: per destination, a warp per padding range (rows and weights
// zeroed) and per dup group (its primary's row into each duplicate slot).
// Runs after dispatch_rows: the primaries' rows are in place.
template <class W>
__global__ void dispatch_tail(LayerParams p, char* recv, W* recv_w) {
  const int lane = threadIdx.x & 31;
  const i64 warp = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const i64 warps = (static_cast<i64>(gridDim.x) * blockDim.x) >> 5;
  const i64 per_rank = static_cast<i64>(p.groups) + p.NvS;  // padding ranges, then dup groups
  for (i64 u = warp; u < static_cast<i64>(p.R) * per_rank; u += warps) {
    const int d = static_cast<int>(u / per_rank);
    const i64 j = u % per_rank;
    const i64 base = static_cast<i64>(d) * p.NvS;
    if (j < p.groups) {
      const std::int32_t* zf = field(p.plan.zero_fill_ranges, p, d);
      const i64 from = zf[2 * j] < 0 ? 0 : zf[2 * j];
      const i64 to = from + zf[2 * j + 1] > p.NvS ? p.NvS : from + zf[2 * j + 1];
      for (i64 s = from; s < to; ++s) {
        if (lane == 0) recv_w[base + s] = W(0);
        zero_row(p, recv + (base + s) * p.row_bytes, lane);
      }
      continue;
    }
    const i64 g = j - p.groups;
    if (g >= field(p.plan.dup_counts, p, d)[0]) continue;
    const std::int32_t* grp = field(p.plan.dup_groups, p, d) + 3 * g;
    const std::int32_t* loffs = field(p.plan.dup_loffs, p, d);
    const i64 primary = grp[0];
    if (primary < 0 || primary >= p.NvS) continue;
    for (i64 q = grp[1]; q < static_cast<i64>(grp[1]) + grp[2]; ++q) {
      if (q < 0 || q >= p.NvS) continue;
      const i64 dup = loffs[q];
      if (dup < 0 || dup >= p.NvS) continue;
      copy_row(p, recv + (base + primary) * p.row_bytes, recv + (base + dup) * p.row_bytes, lane);
    }
  }
}

// Element conversions and arithmetic rounded step by step (no FMA), as the
// host's reference computes.
template <class T>
struct Arith;
template <>
struct Arith<float> {
  using A = float;
  __device__ static A load(const float* v, i64 j) { return v[j]; }
  __device__ static void store(float* v, i64 j, A a) { v[j] = a; }
  __device__ static A mul(A a, A b) { return __fmul_rn(a, b); }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};
template <>
struct Arith<double> {
  using A = double;
  __device__ static A load(const double* v, i64 j) { return v[j]; }
  __device__ static void store(double* v, i64 j, A a) { v[j] = a; }
  __device__ static A mul(A a, A b) { return __dmul_rn(a, b); }
  __device__ static A add(A a, A b) { return __dadd_rn(a, b); }
};
template <>
struct Arith<__nv_bfloat16> {
  using A = float;
  __device__ static A load(const __nv_bfloat16* v, i64 j) { return __bfloat162float(v[j]); }
  __device__ static void store(__nv_bfloat16* v, i64 j, A a) { v[j] = __float2bfloat16_rn(a); }
  __device__ static A mul(A a, A b) { return __fmul_rn(a, b); }
  __device__ static A add(A a, A b) { return __fadd_rn(a, b); }
};

// Loads V consecutive values of the accumulation type (16-byte pieces
// where the row allows) and V elements of T as one 16-byte piece.
template <class A, int V>
__device__ __forceinline__ void load_acc(const A* from, A (&v)[V]) {
  static_assert((V * sizeof(A)) % 16 == 0, "whole 16-byte pieces");
#pragma unroll
  for (int j = 0; j < V * static_cast<int>(sizeof(A)) / 16; ++j)
    reinterpret_cast<int4*>(v)[j] = __ldg(reinterpret_cast<const int4*>(from) + j);
}
template <class A, int V>
__device__ __forceinline__ void store_acc(A* to, const A (&v)[V]) {
#pragma unroll
  for (int j = 0; j < V * static_cast<int>(sizeof(A)) / 16; ++j)
    reinterpret_cast<int4*>(to)[j] = reinterpret_cast<const int4*>(v)[j];
}
template <class T, int V>
__device__ __forceinline__ void load_piece(const T* from, T (&v)[V]) {
  static_assert(V * sizeof(T) == 16, "one 16-byte piece");
  *reinterpret_cast<int4*>(v) = __ldg(reinterpret_cast<const int4*>(from));
}

// Combine, 1 (prologue): per destination, a warp per dup group: the
// primary's partial row = its weighted row, then + each duplicate's
// weighted row in increasing k. With p.vec16 each lane takes V elements
// (one 16-byte piece of T) at a time.
template <class T>
__global__ void combine_prologue(LayerParams p, const T* y, const typename Arith<T>::A* recv_w,
                                 typename Arith<T>::A* partial) {
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31;
  const i64 warp = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const i64 warps = (static_cast<i64>(gridDim.x) * blockDim.x) >> 5;
  for (i64 u = warp; u < static_cast<i64>(p.R) * p.NvS; u += warps) {
    const int d = static_cast<int>(u / p.NvS);
    const i64 g = u % p.NvS;
    if (g >= field(p.plan.dup_counts, p, d)[0]) continue;
    const std::int32_t* grp = field(p.plan.dup_groups, p, d) + 3 * g;
    const std::int32_t* loffs = field(p.plan.dup_loffs, p, d);
    const i64 base = static_cast<i64>(d) * p.NvS, primary = grp[0];
    if (primary < 0 || primary >= p.NvS) continue;
    const A wp = recv_w ? recv_w[base + primary] : A(1);
    A* out = partial + (base + primary) * p.H;
    if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        T piece[V];
        load_piece(y + (base + primary) * p.H + h0, piece);
        A acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A v = M::load(piece, j);
          acc[j] = recv_w ? M::mul(wp, v) : v;
        }
        for (i64 q = grp[1]; q < static_cast<i64>(grp[1]) + grp[2]; ++q) {
          if (q < 0 || q >= p.NvS) continue;
          const i64 dup = loffs[q];
          if (dup < 0 || dup >= p.NvS) continue;
          load_piece(y + (base + dup) * p.H + h0, piece);
          const A wq = recv_w ? recv_w[base + dup] : A(1);
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const A v = M::load(piece, j);
            acc[j] = M::add(acc[j], recv_w ? M::mul(wq, v) : v);
          }
        }
        store_acc(out + h0, acc);
      }
      continue;
    }
    for (i64 h = lane; h < p.H; h += 32) {
      const A v = M::load(y, (base + primary) * p.H + h);
      A acc = recv_w ? M::mul(wp, v) : v;
      for (i64 q = grp[1]; q < static_cast<i64>(grp[1]) + grp[2]; ++q) {
        if (q < 0 || q >= p.NvS) continue;
        const i64 dup = loffs[q];
        if (dup < 0 || dup >= p.NvS) continue;
        const A vq = M::load(y, (base + dup) * p.H + h);
        acc = M::add(acc, recv_w ? M::mul(recv_w[base + dup], vq) : vq);
      }
      out[h] = acc;
    }
  }
}

// Combine, 2: a warp per token t < s_r of every rank: its primaries' rows
// in increasing k (the partial row where the primary has duplicates: a
// later entry of the token names the same destination rank), rounded once.
// Lane k first reads entry k's code and weight into the warp's shared
// slots; then each lane sums V consecutive elements (one 16-byte piece of
// T) per step where rows allow, one element otherwise.
template <class T>
__global__ void combine_sum(LayerParams p, const T* y, const typename Arith<T>::A* recv_w,
                            const typename Arith<T>::A* partial, T* out) {
  using M = Arith<T>;
  using A = typename M::A;
  constexpr int V = 16 / sizeof(T);
  __shared__ std::int32_t s_code[kWarpsPerBlock][32];
  __shared__ A s_w[kWarpsPerBlock][32];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 warp = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const i64 warps = (static_cast<i64>(gridDim.x) * blockDim.x) >> 5;
  const i64 slots = static_cast<i64>(p.R) * p.NvS, N = static_cast<i64>(p.S) * p.K;
  for (i64 u = warp; u < static_cast<i64>(p.R) * p.S; u += warps) {
    const int r = static_cast<int>(u / p.S);
    const i64 t = u % p.S;
    const i64 n_r = *field(p.plan.entries, p, r);
    if (t * p.K >= n_r || n_r > N) continue;  // the same for the whole warp
    const std::int32_t* dst = field(p.plan.dst, p, r) + t * p.K;
    const std::int32_t code = lane < p.K ? dst[lane] : -1;
    const bool primary = code >= 0 && code < slots;
    const i64 d = primary ? code / p.NvS : -1;
    bool dups = false;
    for (int k2 = lane + 1; k2 < p.K; ++k2) {
      const std::int32_t c2 = dst[k2];
      dups = dups || (c2 < 0 && (-static_cast<i64>(c2) - 1) / p.NvS == d);
    }
    const unsigned primaries = __ballot_sync(0xffffffffu, primary);
    const unsigned with_dups = __ballot_sync(0xffffffffu, primary && dups);
    s_code[wib][lane] = code;
    s_w[wib][lane] = primary && recv_w ? recv_w[code] : A(1);
    __syncwarp();
    T* o = out + (static_cast<i64>(r) * p.S + t) * p.H;
    if (p.vec16) {
      for (i64 h0 = static_cast<i64>(lane) * V; h0 < p.H; h0 += 32 * V) {
        A acc[V];
        bool first = true;
        for (unsigned m = primaries; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          const i64 c = s_code[wib][k];
          A v[V];
          if ((with_dups >> k) & 1u) {
            load_acc(partial + c * p.H + h0, v);
          } else {
            T piece[V];
            load_piece(y + c * p.H + h0, piece);
            const A wk = s_w[wib][k];
#pragma unroll
            for (int j = 0; j < V; ++j) {
              const A yv = M::load(piece, j);
              v[j] = recv_w ? M::mul(wk, yv) : yv;
            }
          }
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = first ? v[j] : M::add(acc[j], v[j]);
          first = false;
        }
        if (first) continue;  // no primary in range: nothing to write (never for a planned token)
        T piece[V];
#pragma unroll
        for (int j = 0; j < V; ++j) M::store(piece, j, acc[j]);
        *reinterpret_cast<int4*>(o + h0) = *reinterpret_cast<const int4*>(piece);
      }
    } else {
      for (i64 h = lane; h < p.H; h += 32) {
        A acc = A(0);
        bool first = true;
        for (unsigned m = primaries; m; m &= m - 1) {
          const int k = __ffs(m) - 1;
          const i64 c = s_code[wib][k];
          A v;
          if ((with_dups >> k) & 1u) {
            v = partial[c * p.H + h];
          } else {
            const A yv = M::load(y, c * p.H + h);
            v = recv_w ? M::mul(s_w[wib][k], yv) : yv;
          }
          acc = first ? v : M::add(acc, v);
          first = false;
        }
        if (!first) M::store(o, h, acc);
      }
    }
    __syncwarp();  // the shared slots are rewritten by the warp's next token
  }
}

int blocks_for(i64 warps) {
  const i64 b = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

int element_bytes(Element e) { return e == Element::f64 ? 8 : (e == Element::bf16 ? 2 : 4); }

}  // namespace

struct VirtualRankLayer::State {
  Config config;
  Element type;
  LayerParams p{};
  impl::DeviceBuffer partial;  // [R][NvS][H] in the accumulation type
};

VirtualRankLayer::VirtualRankLayer(const VirtualRankPlanner& planner, int hidden, Element type)
    : s_(std::make_unique<State>()) {
  const Config& c = planner.config();
  if (hidden < 1) throw InputError("moonep::cuda::VirtualRankLayer: H must be at least 1, got " + std::to_string(hidden));
  State& s = *s_;
  s.config = c;
  s.type = type;
  LayerParams& p = s.p;
  p.R = c.ranks;
  p.K = c.topk;
  p.S = c.tokens;
  p.NvS = static_cast<int>(c.slots());
  p.groups = c.groups();
  p.H = hidden;
  p.elem = element_bytes(type);
  p.row_bytes = p.H * p.elem;
  p.plan = planner.rank_plan(0);
  p.plan_stride = c.ranks > 1 ? planner.rank_plan(1).dst - planner.rank_plan(0).dst : 0;
  // Every rank's outputs lie at one stride (the planner's layout); checked
  // here, once, so the kernels can compute them.
  for (int r = 0; r < c.ranks; ++r) {
    const DeviceRankPlan& q = planner.rank_plan(r);
    const i64 off = static_cast<i64>(r) * p.plan_stride;
    if (q.dst != p.plan.dst + off || q.zero_fill_ranges != p.plan.zero_fill_ranges + off ||
        q.dup_groups != p.plan.dup_groups + off || q.dup_loffs != p.plan.dup_loffs + off ||
        q.dup_counts != p.plan.dup_counts + off || q.entries != p.plan.entries + off) {
      throw RuntimeError("moonep::cuda::VirtualRankLayer: the planner's rank outputs are not evenly strided");
    }
  }
  const i64 acc_bytes = type == Element::f64 ? 8 : 4;
  s.partial.allocate(static_cast<i64>(c.ranks) * p.NvS * p.H * acc_bytes, "allocating the combine's partial rows");
}

VirtualRankLayer::~VirtualRankLayer() = default;
int VirtualRankLayer::hidden() const { return static_cast<int>(s_->p.H); }
Element VirtualRankLayer::element() const { return s_->type; }

void VirtualRankLayer::dispatch(const void* x, const void* w, void* recv, void* recv_w, cudaStream_t stream) const {
  if (!x || !w || !recv || !recv_w) throw InputError("moonep::cuda::VirtualRankLayer::dispatch: a buffer is null");
  LayerParams p = s_->p;
  const auto aligned = [](const void* v) { return (reinterpret_cast<std::uintptr_t>(v) & 15u) == 0; };
  p.vec16 = p.row_bytes % 16 == 0 && aligned(x) && aligned(recv);
  const i64 entries = static_cast<i64>(p.R) * p.S * p.K;
  const i64 tail = static_cast<i64>(p.R) * (p.groups + p.NvS);
  const char* xb = static_cast<const char*>(x);
  char* rb = static_cast<char*>(recv);
  if (s_->type == Element::f64) {
    dispatch_rows<double><<<blocks_for(entries), kThreads, 0, stream>>>(p, xb, static_cast<const double*>(w), rb,
                                                                        static_cast<double*>(recv_w));
    dispatch_tail<double><<<blocks_for(tail), kThreads, 0, stream>>>(p, rb, static_cast<double*>(recv_w));
  } else {
    dispatch_rows<float><<<blocks_for(entries), kThreads, 0, stream>>>(p, xb, static_cast<const float*>(w), rb,
                                                                       static_cast<float*>(recv_w));
    dispatch_tail<float><<<blocks_for(tail), kThreads, 0, stream>>>(p, rb, static_cast<float*>(recv_w));
  }
  impl::check_cuda(cudaGetLastError(), "launching the dispatch kernels");
}

namespace {
template <class T>
void launch_combine(const LayerParams& p, void* partial, const void* y, const void* recv_w, void* out,
                    cudaStream_t stream) {
  using A = typename Arith<T>::A;
  const T* yt = static_cast<const T*>(y);
  const A* w = static_cast<const A*>(recv_w);
  A* part = static_cast<A*>(partial);
  combine_prologue<T><<<blocks_for(static_cast<i64>(p.R) * p.NvS), kThreads, 0, stream>>>(p, yt, w, part);
  combine_sum<T><<<blocks_for(static_cast<i64>(p.R) * p.S), kThreads, 0, stream>>>(p, yt, w, part,
                                                                                     static_cast<T*>(out));
}
}  // namespace

void VirtualRankLayer::combine(const void* y, const void* recv_w, void* out, cudaStream_t stream) const {
  if (!y || !out) throw InputError("moonep::cuda::VirtualRankLayer::combine: a buffer is null");
  LayerParams p = s_->p;
  const auto aligned = [](const void* v) { return (reinterpret_cast<std::uintptr_t>(v) & 15u) == 0; };
  p.vec16 = p.row_bytes % 16 == 0 && aligned(y) && aligned(out);
  switch (s_->type) {
    case Element::f32: launch_combine<float>(p, s_->partial.ptr, y, recv_w, out, stream); break;
    case Element::f64: launch_combine<double>(p, s_->partial.ptr, y, recv_w, out, stream); break;
    case Element::bf16: launch_combine<__nv_bfloat16>(p, s_->partial.ptr, y, recv_w, out, stream); break;
  }
  impl::check_cuda(cudaGetLastError(), "launching the combine kernels");
}

}  // namespace moonep::cuda
