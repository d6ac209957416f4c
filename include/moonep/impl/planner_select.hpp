// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/planner_select.hpp — which implementation Planner<Exec, Path>
// (moonep/planner.hpp) is, chosen at compile time the way Kokkos Kernels
// chooses its TPL specializations: an availability trait per execution
// space, and a selector that maps (Exec, Path) to one implementation class.
//
//   Path                      Kokkos::Cuda, MoonEP built with CUDA   any other Exec
//   Automatic (the default)   CudaKernelPlanner (one launch)           PortablePlanner<Exec>
//   PortablePhases            PortablePlanner<Kokkos::Cuda>          PortablePlanner<Exec>
//   CudaSpecialization        CudaKernelPlanner                        compile error
//   OnGpuWorld                GpuWorldPlanner                    compile error
//   impl::PortableDeviceForm  PortablePlanner<Kokkos::Cuda>          PortablePlanner<Exec, DeviceForm>
//   impl::PortableDeviceSequence  PortablePlanner<Exec, DeviceForm, StepSequence> on every Exec
//
// The portable phases' form (host or device kernels) is a compile-time
// trait of the execution space too (portable::default_phase_form,
// moonep/impl/portable_types.hpp); impl::PortableDeviceForm forces the
// device form on a host space (for the tests). So is how an in-process
// step is submitted (portable::default_step_submission: one graph of the
// device form's kernels where Kokkos has graphs);
// impl::PortableDeviceSequence forces the device form's kernels launched
// one by one (for the tests: the sequence a graph replaces).
//
// Nothing is decided at run time, so a Planner holds (and allocates) only
// what its one path uses.
#pragma once

#include <type_traits>

#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/portable_types.hpp"
#include "moonep/moonep_config.hpp"

namespace moonep {

// The path tags: the second template argument of moonep::Planner.
// Automatic: the fastest implementation for the execution space.
struct Automatic {};
// PortablePhases: the Kokkos phases (team scans, reductions, scratch) on any
// execution space, Kokkos::Cuda included: to compare with the CUDA
// specialization, or for worlds it does not plan.
struct PortablePhases {};
// CudaSpecialization: the one-cooperative-launch CUDA kernel; only for
// Kokkos::Cuda in a MoonEP built with CUDA (a compile error elsewhere).
struct CudaSpecialization {};
// OnGpuWorld: the CUDA kernel over a moonep::cuda::GpuWorld
// (moonep/gpu_world.hpp): one cooperative launch per rank, each on its own
// stream, instead of one launch of virtual ranks. Its world is the
// GpuWorld, not a World; the same conditions as CudaSpecialization.
struct OnGpuWorld {};

namespace impl {

// The portable phases in their device form on any execution space, the
// host ones included (their default there is the host form): what the
// tests use to run the device kernels without a GPU. Not part of the API.
struct PortableDeviceForm {};
// The device form with an in-process step launched kernel by kernel rather
// than as one graph, on any execution space. Not part of the API.
struct PortableDeviceSequence {};

// True where MoonEP has a CUDA specialization for the execution space.
template <class ExecutionSpace>
struct cuda_specialization_available : std::false_type {};
#if defined(KOKKOS_ENABLE_CUDA) && MOONEP_HAVE_CUDA
#define MOONEP_HAVE_CUDA_SPECIALIZATION 1
template <>
struct cuda_specialization_available<Kokkos::Cuda> : std::true_type {};
#else
#define MOONEP_HAVE_CUDA_SPECIALIZATION 0
#endif

template <class ExecutionSpace, class Path>
struct uses_cuda_specialization {
  static_assert(std::is_same<Path, Automatic>::value || std::is_same<Path, PortablePhases>::value ||
                    std::is_same<Path, CudaSpecialization>::value || std::is_same<Path, OnGpuWorld>::value ||
                    std::is_same<Path, PortableDeviceForm>::value ||
                    std::is_same<Path, PortableDeviceSequence>::value,
                "moonep::Planner's Path is moonep::Automatic, moonep::PortablePhases, moonep::CudaSpecialization "
                "or moonep::OnGpuWorld");
  static_assert(!std::is_same<Path, CudaSpecialization>::value ||
                    cuda_specialization_available<ExecutionSpace>::value,
                "moonep::CudaSpecialization needs ExecutionSpace = Kokkos::Cuda and MoonEP built with CUDA "
                "(MoonEP_ENABLE_CUDA=ON) against a Kokkos with the CUDA backend");
  static_assert(!std::is_same<Path, OnGpuWorld>::value || cuda_specialization_available<ExecutionSpace>::value,
                "moonep::OnGpuWorld needs ExecutionSpace = Kokkos::Cuda and MoonEP built with CUDA "
                "(MoonEP_ENABLE_CUDA=ON) against a Kokkos with the CUDA backend");
  static constexpr bool value = !std::is_same<Path, PortablePhases>::value &&
                                !std::is_same<Path, PortableDeviceForm>::value &&
                                !std::is_same<Path, PortableDeviceSequence>::value &&
                                cuda_specialization_available<ExecutionSpace>::value;
};

template <class ExecutionSpace, class Form = portable::default_phase_form_t<ExecutionSpace>,
          class Submission = portable::default_step_submission_t<ExecutionSpace, Form>>
class PortablePlanner;  // moonep/impl/portable_planner.hpp
class CudaKernelPlanner;  // moonep/impl/cuda_kernel_planner.hpp (CUDA builds only)
class GpuWorldPlanner;  // moonep/impl/gpu_world_planner.hpp (CUDA builds only)

template <class ExecutionSpace, bool kCuda>
struct PlannerImplOf {
  using type = PortablePlanner<ExecutionSpace>;
};
#if MOONEP_HAVE_CUDA_SPECIALIZATION
template <>
struct PlannerImplOf<Kokkos::Cuda, true> {
  using type = CudaKernelPlanner;
};
#endif

template <class ExecutionSpace, class Path>
struct PlannerImplFor {
  using type = typename PlannerImplOf<ExecutionSpace, uses_cuda_specialization<ExecutionSpace, Path>::value>::type;
};
#if MOONEP_HAVE_CUDA_SPECIALIZATION
template <>
struct PlannerImplFor<Kokkos::Cuda, OnGpuWorld> {
  using type = GpuWorldPlanner;
};
#endif

template <class ExecutionSpace>
struct PlannerImplFor<ExecutionSpace, PortableDeviceForm> {
  using type = PortablePlanner<ExecutionSpace, portable::DeviceForm>;
};
template <class ExecutionSpace>
struct PlannerImplFor<ExecutionSpace, PortableDeviceSequence> {
  using type = PortablePlanner<ExecutionSpace, portable::DeviceForm, portable::StepSequence>;
};

template <class ExecutionSpace, class Path>
using planner_impl_t = typename PlannerImplFor<ExecutionSpace, Path>::type;

}  // namespace impl
}  // namespace moonep
