// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: one part per rank of a GPU world held by one process, each on
// its rank's stream and device, forked from an `origin` stream and joined
// back into it with events, no host waits, so that a CUDA graph captured
// on `origin` holds every rank's part (GpuWorldLayer, GpuWorldExpertCopies,
// GpuWorldMoeLayer).
//
//   fork(origin)      every rank's stream waits for what origin holds so far
//   part(r, stream)   the caller's launches on rank r's stream (its device current)
//   barrier()         every rank's stream waits for every other's parts so far
//   join(origin)      origin waits for every rank's stream
//
// The streams are the world's (GpuWorld::stream) or, for work that must
// overlap the world's (an expert fetch beside a dispatch), this object's
// own, made here (own_streams). The events are made here, once.
//
// zeroed_chunks: a world's symmetric buffers of one kind (one chunk per
// rank, mapped for every device: gpu_world/symmetric_mapping.hpp), zeroed;
// also for a world of one process per rank.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../gpu_world/peers.hpp"
#include "../gpu_world/symmetric_mapping.hpp"
#include "../host_checks.hpp"
#include "moonep/gpu_world.hpp"

namespace moonep::cuda::impl {

class WorldFork {
 public:
  // For every rank of `world` (a world held by this process).
  WorldFork(const GpuWorld& world, bool own_streams) {
    const int R = world.ranks();
    try {
      for (int r = 0; r < R; ++r) {
        devices_.push_back(world.device(r));
        DeviceScope on(devices_[r]);
        cudaStream_t s = world.stream(r);
        if (own_streams) {
          check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
          owned_.push_back(s);
        }
        streams_.push_back(s);
        done_.push_back(nullptr);
        check_cuda(cudaEventCreateWithFlags(&done_.back(), cudaEventDisableTiming), "cudaEventCreate");
        if (r == 0) check_cuda(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming), "cudaEventCreate");
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~WorldFork() { release(); }
  WorldFork(const WorldFork&) = delete;
  WorldFork& operator=(const WorldFork&) = delete;

  int ranks() const { return static_cast<int>(streams_.size()); }
  int device(int r) const { return devices_[static_cast<std::size_t>(r)]; }
  cudaStream_t stream(int r) const { return streams_[static_cast<std::size_t>(r)]; }

  // `origin`: a stream of rank 0's device (null: its legacy default stream).
  void fork(cudaStream_t origin, const char* what) const {
    {
      DeviceScope on(devices_[0]);
      check_cuda(cudaEventRecord(forked_, origin), what);
    }
    for (cudaStream_t s : streams_) check_cuda(cudaStreamWaitEvent(s, forked_, 0), what);
  }
  // part(r, stream) for every rank, its device current; launch errors
  // reported as `what`.
  template <class Part>
  void each(const char* what, Part&& part) const {
    for (int r = 0; r < ranks(); ++r) {
      DeviceScope on(devices_[static_cast<std::size_t>(r)]);
      part(r, streams_[static_cast<std::size_t>(r)]);
      check_cuda(cudaGetLastError(), what);
    }
  }
  void barrier(const char* what) const {
    record(what);
    for (int r = 0; r < ranks(); ++r)
      for (int q = 0; q < ranks(); ++q)
        if (q != r) check_cuda(cudaStreamWaitEvent(streams_[r], done_[q], 0), what);
  }
  void join(cudaStream_t origin, const char* what) const {
    record(what);
    for (cudaEvent_t e : done_) check_cuda(cudaStreamWaitEvent(origin, e, 0), what);
  }
  // fork, every rank's part, join.
  template <class Part>
  void run(cudaStream_t origin, const char* what, Part&& part) const {
    fork(origin, what);
    each(what, part);
    join(origin, what);
  }
  // Waits on the host for every rank's stream.
  void synchronize(const char* what) const {
    for (int r = 0; r < ranks(); ++r) {
      DeviceScope on(devices_[static_cast<std::size_t>(r)]);
      check_cuda(cudaStreamSynchronize(streams_[static_cast<std::size_t>(r)]), what);
    }
  }

 private:
  void record(const char* what) const {
    for (int r = 0; r < ranks(); ++r) {
      DeviceScope on(devices_[static_cast<std::size_t>(r)]);
      check_cuda(cudaEventRecord(done_[r], streams_[r]), what);
    }
  }
  void release() {
    int saved = 0;
    cudaGetDevice(&saved);
    for (std::size_t r = 0; r < streams_.size(); ++r) {
      cudaSetDevice(devices_[r]);
      cudaStreamSynchronize(streams_[r]);
    }
    for (std::size_t r = 0; r < owned_.size(); ++r) {
      cudaSetDevice(devices_[r]);
      cudaStreamDestroy(owned_[r]);
    }
    for (cudaEvent_t e : done_)
      if (e) cudaEventDestroy(e);
    if (forked_) cudaEventDestroy(forked_);
    cudaSetDevice(saved);
    owned_.clear();
    done_.clear();
    streams_.clear();
    forked_ = nullptr;
  }

  std::vector<int> devices_;
  std::vector<cudaStream_t> streams_, owned_;
  std::vector<cudaEvent_t> done_;
  cudaEvent_t forked_ = nullptr;
};

// Every rank's chunk of `bytes` (rounded up by the mapping), each on its
// own device and mapped for every device of this process, zeroed and
// finished on return. `peers` null: `world` is held by this process, which
// makes every chunk. Otherwise (one process per rank, collective): this
// process makes its rank's chunk and imports the others' (every wait
// bounded by the world's timeout), and returns only when every process
// has cleared its own, so no store reaches a chunk before it is cleared.
// `vmm` must outlive the result.
inline std::unique_ptr<SymmetricMapping> zeroed_chunks(const Vmm& vmm, const GpuWorld& world, std::int64_t bytes,
                                                       WorldPeers* peers = nullptr) {
  const int R = world.ranks();
  std::vector<int> devices, local;
  for (int r = 0; r < R; ++r) {
    devices.push_back(world.device(r));  // -1 for another process's rank
    if (!peers || r == world.process_rank()) local.push_back(r);
  }
  auto chunks = std::make_unique<SymmetricMapping>(vmm, devices, local, static_cast<std::size_t>(bytes), peers);
  for (int r : local) {
    DeviceScope on(devices[r]);
    check_cuda(cudaMemset(chunks->chunk(r), 0, chunks->chunk_bytes()), "clearing a rank's chunk");
  }
  for (int r : local) {
    DeviceScope on(devices[r]);
    check_cuda(cudaDeviceSynchronize(), "clearing the ranks' chunks");
  }
  if (peers) peers->barrier();
  return chunks;
}

}  // namespace moonep::cuda::impl
