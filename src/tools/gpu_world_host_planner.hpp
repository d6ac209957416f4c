// Private to moonep-plan: a HostPlanner over a moonep::cuda::GpuWorld, for
// --world gpu in one process (gpu_world.cpp) and under an MPI launch
// (mpi_gpu_world.cpp). Each rank of this process has its routing (and
// tokens_per_expert) staged into its own device's memory from the whole
// problem, which every process holds; a step is one launch per such rank
// and the world's check (collective under MPI: every process steps
// together). A ragged step (docs/spec/planning.md "Ragged steps") stages
// each such rank's s_r*K ids into its S*K buffer and its count s_r into a
// word on its device, which its kernel reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moonep/backend.hpp"
#include "moonep/gpu_world.hpp"

namespace moonep::tools {

class GpuWorldHostPlanner final : public HostPlanner {
 public:
  // Allocates the staging buffers of this process's ranks.
  explicit GpuWorldHostPlanner(std::unique_ptr<cuda::GpuWorld> world);
  ~GpuWorldHostPlanner() override;
  GpuWorldHostPlanner(const GpuWorldHostPlanner&) = delete;
  GpuWorldHostPlanner& operator=(const GpuWorldHostPlanner&) = delete;

  Backend backend() const override { return Backend::cuda; }
  using HostPlanner::load;
  void load(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) override;
  void step() override;
  // Every rank's plan (under MPI too: each process maps every chunk);
  // collective under MPI.
  HostPlan result() const override { return world_->copy_out(); }
  std::string details() const override;

  const cuda::GpuWorld& world() const { return *world_; }

 private:
  Config config_;
  std::unique_ptr<cuda::GpuWorld> world_;
  std::vector<int> local_;                     // this process's ranks
  std::vector<std::int32_t*> routing_, tpe_;  // by rank; null for another process's
  std::vector<std::int32_t*> tokens_;         // by rank: its count s_r; null for another process's
  bool has_tpe_ = false, has_tokens_ = false;
};

}  // namespace moonep::tools
