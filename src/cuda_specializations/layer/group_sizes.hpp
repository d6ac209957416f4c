// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: a step's group sizes read back to the host. The expert copies
// must refuse a plan whose rank would run a remote expert it did not copy
// before anything moves, and the MoE layers list every non-empty group
// for their GEMMs: both read every rank's cu_seqlens ([E+B], on the rank's
// device) into one pinned [R][E+B] array, made once, per step.
//
// What must stay true: sizes() is read only after every stream a rank's
// copy was enqueued on has been synchronized (and, with one process per
// rank, after read_shared()).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../gpu_world/peers.hpp"
#include "../host_checks.hpp"
#include "moonep/config.hpp"

namespace moonep::cuda::impl {

class PlanGroupSizes {
 public:
  // `cu_seqlens`: each rank's, on its device; `owner` names the object in
  // the error when the pinned array cannot be made.
  PlanGroupSizes(const Config& c, std::vector<const std::int32_t*> cu_seqlens, const std::string& owner)
      : config_(c), groups_(static_cast<std::size_t>(c.groups())), cu_seqlens_(std::move(cu_seqlens)) {
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&host_), c.ranks * groups_ * sizeof(std::int32_t)),
               ("allocating the " + owner + "'s group sizes on the host").c_str());
  }
  ~PlanGroupSizes() { cudaFreeHost(host_); }
  PlanGroupSizes(const PlanGroupSizes&) = delete;
  PlanGroupSizes& operator=(const PlanGroupSizes&) = delete;

  // Rank r's copy, enqueued on `stream` (a stream of r's device or one
  // that may read it).
  void enqueue(int r, cudaStream_t stream) const {
    check_cuda(cudaMemcpyAsync(host_ + r * groups_, cu_seqlens_[static_cast<std::size_t>(r)],
                               groups_ * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream),
               "reading the plan's group sizes");
  }
  // Every rank's copy on one stream, waited for.
  void read(cudaStream_t stream) const {
    for (int r = 0; r < config_.ranks; ++r) enqueue(r, stream);
    check_cuda(cudaStreamSynchronize(stream), "waiting for the plan's group sizes");
  }
  // One process per rank (collective): this process's rank `me`'s copy
  // after what `stream` (of `device`) holds, waited for, then to every
  // process and theirs into this one, so that every process holds every
  // rank's sizes (and refuses a plan alike).
  void read_shared(WorldPeers& peers, int me, int device, cudaStream_t stream) const {
    {
      DeviceScope on(device);
      enqueue(me, stream);
      check_cuda(cudaStreamSynchronize(stream), "waiting for the plan's group sizes");
    }
    std::vector<std::int32_t> all(static_cast<std::size_t>(config_.ranks) * groups_);
    peers.allgather(host_ + me * groups_, groups_ * sizeof(std::int32_t), all.data());
    std::copy(all.begin(), all.end(), host_);
  }
  const std::int32_t* sizes() const { return host_; }

 private:
  Config config_;
  std::size_t groups_;
  std::vector<const std::int32_t*> cu_seqlens_;
  std::int32_t* host_ = nullptr;
};

// From every rank's group sizes (host, [R][E+B]): InputError in
// check_experts_runnable's words for a plan whose rank would run a remote
// expert it did not copy (only B < epn can hold one). Defined in
// moe_layer.cu.
void refuse_uncopied(const Config& c, const std::int32_t* sizes);

}  // namespace moonep::cuda::impl
