// Private: the hooks through which each backend directory registers its
// HostPlanner with the registry in backends.cpp. A backend that is not
// compiled in is represented by src/core/unavailable_backends.cpp.
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
