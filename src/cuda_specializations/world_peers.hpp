// Private: what a GpuWorld that spans several processes needs from them
// (gpu_world_mpi.cpp provides it over MPI; a world held by one process has
// none). Every call is collective over the world's processes, one process
// per rank, and bounded in time: a process that does not come makes the
// others throw RuntimeError instead of waiting forever.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "moonep/gpu_world.hpp"

namespace moonep::cuda::impl {

struct WorldPeers {
  virtual ~WorldPeers() = default;
  virtual int rank() const = 0;  // this process's rank
  virtual int size() const = 0;  // ranks (processes) of the world
  // Every process's `bytes` bytes, in rank order, into `all` (size*bytes).
  virtual void allgather(const void* mine, std::size_t bytes, void* all) = 0;
  // Hands this process's allocation (a POSIX file descriptor from
  // cuMemExportToShareableHandle) to every other process; returns every
  // rank's descriptor in this process (its own: `mine`). The caller
  // closes the received ones once imported.
  virtual std::vector<int> exchange_descriptors(int mine) = 0;
  // Hands rank 0's descriptor (its `mine`; the others pass -1) to every
  // other process; returns it in every process (rank 0: `mine`). The
  // caller closes a received one once imported. (The multicast object,
  // which only rank 0 creates.)
  virtual int share_descriptor(int mine) = 0;
  virtual void barrier() = 0;
};

// One rank of a world of one process per rank: this process's rank of
// `peers` on `device` (gpu_world.cu; the MPI start calls it).
struct WorldFactory {
  static std::unique_ptr<GpuWorld> over(const Config& config, int device, std::unique_ptr<WorldPeers> peers,
                                        const WorldOptions& options);
};

}  // namespace moonep::cuda::impl
