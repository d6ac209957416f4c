// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankPlanner: buffers, launch, error reporting and copy-out for
// the planning kernel with R virtual ranks on one GPU.
#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include "bench_access.hpp"
#include "device_buffer.hpp"
#include "launch_setup.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"

namespace moonep::cuda {
namespace {

using i64 = std::int64_t;
using impl::check_cuda;
using impl::kCleanStatus;

using impl::DeviceBuffer;

}  // namespace

bool device_available(std::string* why_not) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why_not) *why_not = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  if (n == 0) {
    if (why_not) *why_not = "no CUDA device is visible";
    return false;
  }
  return true;
}

struct VirtualRankPlanner::State {
  Config config;
  Options options;
  int device = 0;
  int bpr = 0;
  i64 smem = 0;
  Kernel kernel = Kernel::global_tables;
  const void* func = nullptr;
  impl::KernelParams params{};
  DeviceBuffer sym, loc, out, status;
  impl::DeviceStatus* host_status = nullptr;  // pinned
  std::vector<DeviceRankPlan> rank_plans;
  std::vector<const std::int32_t*> last_routing, last_tpe;
  std::vector<i64> last_routing_len;          // -1: room for S*K
  const std::int32_t* last_counts = nullptr;  // the last plan()'s d_tokens_per_rank

  ~State() {
    if (host_status) cudaFreeHost(host_status);
  }
};

VirtualRankPlanner::VirtualRankPlanner(const Config& config, const Options& options) : s_(std::make_unique<State>()) {
  validate(config);
  std::string why;
  if (!device_available(&why)) throw RuntimeError("moonep::cuda::VirtualRankPlanner: " + why);
  if (options.blocks_per_rank < 1) {
    throw InputError("blocks_per_rank = " + std::to_string(options.blocks_per_rank) + " must be >= 1");
  }
  const unsigned long long timeout_ns = impl::timeout_ns_of(options.timeout_s, "moonep::cuda::VirtualRankPlanner");
  State& s = *s_;
  s.config = config;
  s.options = options;
  check_cuda(cudaGetDevice(&s.device), "cudaGetDevice");
  const int R = config.ranks;
  // Virtual ranks: all R ranks' blocks in one launch, co-resident.
  const impl::LaunchChoice choice =
      impl::choose_launch(config, options, s.device, R, impl::Launches::one_for_all_ranks, "moonep::cuda::VirtualRankPlanner");
  s.kernel = choice.kernel;
  s.func = choice.func;
  s.bpr = choice.bpr;
  s.smem = choice.smem;
  impl::KernelParams& p = s.params;
  impl::fill_params(p, config, choice);
  s.sym.allocate(p.sym.words * R * 4, "allocating the symmetric buffer");
  s.loc.allocate(p.loc.words * R * 4, "allocating rank scratch");
  s.out.allocate(p.out.words * R * 4, "allocating plan outputs");
  s.status.allocate(sizeof(impl::DeviceStatus), "allocating the status word");
  check_cuda(cudaMemcpy(s.status.ptr, &kCleanStatus, sizeof kCleanStatus, cudaMemcpyHostToDevice),
             "initialising the status word");
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&s.host_status), sizeof(impl::DeviceStatus)),
             "cudaMallocHost");

  p.rank_base = 0;
  p.groups = R;
  p.sys_scope = 0;  // virtual ranks: one GPU
  p.timeout_ns = timeout_ns;
  p.sym_base = s.sym.words();
  p.sym_stride = p.sym.words;
  p.loc_base = s.loc.words();
  p.loc_stride = p.loc.words;
  p.out_base = s.out.words();
  p.out_stride = p.out.words;
  p.status = static_cast<impl::DeviceStatus*>(s.status.ptr);

  s.rank_plans.resize(R);
  for (int r = 0; r < R; ++r) {
    std::int32_t* o = s.out.words() + static_cast<i64>(r) * p.out.words;
    s.rank_plans[r] = impl::device_rank_plan(o, p.out);
  }
  s.last_routing.assign(R, nullptr);
  s.last_tpe.assign(R, nullptr);
  s.last_routing_len.assign(R, -1);
}

VirtualRankPlanner::~VirtualRankPlanner() = default;

const Config& VirtualRankPlanner::config() const { return s_->config; }
int VirtualRankPlanner::blocks_per_rank() const { return s_->bpr; }
Kernel VirtualRankPlanner::kernel() const { return s_->kernel; }

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::shared_tables: return "shared_tables";
    case Kernel::global_tables: return "global_tables";
    case Kernel::automatic: break;
  }
  return "automatic";
}
int VirtualRankPlanner::threads_per_block() { return impl::kThreads; }
const DeviceRankPlan& VirtualRankPlanner::rank_plan(int rank) const { return s_->rank_plans.at(rank); }

using impl::launch_cooperative;

namespace {
// Every rank's routing pointers (and given counts) into the launch
// parameters, each checked first: a null one throws before any is taken.
void take_routing(impl::KernelParams& p, int R, const std::int32_t* const* d_routing,
                  const std::int32_t* const* d_tpe, const char* who) {
  if (!d_routing) throw InputError(std::string(who) + ": d_routing is null");
  for (int r = 0; r < R; ++r) {
    if (!d_routing[r]) throw InputError(std::string(who) + ": d_routing[" + std::to_string(r) + "] is null");
  }
  for (int r = 0; r < R; ++r) {
    p.routing[r] = d_routing[r];
    p.tpe[r] = d_tpe ? d_tpe[r] : nullptr;
  }
}
}  // namespace

void VirtualRankPlanner::plan(const std::int32_t* const* d_routing, const std::int32_t* const* d_tpe, cudaStream_t stream,
                   const std::int32_t* d_tokens_per_rank, const std::int64_t* routing_len) {
  State& s = *s_;
  take_routing(s.params, s.config.ranks, d_routing, d_tpe, "moonep::cuda::VirtualRankPlanner::plan");
  for (int r = 0; r < s.config.ranks; ++r) {
    s.last_routing[r] = s.params.routing[r];
    s.last_tpe[r] = s.params.tpe[r];
    s.last_routing_len[r] = routing_len ? routing_len[r] : -1;
    s.params.counts[r] = d_tokens_per_rank ? d_tokens_per_rank + r : nullptr;
    s.params.routing_tokens[r] = impl::routing_tokens_of(s.config, s.last_routing_len[r]);
  }
  s.last_counts = d_tokens_per_rank;
  void* args[] = {&s.params};
  launch_cooperative(s.func, s.config.ranks * s.bpr, s.smem, args, stream, "launching the planning kernel");
}

// The benchmark's view (bench_access.hpp).
impl::LaunchView impl::PlannerAccess::launch(VirtualRankPlanner& planner) {
  VirtualRankPlanner::State& s = *planner.s_;
  return LaunchView{&s.params, s.func, s.config.ranks * s.bpr, s.smem};
}
void impl::PlannerAccess::set_trace(VirtualRankPlanner& planner, unsigned long long* trace) { planner.s_->params.trace = trace; }

void VirtualRankPlanner::check(cudaStream_t stream) {
  State& s = *s_;
  check_cuda(cudaMemcpyAsync(s.host_status, s.status.ptr, sizeof(impl::DeviceStatus),
                             cudaMemcpyDeviceToHost, stream),
             "reading the planning status");
  check_cuda(cudaStreamSynchronize(stream), "waiting for the planning kernel");
  const impl::DeviceStatus st = *s.host_status;
  if (impl::status_clean(st)) return;
  // Reset first so the planner stays usable whatever we throw: the status,
  // and after a late arrival the counters and epochs too (the step was
  // abandoned part-way; zeroed, they are as the constructor left them).
  check_cuda(cudaMemcpyAsync(s.status.ptr, &kCleanStatus, sizeof kCleanStatus, cudaMemcpyHostToDevice, stream),
             "resetting the planning status");
  if (st.late) {
    const impl::KernelParams& p = s.params;
    check_cuda(cudaMemsetAsync(s.sym.ptr, 0, static_cast<size_t>(p.sym.words) * s.config.ranks * 4, stream),
               "resetting the symmetric buffer");
    check_cuda(cudaMemsetAsync(s.loc.ptr, 0, static_cast<size_t>(p.loc.words) * s.config.ranks * 4, stream),
               "resetting rank scratch");
  }
  check_cuda(cudaStreamSynchronize(stream), "resetting the planning status");
  impl::throw_status(
      st, s.config,
      [&](int rank) {
        return impl::rank_input_error(s.config, rank,
                                      {s.last_routing.at(rank), s.last_routing_len.at(rank), s.last_tpe.at(rank),
                                       s.last_counts ? s.last_counts + rank : nullptr});
      },
      "moonep::cuda::VirtualRankPlanner: a block waited more than " + std::to_string(s.options.timeout_s) + " s at " +
          impl::late_counters(st.late) + " (the ranks' blocks were not all running at once); the step was abandoned");
}

HostPlan VirtualRankPlanner::copy_out(cudaStream_t stream) {
  check(stream);
  const State& s = *s_;
  std::optional<TokensPerRank> counts;
  if (s.last_counts) {
    counts.emplace(static_cast<std::size_t>(s.config.ranks));
    check_cuda(cudaMemcpy(counts->data(), s.last_counts, counts->size() * 4, cudaMemcpyDeviceToHost),
               "reading tokens_per_rank back");
  }
  return impl::copy_plans_out(s.config, s.rank_plans, nullptr, counts);
}

}  // namespace moonep::cuda
