// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/kokkos_compat.hpp — the few places where Kokkos 3.4 (Debian)
// and Kokkos 4.x/5.x differ for the code MoonEP writes. Everything else in
// MoonEP is written against the common subset: labels first in parallel_*,
// no team-scan total overload (4.2+), no Kokkos::printf, Kokkos::ALL only.
#pragma once

#include <Kokkos_Core.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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

// MOONEP_KOKKOS_FOR_EACH_EXECUTION_SPACE(X): X(space) for every execution
// space this Kokkos enables, in the manner of ArborX's device-type list:
// the host spaces Serial, OpenMP and Threads, and the device spaces Cuda,
// HIP and SYCL (under their Kokkos 4 names; Kokkos 3 had HIP, and Kokkos
// before 4.5 SYCL, in Kokkos::Experimental). libmoonep instantiates the
// portable phases for each (moonep/impl/portable_instances.hpp) and the
// portable tests run over each (unit_tests/test_exec_spaces.hpp).
#if defined(KOKKOS_ENABLE_SERIAL)
#define MOONEP_KOKKOS_IF_SERIAL(X) X(Kokkos::Serial)
#else
#define MOONEP_KOKKOS_IF_SERIAL(X)
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
#define MOONEP_KOKKOS_IF_OPENMP(X) X(Kokkos::OpenMP)
#else
#define MOONEP_KOKKOS_IF_OPENMP(X)
#endif
#if defined(KOKKOS_ENABLE_THREADS)
#define MOONEP_KOKKOS_IF_THREADS(X) X(Kokkos::Threads)
#else
#define MOONEP_KOKKOS_IF_THREADS(X)
#endif
#if defined(KOKKOS_ENABLE_CUDA)
#define MOONEP_KOKKOS_IF_CUDA(X) X(Kokkos::Cuda)
#else
#define MOONEP_KOKKOS_IF_CUDA(X)
#endif
#if defined(KOKKOS_ENABLE_HIP) && KOKKOS_VERSION >= 40000
#define MOONEP_KOKKOS_IF_HIP(X) X(Kokkos::HIP)
#elif defined(KOKKOS_ENABLE_HIP)
#define MOONEP_KOKKOS_IF_HIP(X) X(Kokkos::Experimental::HIP)
#else
#define MOONEP_KOKKOS_IF_HIP(X)
#endif
#if defined(KOKKOS_ENABLE_SYCL) && KOKKOS_VERSION >= 40500
#define MOONEP_KOKKOS_IF_SYCL(X) X(Kokkos::SYCL)
#elif defined(KOKKOS_ENABLE_SYCL)
#define MOONEP_KOKKOS_IF_SYCL(X) X(Kokkos::Experimental::SYCL)
#else
#define MOONEP_KOKKOS_IF_SYCL(X)
#endif
#define MOONEP_KOKKOS_FOR_EACH_EXECUTION_SPACE(X)                                                   \
  MOONEP_KOKKOS_IF_SERIAL(X) MOONEP_KOKKOS_IF_OPENMP(X) MOONEP_KOKKOS_IF_THREADS(X) MOONEP_KOKKOS_IF_CUDA(X) \
  MOONEP_KOKKOS_IF_HIP(X) MOONEP_KOKKOS_IF_SYCL(X)

// Kokkos::Experimental::Graph (a DAG of kernels built once and submitted
// as one unit: on Kokkos::Cuda one cudaGraphLaunch; HIP and SYCL where
// Kokkos has native graphs for them; elsewhere Kokkos runs the nodes in
// order at submit). Its node kinds, 3.4 through the development line of
// 2025-06: then_parallel_for, then_parallel_reduce (into a View); 4.6 adds
// then() (one call), the development line native captures (cuda_capture,
// ...); no scan node in any of them, and Kokkos Tools see no kernel of a
// graph (no begin/end callback for its nodes). Kokkos has had graphs since
// 3.3 (<Kokkos_Graph.hpp>, which Kokkos_Core.hpp does not include before
// 4.x), but before 4.5 a graph is submitted only on the instance it was
// built on, and has no instantiate(). MoonEP builds its step graph on an
// instance of its own (on Kokkos::Cuda every team kernel of a graph holds
// one of its instance's ten team scratch pools for the graph's lifetime,
// and a kernel that finds none free spins: two planners' graphs on one
// instance would hang) and submits it on the caller's, so it uses graphs
// from 4.5 on.
#if KOKKOS_VERSION >= 40500
#define MOONEP_KOKKOS_HAS_GRAPH 1
#include <Kokkos_Graph.hpp>
#else
#define MOONEP_KOKKOS_HAS_GRAPH 0
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

// A host copy of a rank-1 view, in a std::vector.
//
// MoonEP's code declares no local View without a value (to be assigned
// later, or never): with Kokkos' mdspan-based View (the default from Kokkos
// 5.0; Kokkos_ENABLE_IMPL_VIEW_LEGACY=OFF from 4.6) GCC 12 leaves such a
// View's allocation tracker zeroed instead of marked "no allocation", so
// destroying or assigning over it dereferences a null record, at -O0 as at
// -O2 (kokkos/kokkos#7464; clang 14 is unaffected). Copies that may or may
// not be needed go to vectors instead.
template <class View>
inline std::vector<typename View::non_const_value_type> host_vector(const View& view) {
  std::vector<typename View::non_const_value_type> out(view.extent(0));
  Kokkos::deep_copy(
      Kokkos::View<typename View::non_const_value_type*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.data(),
                                                                                                  out.size()),
      view);
  return out;
}

}  // namespace moonep::impl::compat
