// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The device-side barrier of GpuWorldLayer and GpuWorldExpertCopies over a
// world of one process per rank (make_mpi_gpu_world; its host side:
// process_barrier.hpp): where a world held by one process joins its
// rank streams with events between an operation's phases, each process
// enqueues, on its own stream, one small launch that meets the other
// ranks' in symmetric memory. No host waits, so a step stays capturable
// in a CUDA graph beside the world's plan.
//
// Each rank's chunk of the object starts with its control words
// (kControlBytes):
//
//   kEpoch    arrivals of the rank at barriers so far. Only the rank adds
//             to it (one system-scope release per arrival, after a system
//             fence: everything the rank's earlier launches stored, here or
//             in other ranks' chunks, is published by it); the others read
//             it with system-scope acquire loads. A barrier passes once
//             every rank's count has reached this rank's (mod 2^32): no
//             rank is more than one arrival ahead of another, and nothing
//             is reset between steps, so a captured graph replays.
//   kRing     the operation and phase of the rank's last kRingSize
//             arrivals, by count: a barrier checks that every other rank
//             arrived at the same one (every process must enqueue the same
//             operations in the same order; a process that refused its
//             arguments enqueued nothing).
//   kStop     set when one of the rank's barriers gave up (kWhy, with the
//             barrier kWhere, the other rank kPeer and its kPeerWhere): a
//             rank that does not arrive within the world's timeout, or one
//             at another operation, or one that had given up itself. From
//             then on the rank's barriers arrive without waiting and its
//             kernels of the object return at once, until its check()
//             (collective) reports it and clears every rank's words.
//
// No hang: every wait is bounded by the world's WorldOptions::timeout_s,
// as the planning kernel's are (sync_primitives.cuh), so a process that
// never enqueues its part costs the others one timeout, not a hang.
#pragma once

#include <cstdint>

#include "../sync_primitives.cuh"
#include "layer_params.cuh"
#include "process_barrier.hpp"  // the control words and where codes

namespace moonep::cuda::layer {

struct BarrierParams {
  unsigned* control0;         // rank 0's control words
  i64 stride;                 // words from one rank's control words to the next's
  int R, rank;                // ranks; this launch's
  unsigned where;             // where_code of this barrier
  unsigned long long timeout_ns;
};

__device__ __forceinline__ unsigned* control_of(const BarrierParams& b, int rank) {
  return b.control0 + static_cast<i64>(rank) * b.stride;
}

__device__ __forceinline__ unsigned ld_volatile(const unsigned* p) { return *reinterpret_cast<const volatile unsigned*>(p); }

// One block. Thread 0 arrives; threads wait for one other rank each (a
// stride of blockDim.x), each wait bounded (a thread whose wait timed out
// waits for no further rank). What is recorded, and sets kStop: the lowest
// rank that did not come or was at another operation, else the lowest
// that had given up itself.
__global__ void world_barrier(BarrierParams b) {
  __shared__ unsigned s_target;
  __shared__ int s_stopped;
  __shared__ unsigned s_key, s_why, s_peer_where;
  unsigned* mine = control_of(b, b.rank);
  if (threadIdx.x == 0) {
    const unsigned e = ld_volatile(mine + kEpoch);  // only this rank writes it
    s_stopped = ld_volatile(mine + kStop) != 0u;
    mine[kRing + (e + 1u) % kRingSize] = b.where;
    __threadfence_system();
    impl::red_release_sys(mine + kEpoch, 1u);
    s_target = e + 1u;
    s_key = 0xffffffffu;
  }
  __syncthreads();
  if (s_stopped) return;  // an earlier barrier gave up: arrive only
  const unsigned target = s_target, R = static_cast<unsigned>(b.R);
  // key: the peer for a reason of its own, R + the peer for one that had
  // given up; the lowest key wins.
  unsigned key = 0xffffffffu, why = kNotStopped, peer_where = 0u;
  for (int q = threadIdx.x; q < b.R; q += blockDim.x) {
    if (q == b.rank) continue;
    const unsigned* theirs = control_of(b, q);
    unsigned w = kNotStopped, at = 0u;
    if (!impl::spin_until([&] { return impl::ld_acquire_sys(theirs + kEpoch); }, target, b.timeout_ns)) {
      w = kTimedOut;
    } else if ((at = ld_volatile(theirs + kRing + target % kRingSize)) != b.where) {
      // Written before their arrival at this count; they are at most one
      // arrival past it, so the ring still holds it.
      w = kOtherOperation;
    } else if (impl::ld_acquire_sys(theirs + kStop) != 0u) {
      w = kPeerGaveUp;
    }
    if (w == kNotStopped) continue;
    const unsigned k = (w == kPeerGaveUp ? R : 0u) + static_cast<unsigned>(q);
    if (k < key) key = k, why = w, peer_where = at;
    if (w == kTimedOut) break;
  }
  if (why != kNotStopped) atomicMin(&s_key, key);
  __syncthreads();
  if (why != kNotStopped && key == s_key) {  // one thread: the winning key's
    s_why = why;
    s_peer_where = peer_where;
  }
  __syncthreads();
  if (threadIdx.x == 0 && s_key != 0xffffffffu) {
    mine[kWhere] = b.where;
    mine[kWhy] = s_why;
    mine[kPeer] = s_key >= R ? s_key - R : s_key;
    mine[kPeerWhere] = s_peer_where;
    mine[kStop] = 1u;
  }
  // What the other ranks stored before their arrivals is read by this
  // rank's next launch on the stream (after this one ends).
  __threadfence_system();
}

}  // namespace moonep::cuda::layer
