// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// MpiRmaWorld: each rank's chunk is its part of an MPI_Win_allocate window;
// data reaches a peer only through MPI_Put, completed by barrier().
#include <climits>
#include <string>

#include "moonep/mpi_world.hpp"

namespace moonep {

MpiRmaWorld::MpiRmaWorld(MPI_Comm comm, double timeout_s)
    : MpiWorld(comm, "MpiRmaWorld", MpiWorldKind::rma, timeout_s) {}

void MpiRmaWorld::create_window(std::int64_t bytes) {
  MPI_Info info;
  check(MPI_Info_create(&info), "MPI_Info_create");
  // Hints (MPI-4; ignored where unknown): all chunks have one size and one
  // displacement unit, which lets the implementation skip exchanging them.
  MPI_Info_set(info, "same_size", "true");
  MPI_Info_set(info, "same_disp_unit", "true");
  void* base = nullptr;
  const int rc = MPI_Win_allocate(static_cast<MPI_Aint>(bytes), static_cast<int>(sizeof(std::int32_t)), info, comm_,
                                  &base, &win_);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) win_ = MPI_WIN_NULL;
  check(rc, "MPI_Win_allocate");
  base_ = static_cast<std::int32_t*>(base);
}

MpiRmaWorld::chunk_view MpiRmaWorld::chunk(int rank) const {
  throw RuntimeError("MpiRmaWorld: chunk(" + std::to_string(rank) +
                     ") is not addressable (no shared memory; use put_runs)");
}

void MpiRmaWorld::put_runs(int src_rank, source_view src, run_view runs) {
  if (src_rank != rank_) {
    throw RuntimeError("MpiRmaWorld::put_runs: rank " + std::to_string(src_rank) + " is not local");
  }
  // HostSpace views: the runs and the source are already host memory.
  const std::int64_t src_len = static_cast<std::int64_t>(src.extent(0));
  const std::size_t n = runs.extent(0);
  // MPI counts are int: long runs go in pieces.
  constexpr std::int64_t kPiece = INT_MAX / 2;
  for (std::size_t i = 0; i < n; ++i) {
    const PutRun run = runs(i);
    check_run(run, src_len);
    for (std::int64_t done = 0; done < run.count; done += kPiece) {
      const int count = static_cast<int>(run.count - done < kPiece ? run.count - done : kPiece);
      check(MPI_Put(src.data() + run.src_offset + done, count, MPI_INT32_T, run.dst_rank,
                    static_cast<MPI_Aint>(run.dst_offset + done), count, MPI_INT32_T, win_),
            "MPI_Put");
    }
  }
}

void MpiRmaWorld::barrier() {
  Kokkos::fence();
  if (win_ == MPI_WIN_NULL) {
    barrier_step("barrier");
    return;
  }
  // 1. flush_all: every put this process issued is complete at its target
  //    (remote completion), so it is in the target's window before we
  //    announce we are done.
  // 2. Win_sync: our plain stores to our own chunk reach the window's
  //    public copy (only matters in the separate memory model).
  // 3. Barrier: after it, every process has done 1 and 2.
  // 4. Win_sync: the puts that landed in our window are visible to our
  //    plain loads (private copy refreshed; a compiler/memory barrier in
  //    the unified model).
  check(MPI_Win_flush_all(win_), "MPI_Win_flush_all");
  check(MPI_Win_sync(win_), "MPI_Win_sync");
  barrier_step("barrier");
  check(MPI_Win_sync(win_), "MPI_Win_sync");
}

}  // namespace moonep
