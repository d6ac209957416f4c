// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Detecting an MPI launch from the environment (mpi_launch.hpp). No MPI
// call: the process that refuses must not join MPI at all, so that mpirun
// sees it exit non-zero and ends the job instead of leaving the others
// waiting in MPI_Init.
#include "mpi_launch.hpp"

#include <cstdlib>

#include "plan_options.hpp"

namespace moonep::tools {

MpiLaunch detect_mpi_launch() {
  // Only variables a launcher sets for the processes it starts (not, like
  // SLURM_NTASKS, for a whole allocation a batch script runs in).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    if (*end == '\0' && n > 0) return {static_cast<int>(n), std::string(name) + "=" + value};
  }
  return {};
}

void refuse_plain_run_under_mpi(bool world_is_mpi) {
  if (world_is_mpi) return;
  const MpiLaunch launch = detect_mpi_launch();
  if (launch.size <= 1) return;
  throw UsageError("this is one of " + std::to_string(launch.size) + " MPI processes (" + launch.source +
                   ") but was started without --world mpi, so it would plan every rank alone and write the "
                   "plan itself; give every process --world mpi, or run moonep-plan once without mpirun");
}

}  // namespace moonep::tools
