// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --world gpu under an MPI launch in a build without MPI (or
// without CUDA, where --world gpu is refused when the options are parsed):
// a clear error instead of every process running every rank alone.
#include <string>

#include "layer_run.hpp"
#include "moonep/error.hpp"
#include "mpi_launch.hpp"

namespace moonep::tools {

int run_layer_gpu_mpi(const LayerOptions&) {
  throw RuntimeError("this is one of " + std::to_string(detect_mpi_launch().size) +
                     " MPI processes, but this build of moonep-layer has no MPI, so --world gpu cannot run one "
                     "process per rank (run moonep-layer --world gpu once without mpirun, or rebuild MoonEP with "
                     "-DMoonEP_ENABLE_MPI=ON)");
}

}  // namespace moonep::tools
