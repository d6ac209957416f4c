// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/gpu_world.hpp — one GPU per rank: R ranks, each planning its own
// part of a step in its own cooperative launch on its own device and
// stream, meeting the other ranks only through the symmetric buffer. Only
// usable when MoonEP was built with CUDA (MOONEP_HAVE_CUDA == 1).
//
// The symmetric buffer: every rank's chunk (counters, gathered counts,
// tables, its scratch and its plan outputs) is its own allocation on its
// own device, and all R chunks are mapped back to back into one virtual
// address range with CUDA virtual memory management (cuMemCreate,
// cuMemMap, cuMemSetAccess for every device of the world), so the kernel
// addresses (rank, offset) as it does for virtual ranks.
//
// One process holds the world over a list of devices in which a device may
// repeat: {0, 1, 2, 3} is a rank per GPU, {0, 0, 0, 0} four ranks on one
// GPU, each with its own allocation, stream and launch (how one GPU tests
// the protocol). Or one process per rank, under MPI
// (moonep/gpu_world_mpi.hpp): each process creates its own rank's chunk
// and imports the others' (file descriptors handed over a Unix socket).
//
// No hang: every wait for another rank is bounded (WorldOptions::
// timeout_s). A rank whose launch never comes makes check() throw a
// RuntimeError naming it and the wait; the world resets itself and the
// next step plans normally. Bad input on one rank fails the whole step
// (check() names the rank and entry) and leaves the world usable.
//
// Broadcast: by default unicast. The ranks' counts are gathered with
// atomics into rank 0's chunk, where every rank reads them, and every
// result is stored straight into its destination rank's chunk. With
// WorldOptions::multicast (an explicit opt-in, refused where the devices
// lack NVLink multicast) the counts and the counters are reduced into
// every rank's chunk at once through an NVLink multicast object
// (multimem.red), so every rank reads its own copy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/host_plan.hpp"

namespace moonep {
class HostPlanner;  // moonep/backend.hpp
}

namespace moonep::cuda {
namespace impl {
struct WorldPeers;    // the processes of a world with one process per rank
struct WorldFactory;  // builds such a world (moonep/gpu_world_mpi.hpp)
struct LayerAccess;   // what GpuWorldLayer reads of its world
}

struct WorldOptions {
  // Blocks of each rank's launch; lowered until the launches of all ranks
  // that share a device are co-resident there (GpuWorld::blocks_per_rank()).
  int blocks_per_rank = 32;
  Kernel kernel = Kernel::automatic;
  // Longest wait for another rank's arrival, in seconds, (0, 86400].
  double timeout_s = 10;
  // System-scope synchronisation even when every rank is on one device
  // (it is always used when the world spans devices): lets one GPU test
  // the path a multi-GPU world takes.
  bool system_scope = false;
  // NVLink multicast for the gathered counts and counters (docs/backends.md,
  // "NVLink multicast"). Off by default, and compiled only into a MoonEP
  // configured with -DMoonEP_ENABLE_MULTICAST=ON (MOONEP_HAVE_MULTICAST):
  // a build without it refuses every world that asks. When on, the
  // constructor refuses (RuntimeError naming the reason, before any
  // multicast object exists), in this order, a world whose ranks do not
  // each have their own device and devices without multicast support
  // (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED). With one process per rank
  // every process must ask the same. Never run yet: compiled and reviewed.
  bool multicast = false;
};

class GpuWorld {
 public:
  // Validates the configuration and devices (InputError: a device list
  // not of config.ranks entries, a device that does not exist, bad
  // options), maps the symmetric buffer and creates each rank's stream
  // (RuntimeError if the devices cannot reach each other's memory or an
  // allocation fails). Nothing is allocated afterwards.
  GpuWorld(const Config& config, const std::vector<int>& devices, const WorldOptions& options = WorldOptions());
  ~GpuWorld();
  GpuWorld(const GpuWorld&) = delete;
  GpuWorld& operator=(const GpuWorld&) = delete;

  const Config& config() const;
  int ranks() const;
  int device(int rank) const;           // -1 for another process's rank
  cudaStream_t stream(int rank) const;  // a rank of this process: its own stream, on its device
  // With one process per rank (make_mpi_gpu_world): this process's rank;
  // -1 when this process holds every rank.
  int process_rank() const;
  Kernel kernel() const;
  int blocks_per_rank() const;
  bool system_scope() const;
  bool multicast() const;  // the counts and counters go through NVLink multicast

  // Enqueues rank `rank`'s part of the step on `stream` (a stream of the
  // rank's device): its routing (s_rank*K expert ids in device memory;
  // routing_len its length, < 0: room for S*K), optionally its
  // tokens_per_expert (null: not checked) and optionally its token count
  // (null: S; else a device pointer to s_rank on the rank's device, read
  // when the kernel runs, so a captured graph replays steps of any counts;
  // a count whose s_rank*K exceeds routing_len is refused and nothing past
  // it is read). The other ranks' counts need not be known here: the
  // kernel learns the step's total from the gathered counts. Asynchronous.
  void plan_rank(int rank, const std::int32_t* d_routing, const std::int32_t* d_tpe, cudaStream_t stream,
                 const std::int32_t* d_tokens = nullptr, std::int64_t routing_len = -1);
  // Every rank's part of this process on its own stream, forked from
  // `origin` and joined back into it (events), so that capturing `origin`
  // into a CUDA graph gives one graph with a kernel node per rank.
  // `origin` is a stream of this process's first rank's device (null: its
  // legacy default stream). d_routing (and d_tpe, d_tokens and
  // routing_len, which may be null, as may their entries) are indexed by
  // rank; only this process's entries are read.
  void plan(const std::int32_t* const* d_routing, const std::int32_t* const* d_tpe, cudaStream_t origin,
            const std::int32_t* const* d_tokens = nullptr, const std::int64_t* routing_len = nullptr);

  // Waits for every rank's stream (with one process per rank: every
  // process calls it, collectively), then throws for the step if any rank
  // failed: InputError naming the lowest bad rank and entry, RuntimeError
  // naming the ranks that did not arrive and the waits that timed out. The
  // world is usable afterwards (after a timeout it resets its counters).
  void check();

  // Device pointers to rank `rank`'s plan (valid as long as the world).
  const DeviceRankPlan& rank_plan(int rank) const;
  // check(), then every rank's plan in host memory; after a ragged step
  // the HostPlan carries every rank's count and dst holds s_r*K entries.
  HostPlan copy_out();

 private:
  friend struct impl::PlannerAccess;
  friend struct impl::WorldFactory;
  friend struct impl::LayerAccess;
  // One rank of a world of one process per rank, over `peers`.
  GpuWorld(const Config& config, int device, std::unique_ptr<impl::WorldPeers> peers, const WorldOptions& options);
  struct State;
  std::unique_ptr<State> s_;
};

// The world as a moonep::HostPlanner (moonep/backend.hpp), for whole
// problems in host memory: load() validates a problem and stages each of
// this process's ranks' routing (and tokens_per_expert and count) on its
// device, step() plans them (collectively with one process per rank),
// result() is copy_out(). InputError for a null world.
std::unique_ptr<HostPlanner> make_host_planner(std::unique_ptr<GpuWorld> world);

}  // namespace moonep::cuda
