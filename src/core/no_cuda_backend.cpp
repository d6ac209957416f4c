// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Stands in for src/cuda_specializations when MoonEP is built without CUDA.
#include "backend_factories.hpp"
#include "moonep/error.hpp"

namespace moonep::impl {

bool cuda_backend_available(std::string* why_not) {
  if (why_not) *why_not = "MoonEP was built without CUDA (configure with MoonEP_ENABLE_CUDA=ON)";
  return false;
}

std::unique_ptr<HostPlanner> make_cuda_host_planner(const Config&) {
  throw RuntimeError("MoonEP was built without CUDA");
}

}  // namespace moonep::impl
