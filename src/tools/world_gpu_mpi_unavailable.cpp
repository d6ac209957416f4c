// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --world gpu under an MPI launch in a CUDA build without MPI: a clear
// error instead of every process planning every rank alone.
#include <string>

#include "moonep/error.hpp"
#include "mpi_launch.hpp"
#include "plan_worlds.hpp"

namespace moonep::tools {

int run_mpi_gpu_world(const PlanOptions&, const char*) {
  throw RuntimeError("this is one of " + std::to_string(detect_mpi_launch().size) +
                     " MPI processes, but this build of moonep-plan has no MPI, so --world gpu cannot run one "
                     "process per rank (run moonep-plan --world gpu once without mpirun, or rebuild MoonEP with "
                     "-DMoonEP_ENABLE_MPI=ON)");
}

}  // namespace moonep::tools
