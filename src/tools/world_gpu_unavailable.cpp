// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --world gpu in a build without CUDA: a clear error instead of the world.
#include "moonep/error.hpp"
#include "plan_worlds.hpp"

namespace moonep::tools {

int run_gpu_world(const PlanOptions&, const char*) {
  throw RuntimeError("--world gpu needs MoonEP built with CUDA (configure with MoonEP_ENABLE_CUDA=ON)");
}

}  // namespace moonep::tools
