// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --world mpi in a build without MPI worlds.
#include "moonep/error.hpp"
#include "plan_worlds.hpp"

namespace moonep::tools {

int run_mpi_world(const PlanOptions&, const char*) {
  throw RuntimeError(
      "--world mpi is not available: this build of moonep-plan has no MPI world "
      "(use --world inprocess, or rebuild MoonEP with MPI: -DMoonEP_ENABLE_MPI=ON)");
}

}  // namespace moonep::tools
