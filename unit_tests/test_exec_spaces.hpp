// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The planners every test_portable_* test runs over, in the manner of Kokkos
// Kernels' TestExecSpace headers and ArborX's device-type lists: the
// portable phases on each execution space this Kokkos has enabled (Serial,
// OpenMP, Threads, Cuda, HIP, SYCL), and on Kokkos::Cuda also the CUDA specialization when
// MoonEP is built with CUDA. A test over PlannerVariants runs once per
// entry (TEMPLATE_LIST_TEST_CASE); PortableVariants leaves the CUDA
// specialization out, for tests of what only the portable phases do (the
// world's buffer, puts, Kokkos kernel labels, worlds spread over processes).
// PortableFormVariants (and PlannerVariants) add, on the execution spaces
// whose portable phases take their host form by default
// (portable::default_phase_form: Serial, OpenMP, Threads), the device form
// (Planner<Exec, impl::PortableDeviceForm>), so the device kernels (GPU
// block sizes, team scratch, the team scans, the step graph) are checked on
// every build, without a GPU (all but Phase C2's, which runs on device
// spaces only: phase_c2_destinations.hpp says why). PortableSubmissionVariants adds, on every
// execution space, the device form with its in-process step launched kernel
// by kernel rather than as one graph (Planner<Exec,
// impl::PortableDeviceSequence>: what a build without graphs, or a step
// with large team scratch, runs), for the tests of how a step is launched
// and of reuse.
#pragma once

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "moonep/planner.hpp"

// The execution spaces the lists below run over: every one this Kokkos
// enables or, with MOONEP_TEST_DEVICE_SPACES_ONLY (CMake option
// MoonEP_TEST_DEVICE_SPACES_ONLY: CI's cuda leg, which compiles the tests
// but has no GPU to run them), the device spaces alone, whose code only
// such a build compiles (the host spaces' is the other builds').
#if defined(MOONEP_TEST_DEVICE_SPACES_ONLY)
#define MOONEP_TEST_FOR_EACH_SPACE(X) MOONEP_KOKKOS_IF_CUDA(X) MOONEP_KOKKOS_IF_HIP(X) MOONEP_KOKKOS_IF_SYCL(X)
#else
#define MOONEP_TEST_FOR_EACH_SPACE(X) MOONEP_KOKKOS_FOR_EACH_EXECUTION_SPACE(X)
#endif

namespace moonep::test {

// One Planner<Exec, PortablePhases> per execution space Kokkos enables
// (MOONEP_KOKKOS_FOR_EACH_EXECUTION_SPACE: Serial, OpenMP, Threads, Cuda,
// HIP, SYCL, whichever this Kokkos has).
template <class Exec>
using DeviceFormVariant = typename std::conditional<
    std::is_same<impl::portable::default_phase_form_t<Exec>, impl::portable::HostForm>::value,
    std::tuple<Planner<Exec, impl::PortableDeviceForm>>, std::tuple<>>::type;
#define MOONEP_TEST_PORTABLE_VARIANT(Exec) , std::declval<std::tuple<Planner<Exec, PortablePhases>>>()
#define MOONEP_TEST_DEVICE_FORM_VARIANT(Exec) , std::declval<DeviceFormVariant<Exec>>()
#define MOONEP_TEST_DEVICE_SEQUENCE_VARIANT(Exec) , std::declval<std::tuple<Planner<Exec, impl::PortableDeviceSequence>>>()
using PortableVariants = decltype(std::tuple_cat(
    std::declval<std::tuple<>>() MOONEP_TEST_FOR_EACH_SPACE(MOONEP_TEST_PORTABLE_VARIANT)));
using DeviceFormVariants = decltype(std::tuple_cat(
    std::declval<std::tuple<>>() MOONEP_TEST_FOR_EACH_SPACE(MOONEP_TEST_DEVICE_FORM_VARIANT)));
using PortableFormVariants = decltype(std::tuple_cat(std::declval<PortableVariants>(), std::declval<DeviceFormVariants>()));
using DeviceSequenceVariants = decltype(std::tuple_cat(
    std::declval<std::tuple<>>() MOONEP_TEST_FOR_EACH_SPACE(MOONEP_TEST_DEVICE_SEQUENCE_VARIANT)));
using PortableSubmissionVariants =
    decltype(std::tuple_cat(std::declval<PortableFormVariants>(), std::declval<DeviceSequenceVariants>()));
#undef MOONEP_TEST_PORTABLE_VARIANT
#undef MOONEP_TEST_DEVICE_FORM_VARIANT
#undef MOONEP_TEST_DEVICE_SEQUENCE_VARIANT

#if MOONEP_HAVE_CUDA_SPECIALIZATION
using CudaSpecVariants = std::tuple<Planner<Kokkos::Cuda, CudaSpecialization>>;
#else
using CudaSpecVariants = std::tuple<>;
#endif

using PlannerVariants = decltype(std::tuple_cat(std::declval<PortableFormVariants>(), std::declval<CudaSpecVariants>()));
// PlannerVariants and the device form's sequence.
using ReuseVariants = decltype(std::tuple_cat(std::declval<PlannerVariants>(), std::declval<DeviceSequenceVariants>()));

// "portable on Serial", "portable (device form) on Serial", "portable
// (device form, sequence) on Serial", "cuda on Cuda": for INFO lines.
template <class P>
std::string variant_name() {
  const bool forced = std::is_same<typename P::path, impl::PortableDeviceForm>::value;
  const bool sequence = std::is_same<typename P::path, impl::PortableDeviceSequence>::value;
  return std::string(P::path_name()) + (forced ? " (device form)" : sequence ? " (device form, sequence)" : "") +
         " on " + P::execution_space::name();
}

}  // namespace moonep::test
