// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: device memory owned by an object (freed with it, also when a
// constructor throws part-way), and the staging of whole problems from host
// memory that both host planners of the CUDA specialization do (the
// registry's cuda backend, cuda_backend.cpp, and the GPU world's,
// gpu_world/host_planner.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "host_checks.hpp"
#include "moonep/config.hpp"
#include "moonep/reference.hpp"

namespace moonep::cuda::impl {

// Bytes (at least 16) on the current device, zeroed; freed with the object.
struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr) { o.ptr = nullptr; }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  void allocate(std::int64_t bytes, const char* what) {
    const std::size_t n = static_cast<std::size_t>(std::max<std::int64_t>(bytes, 16));
    check_cuda(cudaMalloc(&ptr, n), what);
    check_cuda(cudaMemset(ptr, 0, n), what);
  }
  std::int32_t* words() const { return static_cast<std::int32_t*>(ptr); }
};

// Each staged rank's routing (room for S*K ids), tokens_per_expert and
// token count on its own device, filled from a whole problem in host
// memory; the pointer arrays (by rank, null for a rank not staged here)
// are what cuda::VirtualRankPlanner::plan and GpuWorld::plan take.
class RankStaging {
 public:
  // devices[r] < 0: rank r is not staged here (another process's).
  RankStaging(const Config& config, const std::vector<int>& devices) : config_(config), devices_(devices) {
    const std::size_t R = static_cast<std::size_t>(config.ranks);
    routing_.resize(R), tpe_.resize(R);
    routing_ptr_.assign(R, nullptr), tpe_ptr_.assign(R, nullptr), count_ptr_.assign(R, nullptr);
    for (int r = 0; r < config.ranks; ++r) {
      if (devices[r] < 0) continue;
      DeviceScope on(devices[r]);
      routing_[r].allocate(config.entries() * 4, "allocating a rank's routing");
      tpe_[r].allocate(static_cast<std::int64_t>(config.experts) * 4, "allocating a rank's tokens_per_expert");
      routing_ptr_[r] = routing_[r].words();
      tpe_ptr_[r] = tpe_[r].words();
      // R counts on each device that holds a rank, rank r's at index r (the
      // virtual ranks' kernel reads them as one array).
      auto on_device = std::find(count_device_.begin(), count_device_.end(), devices[r]);
      if (on_device == count_device_.end()) {
        count_device_.push_back(devices[r]);
        counts_.emplace_back();
        counts_.back().allocate(static_cast<std::int64_t>(config.ranks) * 4, "allocating the token counts");
        on_device = count_device_.end() - 1;
      }
      count_ptr_[r] = counts_[static_cast<std::size_t>(on_device - count_device_.begin())].words() + r;
    }
  }

  // Copies a validated problem's staged ranks (a ragged rank's s_r*K ids
  // at the start of its buffer) and waits for the copies.
  void stage(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) {
    for (int r = 0; r < config_.ranks; ++r) {
      if (devices_[r] < 0) continue;
      DeviceScope on(devices_[r]);
      copy(routing_ptr_[r], routing[r].data(), routing[r].size(), "staging the routing");
      if (tpe) copy(tpe_ptr_[r], (*tpe)[r].data(), (*tpe)[r].size(), "staging tokens_per_expert");
      if (tokens) copy(count_ptr_[r], &(*tokens)[r], 1, "staging a rank's token count");
    }
    has_tpe_ = tpe != nullptr;
    has_tokens_ = tokens != nullptr;
  }

  const std::int32_t* const* routing() const { return routing_ptr_.data(); }
  // Null when the staged problem has none.
  const std::int32_t* const* tpe() const { return has_tpe_ ? tpe_ptr_.data() : nullptr; }
  const std::int32_t* const* counts() const { return has_tokens_ ? count_ptr_.data() : nullptr; }
  // Every rank's count as one array of R (ranks all on one device).
  const std::int32_t* count_array() const { return has_tokens_ ? count_ptr_[0] : nullptr; }

 private:
  // cudaMemcpy: done when the step launches; nothing for an empty rank.
  static void copy(const std::int32_t* to, const std::int32_t* from, std::size_t n, const char* what) {
    if (n > 0) check_cuda(cudaMemcpy(const_cast<std::int32_t*>(to), from, n * 4, cudaMemcpyHostToDevice), what);
  }

  Config config_;
  std::vector<int> devices_;
  std::vector<DeviceBuffer> routing_, tpe_, counts_;
  std::vector<int> count_device_;  // the device of each of counts_
  std::vector<const std::int32_t*> routing_ptr_, tpe_ptr_, count_ptr_;
  bool has_tpe_ = false, has_tokens_ = false;
};

}  // namespace moonep::cuda::impl
