// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the hooks through which each backend directory registers its
// HostPlanner with the registry in backends.cpp. The portable backend is
// always compiled (src/portable/host_planner.cpp); the CUDA backend is
// src/cuda_specializations/cuda_backend.cpp, or src/core/no_cuda_backend.cpp
// (which says why it is not available) in a build without CUDA.
#pragma once

#include <memory>
#include <string>

#include "moonep/backend.hpp"

namespace moonep::impl {

bool portable_backend_available(std::string* why_not);
std::unique_ptr<HostPlanner> make_portable_host_planner(const Config& config);

bool cuda_backend_available(std::string* why_not);
std::unique_ptr<HostPlanner> make_cuda_host_planner(const Config& config);

}  // namespace moonep::impl
