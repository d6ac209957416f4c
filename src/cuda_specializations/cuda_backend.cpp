// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The CUDA backend in the registry (src/core/backends.cpp): a HostPlanner
// over moonep::cuda::VirtualRankPlanner with R virtual ranks on the current
// GPU. Input is validated on the host before it is staged, so a bad routing
// never reaches the device through this path. A ragged step
// (docs/spec/planning.md "Ragged steps") is staged as the library's callers
// give it: each rank's s_r*K ids at the start of its S*K buffer, the R
// counts in a device array the kernel reads (device_buffer.hpp).
#include <string>
#include <vector>

#include "core/backend_factories.hpp"
#include "device_buffer.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"

namespace moonep::impl {
namespace {

using cuda::impl::check_cuda;

int current_device() {
  int d = 0;
  check_cuda(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

class CudaHostPlanner final : public HostPlanner {
 public:
  explicit CudaHostPlanner(const Config& c)
      : config_(c), planner_(c), staging_(c, std::vector<int>(static_cast<std::size_t>(c.ranks), current_device())) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaHostPlanner() override { cudaStreamDestroy(stream_); }
  Backend backend() const override { return Backend::cuda; }
  using HostPlanner::load;

  void load(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) override {
    validate_problem(config_, routing, tpe, tokens);  // throws before anything changes
    staging_.stage(routing, tpe, tokens);
  }
  void step() override {
    planner_.plan(staging_.routing(), staging_.tpe(), stream_, staging_.count_array());
    planner_.check(stream_);
  }
  // After a step given counts, the plan carries them (read back from the
  // device) and each dst its s_r*K entries (VirtualRankPlanner::copy_out).
  HostPlan result() const override { return planner_.copy_out(stream_); }
  // Each timed step includes the host's wait for it (check()), so it is
  // longer than the kernel alone (perf_tests' moonep_gpu_bench times that).
  std::string details() const override {
    return std::string(cuda::kernel_name(planner_.kernel())) + " kernel, " +
           std::to_string(planner_.blocks_per_rank()) + " blocks x " +
           std::to_string(cuda::VirtualRankPlanner::threads_per_block()) +
           " threads per rank, timed with the host's wait";
  }

 private:
  Config config_;
  mutable cuda::VirtualRankPlanner planner_;
  cuda::impl::RankStaging staging_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

bool cuda_backend_available(std::string* why_not) { return cuda::device_available(why_not); }

std::unique_ptr<HostPlanner> make_cuda_host_planner(const Config& config) {
  return std::make_unique<CudaHostPlanner>(config);
}

}  // namespace moonep::impl
