// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldExpertCopies (moonep/gpu_world_expert_copies.hpp):
// every rank's experts | copies | grad_copies in one chunk of a symmetric
// mapping (impl::zeroed_chunks), argument checks, the refusal of an
// unrunnable plan (B < epn: the group sizes read to the host), and fetch
// and reduce as one launch per rank on this object's rank streams, forked
// from and joined into `origin` (impl::WorldFork). One process per rank
// (make_mpi_gpu_world): each process's chunk its own allocation, the
// others' imported (the world's WorldPeers); its rank's launch on
// `origin` between two device-side barriers across the processes
// (process_barrier.hpp): every owner's experts (every copier's gradients)
// written before any rank reads them, and read by every rank before any
// process goes on to change them. Kernels: copy_kernels.cuh, with a
// rank's buffer at rank 0's + rank * chunk bytes.
//
//   fetch   rank d: its copy slots, each loaded from the owner's experts
//   reduce  rank h: its experts, each adding the copiers' grad_copies in
//           increasing d then b (its own experts_to_copy table)
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../gpu_world/driver_api.hpp"
#include "../gpu_world/layer_access.hpp"
#include "../gpu_world/symmetric_mapping.hpp"
#include "../host_checks.hpp"
#include "copy_kernels.cuh"
#include "element_sizes.hpp"
#include "group_sizes.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world_expert_copies.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/layer_reference.hpp"
#include "process_barrier.hpp"
#include "rank_parts.hpp"
#include "world_fork.hpp"

namespace moonep::cuda {

namespace {

using i64 = std::int64_t;
using copy_kernels::CopyParams;
using impl::check_cuda;
using impl::DeviceScope;

constexpr const char* kWho = "moonep::cuda::GpuWorldExpertCopies";

void check_rank(int d, int R, const char* what) {
  if (d < 0 || d >= R) {
    throw InputError(std::string(kWho) + "::" + what + ": rank " + std::to_string(d) + " is not in [0, " +
                     std::to_string(R) + ")");
  }
}

}  // namespace

struct GpuWorldExpertCopies::State {
  Config config;
  Element type = Element::f32;
  bool training = false;
  i64 Q = 0;
  std::vector<const std::int32_t*> tables;      // each rank's experts_to_copy [R][B], on its device
  std::vector<const std::int32_t*> cu_seqlens;  // each rank's, on its device
  // One process per rank: the world's processes, this process's rank and
  // the barriers between them; null, -1 and null when this process holds
  // every rank.
  impl::WorldPeers* peers = nullptr;
  int me = -1;
  std::unique_ptr<impl::ProcessBarrier> barriers;
  std::vector<int> devices;  // per rank; -1 for another process's rank
  // Offsets in each chunk (bytes); -1: not made (grad_copies without
  // training). The control words (process_barrier.hpp) at 0.
  i64 off_control = 0, off_experts = 0, off_copies = 0, off_grad_copies = -1;
  impl::Vmm vmm;  // before `chunks`, which uses it
  std::unique_ptr<impl::SymmetricMapping> chunks;
  // A world held by one process: this object's own stream per rank
  // (overlapping the layer's); destroyed first (it waits for them), then
  // the chunks.
  std::unique_ptr<impl::WorldFork> fork;
  std::unique_ptr<impl::RankParts> parts;  // over `fork` or `barriers`
  std::unique_ptr<impl::PlanGroupSizes> group_sizes;  // B < epn only: what the refusal reads

  ~State() {
    fork.reset();
    if (barriers && chunks) barriers->idle_device();  // its launches ran on the callers' streams
  }

  // part(r, stream) for each rank this process enqueues (rank_parts.hpp);
  // one process per rank: between two barriers of `op` across the
  // processes.
  template <class Part>
  void run(cudaStream_t origin, const char* what, unsigned op, Part&& part) const {
    parts->run(origin, what, impl::Meeting{op, false, true, true}, part);
  }

  char* at(int d, i64 off) const { return reinterpret_cast<char*>(chunks->chunk(d)) + off; }
  i64 bytes() const { return Q * element_bytes(type); }
  CopyParams params(int r) const {
    CopyParams p{};
    p.R = config.ranks;
    p.E = config.experts;
    p.B = config.copy_slots;
    p.epn = config.experts_per_rank();
    p.Q = Q;
    p.table = tables[static_cast<std::size_t>(r)];
    p.stride = 0;  // each rank's launch reads its own plan's table
    return p;
  }
};

GpuWorldExpertCopies::GpuWorldExpertCopies(GpuWorld& world, std::int64_t params, Element type, bool training)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.peers = impl::LayerAccess::peers(world);
  if (s.peers) {
    impl::agree_on_arguments(*s.peers, kWho,
                             {{"Q", static_cast<long long>(params)},
                              {"the element type", static_cast<long long>(type), impl::element_text},
                              {"training", training ? 1 : 0, impl::bool_text}},
                             "every process constructs the expert copies with the same Q, type and training");
  }
  if (params < 1) throw InputError(std::string(kWho) + ": Q must be at least 1, got " + std::to_string(params));
  const Config& c = world.config();
  s.me = world.process_rank();
  s.config = c;
  s.type = type;
  s.training = training;
  s.Q = params;
  for (int r = 0; r < c.ranks; ++r) {
    s.devices.push_back(world.device(r));
    s.tables.push_back(world.rank_plan(r).experts_to_copy);
    s.cu_seqlens.push_back(world.rank_plan(r).cu_seqlens);
  }
  // One chunk per rank: control | experts | copies | (grad_copies).
  const i64 row = s.bytes();
  i64 off = 0;
  const auto take = [&](i64 bytes) {
    const i64 at = off;
    off += aligned256(bytes);
    return at;
  };
  s.off_control = take(layer::kControlBytes);
  s.off_experts = take(c.experts_per_rank() * row);
  s.off_copies = take(c.copy_slots * row);
  if (training) s.off_grad_copies = take(c.copy_slots * row);
  // With one process per rank, collective (world_fork.hpp).
  s.chunks = impl::zeroed_chunks(s.vmm, world, off, s.peers);
  if (s.peers) {
    s.barriers = std::make_unique<impl::ProcessBarrier>(
        *s.peers, s.me, s.devices[s.me], reinterpret_cast<unsigned*>(s.at(0, s.off_control)),
        static_cast<i64>(s.chunks->chunk_bytes()), impl::LayerAccess::timeout_s(world), kWho);
    s.parts = std::make_unique<impl::RankParts>(*s.peers, s.me, s.devices[s.me], s.barriers.get());
  } else {
    s.fork = std::make_unique<impl::WorldFork>(world, true);
    s.parts = std::make_unique<impl::RankParts>(*s.fork);
  }
  if (c.copy_slots < c.experts_per_rank())
    s.group_sizes = std::make_unique<impl::PlanGroupSizes>(c, s.cu_seqlens, "expert copies");
}

GpuWorldExpertCopies::~GpuWorldExpertCopies() = default;
std::int64_t GpuWorldExpertCopies::params() const { return s_->Q; }
Element GpuWorldExpertCopies::element() const { return s_->type; }
bool GpuWorldExpertCopies::training() const { return s_->training; }

void* GpuWorldExpertCopies::experts(int d) const {
  check_rank(d, s_->config.ranks, "experts");
  return s_->at(d, s_->off_experts);
}
void* GpuWorldExpertCopies::copies(int d) const {
  check_rank(d, s_->config.ranks, "copies");
  return s_->at(d, s_->off_copies);
}
void* GpuWorldExpertCopies::grad_copies(int d) const {
  if (!s_->training)
    throw InputError(std::string(kWho) + "::grad_copies: the object was not made for training (training = false)");
  check_rank(d, s_->config.ranks, "grad_copies");
  return s_->at(d, s_->off_grad_copies);
}

void GpuWorldExpertCopies::check_runnable(cudaStream_t origin) const {
  const State& s = *s_;
  if (!s.group_sizes) return;  // B >= epn: no plan can hold a remote expert without a copy
  s.parts->read_group_sizes(*s.group_sizes, origin);
  impl::refuse_uncopied(s.config, s.group_sizes->sizes());
}

void GpuWorldExpertCopies::check() {
  if (s_->barriers) s_->barriers->check("the expert copies");  // a world held by one process: nothing waits
}

void GpuWorldExpertCopies::fetch(cudaStream_t origin) const {
  const State& s = *s_;
  check_runnable(origin);
  if (s.config.copy_slots == 0) return;
  const i64 bytes = s.bytes(), stride = static_cast<i64>(s.chunks->chunk_bytes());
  const bool vec = bytes % 16 == 0;  // every buffer starts 256-byte aligned
  const char* experts0 = s.at(0, s.off_experts);
  s.run(origin, "enqueueing the GPU world's expert fetch", layer::kFetch, [&](int r, cudaStream_t st) {
    copy_kernels::launch_fetch(s.params(r), vec, bytes, r, 1, experts0, stride, s.at(r, s.off_copies), 0, st);
  });
}

void GpuWorldExpertCopies::reduce(void* const* grad_experts, cudaStream_t origin) const {
  const State& s = *s_;
  const int R = s.config.ranks;
  if (!s.training)
    throw InputError(std::string(kWho) + "::reduce: the object was not made for training (training = false)");
  if (!grad_experts) throw InputError(std::string(kWho) + "::reduce: grad_experts is null");
  for (int r = 0; r < R; ++r)
    if ((!s.peers || r == s.me) && !grad_experts[r])
      throw InputError(std::string(kWho) + "::reduce: grad_experts[" + std::to_string(r) + "] is null");
  check_runnable(origin);
  if (s.config.copy_slots == 0) return;
  const i64 bytes = s.bytes(), stride = static_cast<i64>(s.chunks->chunk_bytes());
  bool vec = bytes % 16 == 0;
  for (int r = 0; r < R; ++r) vec = vec && (!grad_experts[r] || aligned16(grad_experts[r]));
  const char* gc0 = s.at(0, s.off_grad_copies);
  const int epn = s.config.experts_per_rank();
  s.run(origin, "enqueueing the GPU world's gradient reduce", layer::kReduce, [&](int r, cudaStream_t st) {
    const CopyParams p = s.params(r);
    switch (s.type) {
      case Element::f32:
        copy_kernels::launch_reduce<float>(p, vec, r * epn, epn, gc0, stride, grad_experts[r], st);
        break;
      case Element::f64:
        copy_kernels::launch_reduce<double>(p, vec, r * epn, epn, gc0, stride, grad_experts[r], st);
        break;
      case Element::bf16:
        copy_kernels::launch_reduce<__nv_bfloat16>(p, vec, r * epn, epn, gc0, stride, grad_experts[r], st);
        break;
    }
  });
}

}  // namespace moonep::cuda
