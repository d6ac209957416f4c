// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --world gpu in a build without CUDA: refused when the
// options are parsed (layer_options.cpp); this stands in for the world.
#include "layer_run.hpp"
#include "moonep/error.hpp"

namespace moonep::tools {

LayerResults gpu_world_layer(const LayerInputs&, LayerDtype, const std::vector<int>&) {
  throw InputError("--world gpu is not available in this build of moonep-layer (MoonEP was built without CUDA)");
}

}  // namespace moonep::tools
