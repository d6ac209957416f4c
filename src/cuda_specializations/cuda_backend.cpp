// The CUDA backend in the registry (src/core/backends.cpp): a HostPlanner
// over moonep::cuda::Planner with R virtual ranks on the current GPU. Input
// is validated on the host before it is staged, so a bad routing never
// reaches the device through this path. A ragged step (docs/spec/planning.md
// "Ragged steps") is staged as the library's callers give it: each rank's
// s_r*K ids at the start of its S*K buffer, the R counts in a device buffer
// the kernel reads.
#include <string>
#include <vector>

#include "core/backend_factories.hpp"
#include "host_checks.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"

namespace moonep::impl {
namespace {

using cuda::impl::check_cuda;

class CudaHostPlanner final : public HostPlanner {
 public:
  explicit CudaHostPlanner(const Config& c) : config_(c), planner_(c) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    const std::size_t n = static_cast<std::size_t>(c.entries()) * c.ranks;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&topk_), n * 4), "allocating the routing buffer");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&tpe_), static_cast<std::size_t>(c.experts) * c.ranks * 4),
               "allocating the tokens_per_expert buffer");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&tokens_), static_cast<std::size_t>(c.ranks) * 4),
               "allocating the tokens_per_rank buffer");
    for (int r = 0; r < c.ranks; ++r) {
      topk_ptrs_.push_back(topk_ + static_cast<std::size_t>(r) * c.entries());
      tpe_ptrs_.push_back(tpe_ + static_cast<std::size_t>(r) * c.experts);
    }
  }
  ~CudaHostPlanner() override {
    cudaFree(topk_);
    cudaFree(tpe_);
    cudaFree(tokens_);
    cudaStreamDestroy(stream_);
  }
  Backend backend() const override { return Backend::cuda; }
  using HostPlanner::load;

  void load(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) override {
    validate_problem(config_, routing, tpe, tokens);  // throws before anything changes
    for (int r = 0; r < config_.ranks; ++r) {
      stage(topk_ptrs_[r], routing[r], "staging the routing");
      if (tpe) stage(tpe_ptrs_[r], (*tpe)[r], "staging tokens_per_expert");
    }
    if (tokens) stage(tokens_, *tokens, "staging tokens_per_rank");
    check_cuda(cudaStreamSynchronize(stream_), "staging the input");
    has_tpe_ = tpe != nullptr;
    has_tokens_ = tokens != nullptr;
  }
  void step() override {
    planner_.plan(topk_ptrs_.data(), has_tpe_ ? tpe_ptrs_.data() : nullptr, stream_, has_tokens_ ? tokens_ : nullptr);
    planner_.check(stream_);
  }
  // After a step given counts, the plan carries them (read back from the
  // device) and each dst its s_r*K entries (cuda::Planner::copy_out).
  HostPlan result() const override { return planner_.copy_out(stream_); }
  // Each timed step includes the host's wait for it (check()), so it is
  // longer than the kernel alone (perf_tests' moonep_gpu_bench times that).
  std::string details() const override {
    return std::string(cuda::kernel_name(planner_.kernel())) + " kernel, " +
           std::to_string(planner_.blocks_per_rank()) + " blocks x " +
           std::to_string(cuda::Planner::threads_per_block()) + " threads per rank, timed with the host's wait";
  }

 private:
  // Copies `from` to the device at `to` on the stream (nothing for an empty
  // rank of a ragged step).
  void stage(std::int32_t* to, const std::vector<std::int32_t>& from, const char* what) {
    if (from.empty()) return;
    check_cuda(cudaMemcpyAsync(to, from.data(), from.size() * 4, cudaMemcpyHostToDevice, stream_), what);
  }

  Config config_;
  mutable cuda::Planner planner_;
  cudaStream_t stream_ = nullptr;
  std::int32_t* topk_ = nullptr;
  std::int32_t* tpe_ = nullptr;
  std::int32_t* tokens_ = nullptr;  // R counts s_r, the last ragged step's
  std::vector<std::int32_t*> topk_ptrs_, tpe_ptrs_;
  bool has_tpe_ = false, has_tokens_ = false;
};

}  // namespace

bool cuda_backend_available(std::string* why_not) { return cuda::device_available(why_not); }

std::unique_ptr<HostPlanner> make_cuda_host_planner(const Config& config) {
  return std::make_unique<CudaHostPlanner>(config);
}

}  // namespace moonep::impl
