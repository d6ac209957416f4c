// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldLayer (moonep/gpu_world_layer.hpp): the slot
// buffers in symmetric memory (one chunk per rank, impl::SymmetricMapping),
// argument checks, and each operation as two phases of one launch per rank.
// A world held by one process: on the world's rank streams, forked from
// `origin`, a barrier of events between the phases (every rank's first
// phase done before any rank's second starts), joined back into `origin`
// (impl::WorldFork, world_fork.hpp).
// One process per rank (make_mpi_gpu_world): each process's chunk its own
// allocation, the others' imported (the world's WorldPeers); its rank's
// phases on `origin`, each followed by a device-side barrier across the
// processes (process_barrier.hpp): one between the phases, one at the end.
// Kernels: world_kernels.cuh.
//
//   dispatch          sources: world_scatter (x -> primaries' recv slots,
//                     w -> every entry's recv_w) | destinations:
//                     world_epilogue (dup rows, padding)
//   combine           destinations: world_prologue (partial rows) |
//                     sources: world_gather
//   combine_backward  sources: world_scatter (grad_out -> grad_y's primary
//                     slots: bits, or round_T(recv_w * g) for a primary
//                     without duplicates) and world_dots (grad_w) |
//                     destinations: world_epilogue (padding; unweighted:
//                     dup rows), world_scale_dups (weighted: dup groups)
//   dispatch_backward destinations: world_prologue unweighted over
//                     grad_recv | sources: world_gather (+ grad_recv_w)
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../gpu_world/driver_api.hpp"
#include "../gpu_world/layer_access.hpp"
#include "../gpu_world/peers.hpp"
#include "../gpu_world/symmetric_mapping.hpp"
#include "../host_checks.hpp"
#include "element_sizes.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world_layer.hpp"
#include "process_barrier.hpp"
#include "rank_parts.hpp"
#include "world_fork.hpp"
#include "world_kernels.cuh"

namespace moonep::cuda {

using layer::i64;
using layer::kThreads;
using layer::WorldParams;
using impl::check_cuda;
using impl::DeviceScope;

namespace {

constexpr const char* kWho = "moonep::cuda::GpuWorldLayer";

template <class T>
struct Tag {
  using type = T;
};
template <class F>
void with_type(Element e, F&& f) {
  switch (e) {
    case Element::f32: f(Tag<float>{}); break;
    case Element::f64: f(Tag<double>{}); break;
    case Element::bf16: f(Tag<__nv_bfloat16>{}); break;
  }
}

bool all_aligned(const void* const* v, const std::vector<int>& local) {
  if (!v) return true;
  for (int r : local)
    if (v[r] && !aligned16(v[r])) return false;
  return true;
}

}  // namespace

struct GpuWorldLayer::State {
  GpuWorld* world = nullptr;
  Config config;
  Element type = Element::f32;
  bool training = false;
  int H = 0, Hout = 0;
  // One process per rank: the world's processes and this process's rank;
  // null and -1 when this process holds every rank.
  impl::WorldPeers* peers = nullptr;
  int me = -1;
  std::unique_ptr<impl::ProcessBarrier> barriers;  // one process per rank only
  std::vector<int> local;             // the ranks this process enqueues
  std::vector<int> devices;           // per rank; -1 for another process's rank
  std::vector<DeviceRankPlan> plans;
  // Offsets in each chunk (bytes); -1: not made (training buffers). The
  // control words (process_barrier.hpp) at 0.
  i64 off_control = 0, off_recv = 0, off_recv_w = 0, off_y = 0, off_partial = 0, off_gy = -1, off_grecv = -1, off_grecv_w = -1;
  impl::Vmm vmm;  // before `chunks`, which uses it
  std::unique_ptr<impl::SymmetricMapping> chunks;
  // A world held by one process: the ranks' parts on the world's streams;
  // destroyed first (it waits for every rank's stream), then the chunks.
  std::unique_ptr<impl::WorldFork> fork;
  std::unique_ptr<impl::RankParts> parts;  // over `fork` or `barriers`

  char* at(int d, i64 off) const { return reinterpret_cast<char*>(chunks->chunk(d)) + off; }
  char* base(i64 off) const { return at(0, off); }

  ~State() {
    fork.reset();
    if (barriers && chunks) barriers->idle_device();  // its launches ran on the callers' streams
  }


  WorldParams params(int r, int width, bool vec16) const {
    WorldParams p{};
    p.R = config.ranks;
    p.K = config.topk;
    p.S = config.tokens;
    p.NvS = static_cast<int>(config.slots());
    p.groups = config.groups();
    p.H = width;
    p.row_bytes = static_cast<i64>(width) * element_bytes(type);
    p.vec16 = vec16 && p.row_bytes % 16 == 0;
    p.plan = plans[r];
    p.rank = r;
    p.rank_bytes = static_cast<i64>(chunks->chunk_bytes());
    p.stop = barriers ? barriers->stop() : nullptr;
    return p;
  }

  // first(r, stream) on every rank, then, once every rank's first part is
  // done, second(r, stream) on every rank (rank_parts.hpp); one process per
  // rank: a barrier across the processes after each.
  template <class First, class Second>
  void two_phases(cudaStream_t origin, const char* what, unsigned op, bool weighted, First&& first,
                  Second&& second) const {
    parts->run(origin, what, impl::Meeting{op, weighted, false, true}, first, second);
  }

  void need_training(const char* op) const {
    if (!training)
      throw InputError(std::string(kWho) + "::" + op + ": the layer was not made for training (training = false)");
  }
};

namespace {

// InputError unless the array and each of this process's ranks' pointers
// are set.
void require(const void* const* v, const std::vector<int>& local, const char* op, const char* name) {
  if (!v) throw InputError(std::string(kWho) + "::" + op + ": " + name + " is null");
  for (int r : local) {
    if (!v[r]) throw InputError(std::string(kWho) + "::" + op + ": " + name + "[" + std::to_string(r) + "] is null");
  }
}

}  // namespace

GpuWorldLayer::GpuWorldLayer(GpuWorld& world, int hidden, int hidden_out, Element type, bool training)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.peers = impl::LayerAccess::peers(world);
  if (s.peers) impl::agree_on_layer_arguments(*s.peers, kWho, hidden, hidden_out, static_cast<int>(type), training);
  if (hidden < 1 || hidden_out < 1) {
    throw InputError(std::string(kWho) + ": H and H' must be at least 1, got H = " + std::to_string(hidden) +
                     ", H' = " + std::to_string(hidden_out));
  }
  s.world = &world;
  s.config = world.config();
  s.type = type;
  s.training = training;
  s.H = hidden;
  s.Hout = hidden_out;
  const int R = s.config.ranks;
  const i64 NvS = s.config.slots(), tb = element_bytes(type), ab = accum_bytes(type);
  s.me = world.process_rank();
  for (int r = 0; r < R; ++r) {
    s.devices.push_back(world.device(r));  // -1 for another process's rank
    s.plans.push_back(world.rank_plan(r));
    if (!s.peers || r == s.me) s.local.push_back(r);
  }
  // One chunk per rank: control | recv | recv_w | y | partial | (grad_y | grad_recv | grad_recv_w).
  i64 off = 0;
  const auto take = [&](i64 bytes) {
    const i64 at = off;
    off += aligned256(bytes);
    return at;
  };
  s.off_control = take(layer::kControlBytes);
  s.off_recv = take(NvS * hidden * tb);
  s.off_recv_w = take(NvS * ab);
  s.off_y = take(NvS * hidden_out * tb);
  s.off_partial = take(NvS * (training ? std::max(hidden, hidden_out) : hidden_out) * ab);
  if (training) {
    s.off_gy = take(NvS * hidden_out * tb);
    s.off_grecv = take(NvS * hidden * tb);
    s.off_grecv_w = take(NvS * ab);
  }
  // With one process per rank, collective (world_fork.hpp).
  s.chunks = impl::zeroed_chunks(s.vmm, world, off, s.peers);
  if (s.peers) {
    s.barriers = std::make_unique<impl::ProcessBarrier>(
        *s.peers, s.me, s.devices[s.me], reinterpret_cast<unsigned*>(s.base(s.off_control)),
        static_cast<i64>(s.chunks->chunk_bytes()), impl::LayerAccess::timeout_s(world), kWho);
    s.parts = std::make_unique<impl::RankParts>(*s.peers, s.me, s.devices[s.me], s.barriers.get());
  } else {
    s.fork = std::make_unique<impl::WorldFork>(world, false);
    s.parts = std::make_unique<impl::RankParts>(*s.fork);
  }
}

GpuWorldLayer::~GpuWorldLayer() = default;
int GpuWorldLayer::hidden() const { return s_->H; }
int GpuWorldLayer::hidden_out() const { return s_->Hout; }
Element GpuWorldLayer::element() const { return s_->type; }
bool GpuWorldLayer::training() const { return s_->training; }

namespace {
void check_rank(int d, int R, const char* what) {
  if (d < 0 || d >= R) {
    throw InputError(std::string(kWho) + "::" + what + ": rank " + std::to_string(d) + " is not in [0, " +
                     std::to_string(R) + ")");
  }
}
}  // namespace

void* GpuWorldLayer::recv(int d) const {
  check_rank(d, s_->config.ranks, "recv");
  return s_->at(d, s_->off_recv);
}
void* GpuWorldLayer::recv_w(int d) const {
  check_rank(d, s_->config.ranks, "recv_w");
  return s_->at(d, s_->off_recv_w);
}
void* GpuWorldLayer::y(int d) const {
  check_rank(d, s_->config.ranks, "y");
  return s_->at(d, s_->off_y);
}
void* GpuWorldLayer::grad_y(int d) const {
  s_->need_training("grad_y");
  check_rank(d, s_->config.ranks, "grad_y");
  return s_->at(d, s_->off_gy);
}
void* GpuWorldLayer::grad_recv(int d) const {
  s_->need_training("grad_recv");
  check_rank(d, s_->config.ranks, "grad_recv");
  return s_->at(d, s_->off_grecv);
}
void* GpuWorldLayer::grad_recv_w(int d) const {
  s_->need_training("grad_recv_w");
  check_rank(d, s_->config.ranks, "grad_recv_w");
  return s_->at(d, s_->off_grecv_w);
}

void GpuWorldLayer::check() {
  if (s_->barriers) s_->barriers->check("the layer");  // a world held by one process: nothing waits for another rank
}

void GpuWorldLayer::dispatch(const void* const* x, const void* const* w, cudaStream_t origin) const {
  const State& s = *s_;
  require(x, s.local, "dispatch", "x");
  require(w, s.local, "dispatch", "w");
  const bool vec = all_aligned(x, s.local);
  with_type(s.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = typename layer::Arith<T>::A;
    T* recv0 = reinterpret_cast<T*>(s.base(s.off_recv));
    A* recv_w0 = reinterpret_cast<A*>(s.base(s.off_recv_w));
    s.two_phases(
        origin, "enqueueing the GPU world's dispatch", layer::kDispatch, false,
        [&](int r, cudaStream_t st) {
          layer::world_scatter<T, false><<<layer::blocks_for(s.config.tokens), kThreads, 0, st>>>(
              s.params(r, s.H, vec), static_cast<const T*>(x[r]), static_cast<const A*>(w[r]), recv_w0, nullptr,
              recv0);
        },
        [&](int r, cudaStream_t st) {
          layer::world_epilogue<T><<<layer::blocks_for(s.config.groups() + s.config.slots()), kThreads, 0, st>>>(
              s.params(r, s.H, vec), recv0, recv_w0, true);
        });
  });
}

void GpuWorldLayer::combine(void* const* out, bool weighted, cudaStream_t origin) const {
  const State& s = *s_;
  require(out, s.local, "combine", "out");
  const bool vec = all_aligned(out, s.local);
  with_type(s.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = typename layer::Arith<T>::A;
    const T* y0 = reinterpret_cast<const T*>(s.base(s.off_y));
    const A* w0 = weighted ? reinterpret_cast<const A*>(s.base(s.off_recv_w)) : nullptr;
    A* partial0 = reinterpret_cast<A*>(s.base(s.off_partial));
    s.two_phases(
        origin, "enqueueing the GPU world's combine", layer::kCombine, weighted,
        [&](int r, cudaStream_t st) {
          layer::world_prologue<T><<<layer::blocks_for(s.config.slots()), kThreads, 0, st>>>(
              s.params(r, s.Hout, vec), y0, w0, partial0);
        },
        [&](int r, cudaStream_t st) {
          layer::world_gather<T><<<layer::blocks_for(s.config.tokens), kThreads, 0, st>>>(
              s.params(r, s.Hout, vec), y0, w0, partial0, static_cast<T*>(out[r]), nullptr, nullptr);
        });
  });
}

void GpuWorldLayer::combine_backward(const void* const* grad_out, bool weighted, void* const* grad_w,
                                     cudaStream_t origin) const {
  const State& s = *s_;
  s.need_training("combine_backward");
  require(grad_out, s.local, "combine_backward", "grad_out");
  if (weighted) require(const_cast<const void* const*>(grad_w), s.local, "combine_backward (weighted)", "grad_w");
  const bool vec = all_aligned(grad_out, s.local);
  with_type(s.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = typename layer::Arith<T>::A;
    T* gy0 = reinterpret_cast<T*>(s.base(s.off_gy));
    const T* y0 = reinterpret_cast<const T*>(s.base(s.off_y));
    const A* recv_w0 = reinterpret_cast<const A*>(s.base(s.off_recv_w));
    const int blocks = layer::blocks_for(s.config.tokens);
    s.two_phases(
        origin, "enqueueing the GPU world's combine backward", layer::kCombineBackward, weighted,
        [&](int r, cudaStream_t st) {
          const WorldParams p = s.params(r, s.Hout, vec);
          const T* g = static_cast<const T*>(grad_out[r]);
          if (weighted) {
            layer::world_scatter<T, true><<<blocks, kThreads, 0, st>>>(p, g, nullptr, nullptr, recv_w0, gy0);
            const i64 entries = static_cast<i64>(s.config.tokens) * s.config.topk;
            layer::world_dots<T><<<layer::blocks_for((entries + 31) / 32), kThreads, 0, st>>>(
                p, g, y0, static_cast<A*>(grad_w[r]));
          } else {
            layer::world_scatter<T, false><<<blocks, kThreads, 0, st>>>(p, g, nullptr, nullptr, nullptr, gy0);
          }
        },
        [&](int r, cudaStream_t st) {
          const WorldParams p = s.params(r, s.Hout, vec);
          layer::world_epilogue<T><<<layer::blocks_for(s.config.groups() + s.config.slots()), kThreads, 0, st>>>(
              p, gy0, nullptr, !weighted);
          if (weighted) {
            layer::world_scale_dups<T><<<layer::blocks_for(s.config.slots()), kThreads, 0, st>>>(p, gy0, recv_w0);
          }
        });
  });
}

void GpuWorldLayer::dispatch_backward(void* const* grad_x, void* const* grad_w, cudaStream_t origin) const {
  const State& s = *s_;
  s.need_training("dispatch_backward");
  require(const_cast<const void* const*>(grad_x), s.local, "dispatch_backward", "grad_x");
  if (grad_w) require(const_cast<const void* const*>(grad_w), s.local, "dispatch_backward", "grad_w");
  const bool vec = all_aligned(const_cast<const void* const*>(grad_x), s.local);
  with_type(s.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = typename layer::Arith<T>::A;
    const T* grecv0 = reinterpret_cast<const T*>(s.base(s.off_grecv));
    const A* grecv_w0 = reinterpret_cast<const A*>(s.base(s.off_grecv_w));
    A* partial0 = reinterpret_cast<A*>(s.base(s.off_partial));
    s.two_phases(
        origin, "enqueueing the GPU world's dispatch backward", layer::kDispatchBackward, false,
        [&](int r, cudaStream_t st) {
          layer::world_prologue<T><<<layer::blocks_for(s.config.slots()), kThreads, 0, st>>>(
              s.params(r, s.H, vec), grecv0, nullptr, partial0);
        },
        [&](int r, cudaStream_t st) {
          layer::world_gather<T><<<layer::blocks_for(s.config.tokens), kThreads, 0, st>>>(
              s.params(r, s.H, vec), grecv0, nullptr, partial0, static_cast<T*>(grad_x[r]),
              grad_w ? grecv_w0 : nullptr, grad_w ? static_cast<A*>(grad_w[r]) : nullptr);
        });
  });
}

}  // namespace moonep::cuda
