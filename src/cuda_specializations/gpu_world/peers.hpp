// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what a GpuWorld that spans several processes needs from them
// (mpi_peers.cpp provides it over MPI; a world held by one process has
// none). Every call is collective over the world's processes, one process
// per rank, and bounded in time: a process that does not come makes the
// others throw RuntimeError instead of waiting forever.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "moonep/error.hpp"
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

// Runs `step`, a part of a collective set-up. With peers every process
// then learns whether all got through theirs, so that all throw alike (the
// one that failed with its own error, the others naming it) and none waits
// in a later step for a process that gave up; a collective, bounded as
// every other. Without peers (one process) it just runs `step`.
template <class Step>
void all_or_none(WorldPeers* peers, const char* what, const std::string& who, Step&& step) {
  std::exception_ptr failed;
  try {
    step();
  } catch (...) {
    if (!peers) throw;
    failed = std::current_exception();
  }
  if (!peers) return;
  const int mine = failed ? 1 : 0;
  std::vector<int> all(static_cast<std::size_t>(peers->size()));
  peers->allgather(&mine, sizeof mine, all.data());
  if (failed) std::rethrow_exception(failed);
  std::vector<int> bad;
  for (int r = 0; r < peers->size(); ++r) {
    if (all[r]) bad.push_back(r);
  }
  if (!bad.empty()) throw RuntimeError(who + ": " + ranks_text(bad) + " could not " + what + " (its own error says why)");
}

// One rank of a world of one process per rank: this process's rank of
// `peers` on `device` (gpu_world.cu; mpi_peers.cpp calls it).
struct WorldFactory {
  static std::unique_ptr<GpuWorld> over(const Config& config, int device, std::unique_ptr<WorldPeers> peers,
                                        const WorldOptions& options);
};

}  // namespace moonep::cuda::impl
