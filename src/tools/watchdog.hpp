// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to the command-line tools: a bound on a call that has no timeout
// of its own (MPI_Init, MPI_Finalize wait for every process of the job,
// forever when one of them stopped). A thread waits `seconds`; unless the
// Watchdog was destroyed first, it calls `expire`, which must end the
// process (std::_Exit: the call being bounded still runs in another thread,
// so nothing may be unwound or finalized).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace moonep::tools {

class Watchdog {
 public:
  Watchdog(double seconds, std::function<void()> expire);
  ~Watchdog();  // stops the wait (the call returned in time)
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};

// This process's rank in an MPI launch, from the launcher's environment
// (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, MV2_COMM_WORLD_RANK): known
// before MPI_Init returns. -1 outside a launch.
int launch_rank();

// Bounds MPI_Init / MPI_Finalize (`step`: "start-up (MPI_Init)") by
// `seconds`, at least kMinMpiCallBound (their own work, not only the wait
// for the others, can take seconds on a loaded node: a small --mpi-timeout
// must not end a job that is merely starting): past it, one process of the
// job prints the error line, naming `step`, the time and `words` (how the
// user set it: "--mpi-timeout"), and every process exits with status 1.
// Rank 0 prints at once; rank 1 only if it is still there kMpiGrace later
// (rank 0 may be the process that stopped; otherwise mpirun has ended the
// job by then, rank 1 with it); the others leave silently after twice that.
inline constexpr double kMinMpiCallBound = 10, kMpiGrace = 3;
Watchdog bound_mpi_call(double seconds, const char* step, const std::string& words);

}  // namespace moonep::tools
