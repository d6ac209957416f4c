// --world gpu: every rank its own cooperative launch on its own GPU
// (moonep::cuda::GpuWorld), the problem staged from host memory; the plan
// file and summary as for --world inprocess.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/reference.hpp"
#include "plan_worlds.hpp"

namespace moonep::tools {
namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw RuntimeError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
}

// A HostPlanner over a GpuWorld: rank r's routing (and counts) staged into
// its own device's memory; a step is one launch per rank and the wait.
class GpuWorldHostPlanner final : public HostPlanner {
 public:
  GpuWorldHostPlanner(const Config& c, const std::vector<int>& devices) : config_(c), world_(c, devices) {
    for (int r = 0; r < c.ranks; ++r) {
      check_cuda(cudaSetDevice(world_.device(r)), "cudaSetDevice");
      std::int32_t* d = nullptr;
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&d), static_cast<std::size_t>(c.entries()) * 4 + 4),
                 "allocating a rank's routing");
      routing_.push_back(d);
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&d), static_cast<std::size_t>(c.experts) * 4),
                 "allocating a rank's tokens_per_expert");
      tpe_.push_back(d);
    }
    check_cuda(cudaSetDevice(world_.device(0)), "cudaSetDevice");
  }
  ~GpuWorldHostPlanner() override {
    for (auto* p : routing_) cudaFree(p);
    for (auto* p : tpe_) cudaFree(p);
  }
  Backend backend() const override { return Backend::cuda; }
  using HostPlanner::load;  // the ragged overload: the base refuses counts (full steps only)
  void load(const Routing& routing, const TokensPerExpert* tpe) override {
    validate_problem(config_, routing, tpe);
    for (int r = 0; r < config_.ranks; ++r) {
      check_cuda(cudaMemcpy(routing_[r], routing[r].data(), routing[r].size() * 4, cudaMemcpyHostToDevice),
                 "staging the routing");
      if (tpe) {
        check_cuda(cudaMemcpy(tpe_[r], (*tpe)[r].data(), (*tpe)[r].size() * 4, cudaMemcpyHostToDevice),
                   "staging tokens_per_expert");
      }
    }
    has_tpe_ = tpe != nullptr;
  }
  void step() override {
    world_.plan(routing_.data(), has_tpe_ ? tpe_.data() : nullptr, nullptr);
    world_.check();
  }
  HostPlan result() const override { return world_.copy_out(); }
  std::string details() const override {
    std::string on;
    for (int r = 0; r < config_.ranks; ++r) on += (r ? "," : "") + std::to_string(world_.device(r));
    return "gpu world on devices " + on + ", one " + cuda::kernel_name(world_.kernel()) + " launch of " +
           std::to_string(world_.blocks_per_rank()) + " blocks per rank, timed with the host's wait";
  }

 private:
  Config config_;
  mutable cuda::GpuWorld world_;
  std::vector<std::int32_t*> routing_, tpe_;
  bool has_tpe_ = false;
};

}  // namespace

int run_gpu_world(const PlanOptions& o, const char* program) {
  std::string why;
  if (!cuda::device_available(&why)) throw RuntimeError("--world gpu: " + why);
  int visible = 0;
  check_cuda(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  std::vector<int> listed = o.devices;
  if (listed.empty()) {
    for (int d = 0; d < visible; ++d) listed.push_back(d);
  }
  return run_in_this_process(o, program, Backend::cuda, [listed](const Config& c) {
    std::vector<int> devices;
    for (int r = 0; r < c.ranks; ++r) devices.push_back(listed[static_cast<std::size_t>(r) % listed.size()]);
    return std::unique_ptr<HostPlanner>(new GpuWorldHostPlanner(c, devices));
  });
}

}  // namespace moonep::tools
