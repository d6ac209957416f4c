// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --backend cuda in a build without CUDA: refused when the
// options are parsed (layer_options.cpp); this stands in for the backend.
#include "layer_run.hpp"
#include "moonep/error.hpp"

namespace moonep::tools {

LayerResults cuda_layer(const LayerInputs&, LayerDtype) {
  throw InputError("--backend cuda is not available in this build of moonep-layer (MoonEP was built without CUDA)");
}

}  // namespace moonep::tools
