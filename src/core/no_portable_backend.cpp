// Temporary stand-in until src/portable registers the Kokkos planner.
#include "backend_factories.hpp"
#include "moonep/error.hpp"

namespace moonep::impl {

bool portable_backend_available(std::string* why_not) {
  if (why_not) *why_not = "the portable planner is not built yet";
  return false;
}

std::unique_ptr<HostPlanner> make_portable_host_planner(const Config&) {
  throw RuntimeError("the portable planner is not built yet");
}

}  // namespace moonep::impl
