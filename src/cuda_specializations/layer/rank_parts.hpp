// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the one way the GPU world's objects (GpuWorldLayer,
// GpuWorldExpertCopies, GpuWorldMoeLayer) enqueue an operation's parts on
// the ranks this process holds, whatever holds the world:
//
//   a world held by this process   every rank's part on its stream, forked
//                                  from `origin`, an event barrier between
//                                  stages, joined back into `origin`
//                                  (WorldFork, world_fork.hpp)
//   one process per rank           this process's rank's parts on `origin`
//                                  (its device current), the device-side
//                                  barrier across the processes
//                                  (ProcessBarrier) between stages and,
//                                  where the Meeting says, before the first
//                                  and after the last
//
// Both forms enqueue only, no host waits, so a CUDA graph captured on
// `origin` holds the operation. What must stay true: every process of a
// world passes the same stages and Meeting to the same operations in the
// same order (barrier i of an operation is where_code(op, i, weighted),
// counted from 1), so a process at another operation is named, not
// waited for.
#pragma once

#include <cuda_runtime_api.h>

#include "../host_checks.hpp"
#include "group_sizes.hpp"
#include "process_barrier.hpp"
#include "world_fork.hpp"

namespace moonep::cuda::impl {

// Where the processes of a per-process world meet in one operation: its
// where codes (`op`, `weighted`) and whether a barrier also comes before
// the first stage (the copies' fetch and reduce: every owner's experts,
// every copier's gradients written before anyone reads them) and after
// the last (nothing overwritten while another rank still reads). A world
// held by one process meets through `origin`'s fork and join instead.
struct Meeting {
  unsigned op = 0;
  bool weighted = false;
  bool before = false;
  bool after = false;
};

class RankParts {
 public:
  // A world held by this process.
  explicit RankParts(const WorldFork& fork) : fork_(&fork) {}
  // One process per rank: this process's rank `me` on `device`; `barriers`
  // null for an object whose parts never meet (the MoE layer's GEMMs, which
  // meet at its layer's and copies' barriers).
  RankParts(WorldPeers& peers, int me, int device, const ProcessBarrier* barriers)
      : peers_(&peers), barriers_(barriers), me_(me), device_(device) {}

  // stage(r, stream) for each rank this process enqueues, stage after
  // stage; launch errors reported as `what`.
  template <class... Stages>
  void run(cudaStream_t origin, const char* what, const Meeting& meeting, Stages&&... stages) const {
    if (fork_) {
      fork_->fork(origin, what);
      bool first = true;
      auto stage_on_every_rank = [&](auto& stage) {
        if (!first) fork_->barrier(what);
        first = false;
        fork_->each(what, stage);
      };
      (stage_on_every_rank(stages), ...);
      fork_->join(origin, what);
      return;
    }
    DeviceScope on(device_);
    unsigned phase = 0;
    auto meet = [&] { barriers_->arrive(origin, layer::where_code(meeting.op, ++phase, meeting.weighted), what); };
    bool first = true;
    auto stage_on_this_rank = [&](auto& stage) {
      if (!first || meeting.before) {
        if (barriers_) meet();
      }
      first = false;
      stage(me_, origin);
      check_cuda(cudaGetLastError(), what);
    };
    (stage_on_this_rank(stages), ...);
    if (meeting.after && barriers_) meet();
  }

  // Every rank's group sizes on the host, read after what `origin` holds
  // (one process per rank: collective, PlanGroupSizes::read_shared).
  void read_group_sizes(const PlanGroupSizes& sizes, cudaStream_t origin) const {
    if (peers_) {
      sizes.read_shared(*peers_, me_, device_, origin);
      return;
    }
    const char* what = "reading the plan's group sizes";
    fork_->fork(origin, what);
    fork_->each(what, [&](int r, cudaStream_t st) { sizes.enqueue(r, st); });
    fork_->synchronize("waiting for the plan's group sizes");
  }

 private:
  const WorldFork* fork_ = nullptr;
  WorldPeers* peers_ = nullptr;
  const ProcessBarrier* barriers_ = nullptr;
  int me_ = -1, device_ = 0;
};

}  // namespace moonep::cuda::impl
