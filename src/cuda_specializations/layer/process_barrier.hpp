// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what an object of the GPU world's layer (GpuWorldLayer,
// GpuWorldExpertCopies) needs over a world of one process per rank
// (make_mpi_gpu_world), where a world held by one process joins its rank
// streams with events:
//
//   agree_on_arguments  before anything is made: every process learns
//                       every process's arguments, so that all throw the
//                       same InputError where they differ
//   ProcessBarrier      the host side of the device-side barrier
//                       (world_barrier.cuh) in the object's symmetric
//                       memory: arrive() enqueues this rank's arrival and
//                       bounded wait on a stream; check() (collective)
//                       reports a barrier that gave up and resets them
//
// What must stay true: every process arrives at the same barriers in the
// same order (where codes name the operation and phase, so a process at
// another one is named, not waited for); the control words are the first
// kControlBytes of each rank's chunk and are only ever cleared by check(),
// after every process has waited for its device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../gpu_world/peers.hpp"

namespace moonep::cuda::layer {

constexpr std::int64_t kControlBytes = 256;  // at the start of each rank's chunk of the object
constexpr int kRingSize = 8;
enum ControlWord : int { kEpoch = 0, kStop = 1, kWhere = 2, kWhy = 3, kPeer = 4, kPeerWhere = 5, kRing = 8 };
static_assert((kRing + kRingSize) * 4 <= kControlBytes, "the control words fit their bytes");
enum Why : unsigned { kNotStopped = 0, kTimedOut = 1, kOtherOperation = 2, kPeerGaveUp = 3 };

// The operations whose phases meet at barriers.
enum Op : unsigned {
  kDispatch = 1,
  kCombine = 2,
  kCombineBackward = 3,
  kDispatchBackward = 4,
  kFetch = 5,   // GpuWorldExpertCopies::fetch
  kReduce = 6,  // GpuWorldExpertCopies::reduce
};

// Where a barrier is: an operation, its phase (1: between its two parts,
// 2: its end) and its `weighted` flag. Never 0 (a cleared word).
constexpr unsigned where_code(unsigned op, unsigned phase, bool weighted) {
  return (op << 4) | (phase << 1) | (weighted ? 1u : 0u);
}

// A where code in words: "dispatch (between the sources' stores and the
// destinations' epilogue)", "the end of weighted combine", "fetch
// (before the copies are read from their owners)".
std::string where_text(unsigned code);

}  // namespace moonep::cuda::layer

namespace moonep::cuda::impl {

// One argument every process of the world must pass alike: its name in
// the error, this process's value, and how a value reads (null: the
// number).
struct AgreedArgument {
  const char* name;
  long long value;
  std::string (*text)(long long) = nullptr;
};

// How an Element (moonep/cuda_layer.hpp) and a flag read in such an error.
std::string element_text(long long type);
std::string bool_text(long long flag);

// Collective. Every process learns every process's `args`; where they
// differ, every process throws the same InputError: "<who>: the processes
// disagree on H: 64 on rank 0 and 32 on rank 1 (<rule>)".
void agree_on_arguments(WorldPeers& peers, const std::string& who, const std::vector<AgreedArgument>& args,
                        const std::string& rule);
// The layers' (GpuWorldLayer, GpuWorldMoeLayer): H, H', the element type
// (an Element) and training.
void agree_on_layer_arguments(WorldPeers& peers, const std::string& who, int hidden, int hidden_out, int type,
                              bool training);

class ProcessBarrier {
 public:
  // For the object `who` (its name in errors) whose rank r's control words
  // are at control0 + r * stride_bytes, this process's rank `me` on
  // `device`; every wait bounded by timeout_s (the world's).
  ProcessBarrier(WorldPeers& peers, int me, int device, unsigned* control0, std::int64_t stride_bytes,
                 double timeout_s, std::string who);

  // This rank's kStop word, for the object's kernels (they return at once
  // while it is set).
  const unsigned* stop() const { return control(me_) + layer::kStop; }

  // This rank's arrival at the barrier `where` (where_code) and its
  // bounded wait for every other rank's, enqueued on `stream` (a stream of
  // this rank's device): one small launch, no host wait.
  void arrive(cudaStream_t stream, unsigned where, const char* what) const;

  // Collective. Waits for this process's device; if a barrier of any rank
  // gave up since the last check, throws a RuntimeError on every process
  // naming each rank that gave up, where and why, after resetting every
  // rank's control words (`object`: what was reset, in the error).
  void check(const char* object);

  // Waits for this process's device (errors ignored: for destructors,
  // before the object's chunks go while its launches may still run).
  void idle_device() const noexcept;

 private:
  unsigned* control(int r) const {
    return reinterpret_cast<unsigned*>(reinterpret_cast<char*>(control0_) + static_cast<std::int64_t>(r) * stride_);
  }

  WorldPeers& peers_;
  int me_, device_;
  unsigned* control0_;
  std::int64_t stride_;
  double timeout_s_;
  unsigned long long timeout_ns_;
  std::string who_;
};

}  // namespace moonep::cuda::impl
