// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --world mpi in a build without MPI: a clear refusal.
#include "layer_run.hpp"
#include "moonep/error.hpp"

namespace moonep::tools {

int run_layer_mpi(const LayerOptions&) {
  throw InputError("--world mpi is not available in this build of moonep-layer (MoonEP was built without MPI)");
}

}  // namespace moonep::tools
