// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/gpu_world_expert_copies.hpp — fetch and reduce (docs/spec/layer.md
// "Expert copies") on a moonep::cuda::GpuWorld: held by one process (every
// rank in this process, one GPU per rank; a device may repeat) or one
// process per rank (make_mpi_gpu_world, moonep/gpu_world_mpi.hpp). The GPU
// world's twin of moonep::cuda::VirtualRankExpertCopies
// (moonep/cuda_expert_copies.hpp); both give the bits of fetch_reference
// and reduce_reference (moonep/layer_reference.hpp). Only usable when
// MoonEP was built with CUDA.
//
// One-sided, over symmetric memory: each rank's parameter and gradient
// slots are its own chunk on its own device, all mapped for every device
// of the world (CUDA VMM, as GpuWorldLayer's slot buffers):
//   experts(d)      [epn][Q]  rank d's own experts' parameters: the user
//                             writes them, fetch reads them from any rank
//   copies(d)       [B][Q]    rank d's copy slots: fetch writes them
//   grad_copies(d)  [B][Q]    (training) the gradients rank d's copies
//                             received: the user (or the MoE layer's
//                             GEMMs) writes them, reduce reads them
// Q values of the element type (Element, moonep/cuda_layer.hpp) per
// expert. fetch: rank d's part loads each copied expert straight from its
// owner's experts() (over NVLink across GPUs) into its own copies(d).
// reduce: owner h's part loads its experts' copies' gradients straight
// from the copiers' grad_copies() and adds them, in increasing d then b,
// into its own gradients, a buffer of the user's on h's device.
//
// A world held by one process: every operation is enqueued as one part
// per rank, forked from `origin` (a stream of rank 0's device; null: its
// legacy default stream) and joined back into it with events, no host
// waits (B >= epn), so one CUDA graph captured on `origin` holds it. The
// parts run on this object's own stream per rank, not the world's: a fetch
// enqueued on another origin than the layer's dispatch overlaps it (it
// needs only the plan). Enqueue after the world's plan of the step (on
// `origin` or before it); order the writes of experts() and grad_copies()
// before.
//
// One process per rank (make_mpi_gpu_world; the processes may share a
// GPU): made collectively (every process constructs it with the same Q,
// type and training: agreed first, every process throws the same
// InputError where they differ), each process creating its rank's chunk
// and importing the others' (every wait bounded by the world's
// WorldOptions::timeout_s), and destroyed together. Each process enqueues
// its own rank's part of fetch and reduce on `origin` (a stream of its
// rank's device), between two device-side barriers across the processes
// (as GpuWorldLayer's): one before (every owner's experts, every copier's
// grad_copies, as ordered on its `origin` before the call, are complete
// before any rank reads them) and one after (no process changes what
// another still reads). No host waits (B >= epn), so a CUDA graph captured
// on `origin` holds them. Every process must enqueue the same operations
// in the same order; reduce's grad_experts array stays indexed by rank and
// only this process's entry is read. With B < epn, fetch, reduce and
// check_runnable are collective: each process reads its own rank's group
// sizes and every process learns all of them, so all refuse alike. A
// barrier that gave up (a process that never came, or one at another
// operation) is reported by check(), as GpuWorldLayer::check() does.
//
// What must stay true:
//  * Nothing is allocated per step; the kernels read experts_to_copy from
//    each rank's plan on the device when they run, so with B >= epn a
//    step is capturable and replays follow the plan of each replay.
//  * A plan whose rank would run a remote expert that is not copied is
//    refused (check_experts_runnable's InputError, naming rank and expert)
//    before anything moves. Only B < epn allows such a plan, so only then
//    do fetch and reduce read the plan's group sizes to the host (pinned
//    memory made once, then a wait for every rank's stream): with B < epn
//    they synchronise and cannot be captured.
//  * Whatever experts_to_copy holds, nothing is read or written outside
//    the buffers: a copied expert outside 0..E-1 is skipped.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "moonep/cuda_layer.hpp"  // Element
#include "moonep/gpu_world.hpp"

namespace moonep::cuda {

class GpuWorldExpertCopies {
 public:
  // For the plans of `world` (which must outlive this object), experts of
  // `params` (Q) values of `type`; `training` adds grad_copies. Every
  // buffer starts zeroed. InputError for Q < 1; with one process per rank,
  // processes that disagree on Q, type or training (the same error on
  // every process). RuntimeError if the symmetric memory, the streams or
  // the host staging buffer cannot be made (with one process per rank
  // also: a process that does not come within the world's timeout).
  GpuWorldExpertCopies(GpuWorld& world, std::int64_t params, Element type, bool training = true);
  ~GpuWorldExpertCopies();
  GpuWorldExpertCopies(const GpuWorldExpertCopies&) = delete;
  GpuWorldExpertCopies& operator=(const GpuWorldExpertCopies&) = delete;

  std::int64_t params() const;
  Element element() const;
  bool training() const;

  // Rank d's buffers on its device, 256-byte aligned (valid as long as this
  // object; with one process per rank another process's rank's are mapped
  // here too, readable from this process's device): experts [epn][Q],
  // copies [B][Q]; training only (InputError otherwise): grad_copies
  // [B][Q]. InputError for d outside 0..R-1.
  void* experts(int d) const;
  void* copies(int d) const;
  void* grad_copies(int d) const;

  // copies(d)[b] = experts(e div epn)[e mod epn] (bits) for every
  // e = experts_to_copy[d][b] >= 0, every rank d; slots with -1
  // untouched. Asynchronous when B >= epn.
  void fetch(cudaStream_t origin) const;

  // grad_experts[h] (rank h's [epn][Q] on its device, in and out; an array
  // indexed by rank): grad_experts[h][j] = round_T(grad_experts[h][j] +
  // grad_copies(d1)[b1] + ...) over every (d, b) with experts_to_copy[d][b]
  // = h*epn + j, in increasing d then b, summed in float (double for f64);
  // experts without copies keep their bits. Training only. Asynchronous
  // when B >= epn.
  void reduce(void* const* grad_experts, cudaStream_t origin) const;

  // The refusal alone: nothing when B >= epn; otherwise reads every rank's
  // cu_seqlens (after what `origin` holds; waits for it) and throws
  // check_experts_runnable's InputError for the first rank running an
  // expert it neither owns nor holds in a copy slot.
  void check_runnable(cudaStream_t origin) const;

  // One process per rank: collective. Waits for this process's device,
  // then, if a barrier of any rank gave up since the last check, throws a
  // RuntimeError on every process naming each rank that gave up, where and
  // why, after resetting the barriers; the outputs of the operations since
  // are undefined. A world held by one process: returns at once.
  void check();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda
