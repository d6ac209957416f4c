// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldMoeLayer (moonep/gpu_world_moe_layer.hpp): a
// GpuWorldLayer (H, H'), GpuWorldExpertCopies (Q = H*H'), a cuBLAS handle
// per rank (moe_gemm.hpp: the GEMM and the group list the virtual ranks'
// layer uses too), the group sizes read to the host, and the GEMMs of each
// rank enqueued on the world's rank stream of that rank, forked from and
// joined into `origin` (impl::WorldFork). One process per rank
// (make_mpi_gpu_world): the layer and the copies are made collectively,
// each process reads its rank's group sizes and learns every other's (so
// all refuse a plan alike), and enqueues its rank's GEMMs on `origin`;
// the parts meet at the layer's and the copies' device-side barriers.
//
//   forward   read_groups | fetch (a branch: side stream, the copies' own
//             rank streams) beside dispatch | GEMMs (wait for both) | combine
//   backward  read_groups | combine's backward | per rank: zero its experts'
//             and copies' gradients, per group grad_recv = grad_y @ M^T and
//             grad_M = recv^T @ grad_y | dispatch's backward | reduce
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../gpu_world/layer_access.hpp"
#include "../host_checks.hpp"
#include "element_sizes.hpp"
#include "group_sizes.hpp"
#include "moe_gemm.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world_moe_layer.hpp"
#include "process_barrier.hpp"
#include "rank_parts.hpp"
#include "world_fork.hpp"

namespace moonep::cuda {

namespace {

using i64 = std::int64_t;
using impl::check_cuda;
using impl::DeviceScope;

constexpr const char* kWho = "moonep::cuda::GpuWorldMoeLayer";

// InputError unless the array and each of this process's ranks' pointers
// are set.
void require(const void* const* v, const std::vector<int>& local, const char* op, const char* name) {
  if (!v) throw InputError(std::string(kWho) + "::" + op + ": " + name + " is null");
  for (int r : local) {
    if (!v[r]) throw InputError(std::string(kWho) + "::" + op + ": " + name + "[" + std::to_string(r) + "] is null");
  }
}
const void* const* as_const(void* const* v) { return const_cast<const void* const*>(v); }

}  // namespace

struct GpuWorldMoeLayer::State {
  Config config;
  Element type = Element::f32;
  int H = 0, O = 0;  // H and H'
  bool training = false;
  std::vector<int> devices;  // per rank; -1 for another process's rank
  // One process per rank: the world's processes and this process's rank
  // (null and -1 when this process holds every rank); the ranks this
  // process enqueues and the device of the first (the fetch branch's).
  impl::WorldPeers* peers = nullptr;
  int me = -1;
  std::vector<int> local;
  int home = 0;
  std::unique_ptr<GpuWorldLayer> layer;
  std::unique_ptr<GpuWorldExpertCopies> copies;
  std::vector<std::unique_ptr<impl::BlasHandle>> blas;  // rank r's on its device (this process's ranks)
  std::unique_ptr<impl::PlanGroupSizes> group_sizes;    // read_groups' copy
  bool groups_read = false;
  std::vector<impl::MoeGroup> groups;  // rebuilt by read_groups, in increasing rank
  std::vector<std::size_t> first;      // [R+1]: rank r's groups are first[r] .. first[r+1]
  cudaStream_t side = nullptr;         // forward's fetch branch, on rank 0's device
  cudaEvent_t branched = nullptr, fetched = nullptr;
  // A world held by one process: the GEMMs on the world's rank streams;
  // destroyed first (it waits for them).
  std::unique_ptr<impl::WorldFork> fork;
  std::unique_ptr<impl::RankParts> parts;  // over `fork`, or this process's rank

  ~State() {
    fork.reset();
    if (side) {
      int saved = 0;
      cudaGetDevice(&saved);
      cudaSetDevice(home);
      cudaStreamSynchronize(side);
      cudaStreamDestroy(side);
      cudaSetDevice(saved);
    }
    if (branched) cudaEventDestroy(branched);
    if (fetched) cudaEventDestroy(fetched);
  }

  i64 elem() const { return element_bytes(type); }
  i64 Q() const { return static_cast<i64>(H) * O; }
  // Group g's parameters (and their gradient's place) on its rank.
  i64 own_at(const impl::MoeGroup& g) const { return (g.slot - g.d * config.experts_per_rank()) * Q() * elem(); }
  i64 copy_at(const impl::MoeGroup& g) const { return g.slot * Q() * elem(); }

  // part(r, stream) for each rank this process enqueues (rank_parts.hpp):
  // every rank's on the world's rank stream; or, one process per rank,
  // this process's rank's on `origin`.
  template <class Part>
  void each_rank(cudaStream_t origin, const char* what, Part&& part) const {
    parts->run(origin, what, impl::Meeting{}, part);
  }

  void gemm(int r, bool ta, bool tb, i64 m, i64 n, i64 k, const void* a, i64 lda, const void* b, i64 ldb, void* c,
            i64 ldc, cudaStream_t stream) const {
    impl::gemm(blas[static_cast<std::size_t>(r)]->h, type, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, stream);
  }
};

GpuWorldMoeLayer::GpuWorldMoeLayer(GpuWorld& world, int hidden, int hidden_out, Element type, bool training)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.peers = impl::LayerAccess::peers(world);
  if (s.peers) impl::agree_on_layer_arguments(*s.peers, kWho, hidden, hidden_out, static_cast<int>(type), training);
  if (hidden < 1) throw InputError(std::string(kWho) + ": H must be at least 1, got " + std::to_string(hidden));
  if (hidden_out < 1)
    throw InputError(std::string(kWho) + ": H' must be at least 1, got " + std::to_string(hidden_out));
  const Config& c = world.config();
  s.config = c;
  s.type = type;
  s.H = hidden;
  s.O = hidden_out;
  s.training = training;
  std::vector<const std::int32_t*> cu_seqlens;
  s.me = world.process_rank();
  for (int r = 0; r < c.ranks; ++r) {
    s.devices.push_back(world.device(r));
    cu_seqlens.push_back(world.rank_plan(r).cu_seqlens);
    if (!s.peers || r == s.me) s.local.push_back(r);
  }
  s.home = s.devices[static_cast<std::size_t>(s.local.front())];
  s.group_sizes = std::make_unique<impl::PlanGroupSizes>(c, cu_seqlens, "MoE layer");
  s.layer = std::make_unique<GpuWorldLayer>(world, hidden, hidden_out, type, training);
  s.copies = std::make_unique<GpuWorldExpertCopies>(world, s.Q(), type, training);
  s.blas.resize(static_cast<std::size_t>(c.ranks));
  for (int r : s.local) {
    DeviceScope on(s.devices[r]);
    s.blas[static_cast<std::size_t>(r)] = std::make_unique<impl::BlasHandle>();
  }
  const std::size_t G = static_cast<std::size_t>(c.groups());
  s.groups.reserve(c.ranks * G);
  s.first.assign(static_cast<std::size_t>(c.ranks) + 1, 0);
  {
    DeviceScope on(s.home);
    check_cuda(cudaStreamCreateWithFlags(&s.side, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&s.branched, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&s.fetched, cudaEventDisableTiming), "cudaEventCreate");
  }
  if (s.peers) {
    s.parts = std::make_unique<impl::RankParts>(*s.peers, s.me, s.home, nullptr);
  } else {
    s.fork = std::make_unique<impl::WorldFork>(world, false);
    s.parts = std::make_unique<impl::RankParts>(*s.fork);
  }
}

GpuWorldMoeLayer::~GpuWorldMoeLayer() = default;
int GpuWorldMoeLayer::hidden() const { return s_->H; }
int GpuWorldMoeLayer::hidden_out() const { return s_->O; }
std::int64_t GpuWorldMoeLayer::params() const { return s_->Q(); }
Element GpuWorldMoeLayer::element() const { return s_->type; }
bool GpuWorldMoeLayer::training() const { return s_->training; }
const GpuWorldLayer& GpuWorldMoeLayer::layer() const { return *s_->layer; }
const GpuWorldExpertCopies& GpuWorldMoeLayer::expert_copies() const { return *s_->copies; }
int GpuWorldMoeLayer::gemm_count() const { return static_cast<int>(s_->groups.size()); }

void* GpuWorldMoeLayer::experts(int d) const {
  if (d < 0 || d >= s_->config.ranks) {
    throw InputError(std::string(kWho) + "::experts: rank " + std::to_string(d) + " is not in [0, " +
                     std::to_string(s_->config.ranks) + ")");
  }
  return s_->copies->experts(d);
}

void GpuWorldMoeLayer::read_groups(cudaStream_t origin) {
  State& s = *s_;
  const Config& c = s.config;
  s.groups_read = false;
  s.parts->read_group_sizes(*s.group_sizes, origin);
  impl::list_groups(c, s.group_sizes->sizes(), s.groups);  // refuses an unrunnable plan
  std::fill(s.first.begin(), s.first.end(), 0);
  for (const impl::MoeGroup& g : s.groups) ++s.first[static_cast<std::size_t>(g.d) + 1];
  for (int r = 0; r < c.ranks; ++r) s.first[r + 1] += s.first[r];
  s.groups_read = true;
}

void GpuWorldMoeLayer::enqueue_fetch(cudaStream_t origin) const { s_->copies->fetch(origin); }

void GpuWorldMoeLayer::enqueue_dispatch(const void* const* x, const void* const* w, cudaStream_t origin) const {
  s_->layer->dispatch(x, w, origin);
}

void GpuWorldMoeLayer::enqueue_gemms(cudaStream_t origin) const {
  const State& s = *s_;
  if (!s.groups_read) throw InputError(std::string(kWho) + ": read_groups() has not run for this plan");
  const i64 e = s.elem();
  s.each_rank(origin, "enqueueing the GPU world's expert GEMMs", [&](int r, cudaStream_t st) {
    const char* P = static_cast<const char*>(s.copies->experts(r));
    const char* C = static_cast<const char*>(s.copies->copies(r));
    const char* recv = static_cast<const char*>(s.layer->recv(r));
    char* y = static_cast<char*>(s.layer->y(r));
    for (std::size_t i = s.first[r]; i < s.first[r + 1]; ++i) {
      const impl::MoeGroup& g = s.groups[i];
      const char* M = g.own ? P + s.own_at(g) : C + s.copy_at(g);
      s.gemm(r, false, false, g.rows, s.O, s.H, recv + g.from * s.H * e, s.H, M, s.O, y + g.from * s.O * e, s.O, st);
    }
  });
}

void GpuWorldMoeLayer::enqueue_combine(void* const* out, cudaStream_t origin) const {
  s_->layer->combine(out, true, origin);
}

void GpuWorldMoeLayer::forward(const void* const* x, const void* const* w, void* const* out, cudaStream_t origin) {
  State& s = *s_;
  require(x, s.local, "forward", "x");
  require(w, s.local, "forward", "w");
  require(as_const(out), s.local, "forward", "out");
  read_groups(origin);  // refuses an unrunnable plan before anything moves
  // The fetch on a branch of its own (it needs only the plan), beside the
  // dispatch; the GEMMs wait for both.
  {
    DeviceScope on(s.home);
    check_cuda(cudaEventRecord(s.branched, origin), "forking the fetch");
    check_cuda(cudaStreamWaitEvent(s.side, s.branched, 0), "forking the fetch");
  }
  enqueue_fetch(s.side);
  {
    DeviceScope on(s.home);
    check_cuda(cudaEventRecord(s.fetched, s.side), "joining the fetch");
  }
  enqueue_dispatch(x, w, origin);
  {
    DeviceScope on(s.home);
    check_cuda(cudaStreamWaitEvent(origin, s.fetched, 0), "joining the fetch");
  }
  enqueue_gemms(origin);
  enqueue_combine(out, origin);
}

void GpuWorldMoeLayer::backward(const void* const* grad_out, void* const* grad_x, void* const* grad_w,
                                void* const* grad_experts, cudaStream_t origin) {
  State& s = *s_;
  if (!s.training)
    throw InputError(std::string(kWho) + "::backward: the layer was made without training buffers");
  require(grad_out, s.local, "backward", "grad_out");
  require(as_const(grad_x), s.local, "backward", "grad_x");
  require(as_const(grad_w), s.local, "backward", "grad_w");
  require(as_const(grad_experts), s.local, "backward", "grad_experts");
  read_groups(origin);  // refuses an unrunnable plan before anything moves
  const i64 e = s.elem(), Q = s.Q(), epn = s.config.experts_per_rank(), B = s.config.copy_slots;
  // grad_y = w * grad_out per filled slot; grad_w = <grad_out, y>.
  s.layer->combine_backward(grad_out, true, grad_w, origin);
  // Per rank: experts whose groups are empty (and copy slots no group
  // uses) get 0; every non-empty group writes its expert's gradient whole
  // (beta 0), an expert having at most one group per rank.
  s.each_rank(origin, "enqueueing the GPU world's expert GEMMs' backward", [&](int r, cudaStream_t st) {
    char* gP = static_cast<char*>(grad_experts[r]);
    char* gC = B > 0 ? static_cast<char*>(s.copies->grad_copies(r)) : nullptr;
    check_cuda(cudaMemsetAsync(gP, 0, static_cast<std::size_t>(epn * Q * e), st), "zeroing the experts' gradients");
    if (gC)
      check_cuda(cudaMemsetAsync(gC, 0, static_cast<std::size_t>(B * Q * e), st), "zeroing the copies' gradients");
    const char* P = static_cast<const char*>(s.copies->experts(r));
    const char* C = static_cast<const char*>(s.copies->copies(r));
    const char* gy = static_cast<const char*>(s.layer->grad_y(r));
    const char* recv = static_cast<const char*>(s.layer->recv(r));
    char* grecv = static_cast<char*>(s.layer->grad_recv(r));
    for (std::size_t i = s.first[r]; i < s.first[r + 1]; ++i) {
      const impl::MoeGroup& g = s.groups[i];
      const char* M = g.own ? P + s.own_at(g) : C + s.copy_at(g);
      char* gM = g.own ? gP + s.own_at(g) : gC + s.copy_at(g);
      const char* gy_g = gy + g.from * s.O * e;
      // grad_recv [rows][H] = grad_y [rows][H'] @ M^T
      s.gemm(r, false, true, g.rows, s.H, s.O, gy_g, s.O, M, s.O, grecv + g.from * s.H * e, s.H, st);
      // grad_M [H][H'] = recv^T [H][rows] @ grad_y [rows][H']
      s.gemm(r, true, false, s.H, s.O, g.rows, recv + g.from * s.H * e, s.H, gy_g, s.O, gM, s.O, st);
    }
  });
  // grad_x = sum over k of grad_recv (recv_w's gradient is not the
  // layer's: the weights act in combine, whose backward gave grad_w).
  s.layer->dispatch_backward(grad_x, nullptr, origin);
  s.copies->reduce(grad_experts, origin);
}

void GpuWorldMoeLayer::check() {
  // Both objects' barriers checked and reset whatever the first reports
  // (every process runs both collectives), one error for both.
  std::string text;
  try {
    s_->layer->check();
  } catch (const RuntimeError& e) {
    text = e.what();
  }
  try {
    s_->copies->check();
  } catch (const RuntimeError& e) {
    text += (text.empty() ? "" : "; ") + std::string(e.what());
  }
  if (!text.empty()) throw RuntimeError(text);
}

}  // namespace moonep::cuda
