// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU world as a HostPlanner (moonep::cuda::make_host_planner,
// moonep/gpu_world.hpp), for whole problems in host memory (moonep-plan's
// --world gpu, in one process or one per rank): each rank of this process
// has its routing, tokens_per_expert and count staged into its own
// device's memory (device_buffer.hpp); a step is one launch per such rank
// and the world's check (collective with one process per rank: every
// process steps together).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../device_buffer.hpp"
#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/reference.hpp"

namespace moonep::cuda {
namespace {

std::vector<int> local_devices(const GpuWorld& world) {
  std::vector<int> devices(static_cast<std::size_t>(world.ranks()));
  for (int r = 0; r < world.ranks(); ++r) devices[r] = world.device(r);  // -1 for another process's rank
  return devices;
}

class GpuWorldHostPlanner final : public HostPlanner {
 public:
  explicit GpuWorldHostPlanner(std::unique_ptr<GpuWorld> world)
      : config_(world->config()), world_(std::move(world)), staging_(config_, local_devices(*world_)) {}

  Backend backend() const override { return Backend::cuda; }
  using HostPlanner::load;
  void load(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) override {
    validate_problem(config_, routing, tpe, tokens);  // throws before anything changes
    staging_.stage(routing, tpe, tokens);
  }
  void step() override {
    // The origin stream: the legacy default stream of this process's first
    // rank's device (GpuWorld::plan makes that device current to fork).
    world_->plan(staging_.routing(), staging_.tpe(), nullptr, staging_.counts());
    world_->check();
  }
  // Every rank's plan (with one process per rank too: each process maps
  // every chunk); collective then.
  HostPlan result() const override { return world_->copy_out(); }
  std::string details() const override {
    std::string on;
    for (int r = 0; r < world_->ranks(); ++r) {
      if (world_->device(r) >= 0) on += (on.empty() ? "" : ",") + std::to_string(world_->device(r));
    }
    const int me = world_->process_rank();
    const std::string where = me >= 0 ? "gpu world of one process per rank, rank " + std::to_string(me) +
                                            " on device " + on
                                      : "gpu world on devices " + on;
    return where + ", one " + kernel_name(world_->kernel()) + " launch of " +
           std::to_string(world_->blocks_per_rank()) + " blocks per rank" +
           (world_->multicast() ? ", counts and counters through NVLink multicast" : "") +
           ", timed with the host's wait";
  }

 private:
  Config config_;
  std::unique_ptr<GpuWorld> world_;
  impl::RankStaging staging_;
};

}  // namespace

std::unique_ptr<HostPlanner> make_host_planner(std::unique_ptr<GpuWorld> world) {
  if (!world) throw InputError("moonep::cuda::make_host_planner: the world is null");
  return std::make_unique<GpuWorldHostPlanner>(std::move(world));
}

}  // namespace moonep::cuda
