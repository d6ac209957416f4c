// A HostPlanner over a GPU world (gpu_world_host_planner.hpp).
#include "gpu_world_host_planner.hpp"

#include <cuda_runtime_api.h>

#include <utility>

#include "cuda_specializations/host_checks.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"

namespace moonep::tools {
namespace {

using cuda::impl::check_cuda;
using cuda::impl::DeviceScope;

// Copies n values to `to` in device memory (nothing for an empty rank of a
// ragged step); cudaMemcpy, so the copy is done when the step launches.
void stage(std::int32_t* to, const std::int32_t* from, std::size_t n, const char* what) {
  if (n > 0) check_cuda(cudaMemcpy(to, from, n * 4, cudaMemcpyHostToDevice), what);
}

}  // namespace

GpuWorldHostPlanner::GpuWorldHostPlanner(std::unique_ptr<cuda::GpuWorld> world)
    : config_(world->config()),
      world_(std::move(world)),
      routing_(static_cast<std::size_t>(config_.ranks), nullptr),
      tpe_(static_cast<std::size_t>(config_.ranks), nullptr),
      tokens_(static_cast<std::size_t>(config_.ranks), nullptr) {
  for (int r = 0; r < config_.ranks; ++r) {
    if (world_->device(r) < 0) continue;  // another process's rank
    local_.push_back(r);
    DeviceScope on(world_->device(r));
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&routing_[r]), static_cast<std::size_t>(config_.entries()) * 4 + 4),
               "allocating a rank's routing");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&tpe_[r]), static_cast<std::size_t>(config_.experts) * 4),
               "allocating a rank's tokens_per_expert");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&tokens_[r]), 4), "allocating a rank's token count");
  }
}

GpuWorldHostPlanner::~GpuWorldHostPlanner() {
  for (auto* p : routing_) cudaFree(p);
  for (auto* p : tpe_) cudaFree(p);
  for (auto* p : tokens_) cudaFree(p);
}

void GpuWorldHostPlanner::load(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) {
  validate_problem(config_, routing, tpe, tokens);  // throws before anything changes
  for (int r : local_) {
    stage(routing_[r], routing[r].data(), routing[r].size(), "staging the routing");
    if (tpe) stage(tpe_[r], (*tpe)[r].data(), (*tpe)[r].size(), "staging tokens_per_expert");
    if (tokens) stage(tokens_[r], &(*tokens)[r], 1, "staging a rank's token count");
  }
  has_tpe_ = tpe != nullptr;
  has_tokens_ = tokens != nullptr;
}

void GpuWorldHostPlanner::step() {
  // The origin stream: the legacy default stream of this process's first
  // rank's device (GpuWorld::plan makes that device current to fork).
  world_->plan(routing_.data(), has_tpe_ ? tpe_.data() : nullptr, nullptr, has_tokens_ ? tokens_.data() : nullptr);
  world_->check();
}

std::string GpuWorldHostPlanner::details() const {
  std::string on;
  for (int r : local_) on += (on.empty() ? "" : ",") + std::to_string(world_->device(r));
  const int me = world_->process_rank();
  const std::string where = me >= 0 ? "gpu world of one process per rank, rank " + std::to_string(me) + " on device " + on
                                    : "gpu world on devices " + on;
  return where + ", one " + cuda::kernel_name(world_->kernel()) + " launch of " +
         std::to_string(world_->blocks_per_rank()) + " blocks per rank" +
         (world_->multicast() ? ", counts and counters through NVLink multicast" : "") + ", timed with the host's wait";
}

}  // namespace moonep::tools
