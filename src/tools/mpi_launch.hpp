// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: was this process started as one of several MPI
// processes (mpirun, mpiexec, srun)? Such a process without --world mpi
// would plan every rank alone and write the plan itself, once per process,
// while any process that has --world mpi waits for it in MPI_Init.
#pragma once

#include <string>

namespace moonep::tools {

struct MpiLaunch {
  int size = 0;        // processes in the launch; 0 = not launched by MPI
  std::string source;  // the variable that said so, "OMPI_COMM_WORLD_SIZE=4"
};

// Read from the launchers' environment variables: OMPI_COMM_WORLD_SIZE
// (Open MPI's mpirun), PMI_SIZE (MPICH's Hydra, Intel MPI, srun with
// PMI-2), MV2_COMM_WORLD_SIZE (MVAPICH2).
MpiLaunch detect_mpi_launch();

// Throws UsageError (exit 2) when this process is one of several MPI
// processes and `world_is_mpi` is false.
void refuse_plain_run_under_mpi(bool world_is_mpi);

}  // namespace moonep::tools
