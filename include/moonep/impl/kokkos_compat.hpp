// moonep/impl/kokkos_compat.hpp — the few places where Kokkos 3.4 (Debian)
// and Kokkos 4.x/5.x differ for the code MoonEP writes. Everything else in
// MoonEP is written against the common subset: labels first in parallel_*,
// no team-scan total overload (4.2+), no Kokkos::printf, Kokkos::ALL only.
#pragma once

#include <Kokkos_Core.hpp>

#include <string>

#ifndef KOKKOS_VERSION
#error "MoonEP: KOKKOS_VERSION is not defined; is Kokkos_Core.hpp too old?"
#endif

// Kokkos 3.x joins reducer values through volatile references (both
// overloads must exist); Kokkos 4.x dropped volatile joins and warns on them.
#if KOKKOS_VERSION < 40000
#define MOONEP_KOKKOS_VOLATILE_JOIN 1
#else
#define MOONEP_KOKKOS_VOLATILE_JOIN 0
#endif

namespace moonep::impl::compat {

// Execution-space fences take a label only from Kokkos 3.6 on.
template <class ExecutionSpace>
inline void fence(const ExecutionSpace& exec, const char* label) {
#if KOKKOS_VERSION >= 30600
  exec.fence(label);
#else
  (void)label;
  exec.fence();
#endif
}

// Team scratch: level 0 is fast (GPU shared memory) but small; tables whose
// size depends on the problem (R, E) move to level 1 when they grow.
inline constexpr std::size_t kScratchLevel0Bytes = 16 * 1024;
inline int scratch_level_for(std::size_t bytes) { return bytes <= kScratchLevel0Bytes ? 0 : 1; }

// A profiling region (visible in Kokkos Tools timelines) for the scope.
class ProfilingRegion {
 public:
  explicit ProfilingRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ProfilingRegion() { Kokkos::Profiling::popRegion(); }
  ProfilingRegion(const ProfilingRegion&) = delete;
  ProfilingRegion& operator=(const ProfilingRegion&) = delete;
};

// A view of uninitialised storage (the planner fills every byte it reads),
// the same spelling in Kokkos 3.4 and 4.x.
template <class View>
inline View uninitialized_view(const std::string& label, std::size_t n) {
  return View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n);
}

}  // namespace moonep::impl::compat
