// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/portable_instances.hpp — the portable phases' kernels are
// instantiated once, in libmoonep (src/portable/phase_instances.cpp), for
// every execution space the Kokkos it was built with enables; code that
// includes moonep/planner.hpp links to those instead of instantiating them.
//
// Why: nvcc miscompiles extended (KOKKOS_LAMBDA) lambdas of a function
// template that several translation units instantiate: on an H200, a
// program that planned with Planner<Kokkos::Cuda, PortablePhases> in its own
// code and through libmoonep's HostPlanner called a null pointer. One
// instantiation per program avoids it (and spares users the compile time).
// Execution spaces not listed here are instantiated where they are used, as
// any template.
//
// What must stay true: every function template of the phase headers that
// launches a kernel is named in MOONEP_PORTABLE_PHASE_FUNCTIONS.
#pragma once

#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/phase_a_local.hpp"
#include "moonep/impl/phase_b_root.hpp"
#include "moonep/impl/phase_c2_destinations.hpp"
#include "moonep/impl/phase_d_outputs.hpp"

// X(Exec, function) for each kernel-launching phase function.
#define MOONEP_PORTABLE_PHASE_FUNCTIONS(X, Exec) \
  X(Exec, validate_host)                         \
  X(Exec, validate_device)                       \
  X(Exec, validate_histogram)                    \
  X(Exec, validate_block_offsets)                \
  X(Exec, clear_slots)                           \
  X(Exec, stable_counting_sort)                  \
  X(Exec, clear_and_scatter)                     \
  X(Exec, phase_b_totals_and_moves)              \
  X(Exec, phase_b_expert_split)                  \
  X(Exec, phase_b_layout)                        \
  X(Exec, phase_b_pairs)                         \
  X(Exec, phase_b_moves_and_split)               \
  X(Exec, plan_root)                             \
  X(Exec, broadcast)                             \
  X(Exec, destinations_and_dedup)                \
  X(Exec, publication_runs)                      \
  X(Exec, rank_outputs_host)                     \
  X(Exec, rank_outputs_device)                   \
  X(Exec, rank_outputs)

#define MOONEP_PORTABLE_EXTERN_ONE(Exec, f) \
  extern template decltype(f<Exec>) f<Exec>;
#define MOONEP_PORTABLE_INSTANTIATE_ONE(Exec, f) \
  template decltype(f<Exec>) f<Exec>;

// X(Exec) for each execution space libmoonep instantiates the phases for:
// every one this Kokkos enables.
#define MOONEP_PORTABLE_FOR_EACH_SPACE(X) MOONEP_KOKKOS_FOR_EACH_EXECUTION_SPACE(X)

#define MOONEP_PORTABLE_EXTERN_SPACE(Exec) MOONEP_PORTABLE_PHASE_FUNCTIONS(MOONEP_PORTABLE_EXTERN_ONE, Exec)
#define MOONEP_PORTABLE_INSTANTIATE_SPACE(Exec) MOONEP_PORTABLE_PHASE_FUNCTIONS(MOONEP_PORTABLE_INSTANTIATE_ONE, Exec)

// (Inside the namespace: an explicit instantiation names the function
// unqualified.)
#ifndef MOONEP_PORTABLE_INSTANTIATING
namespace moonep::impl::portable {
MOONEP_PORTABLE_FOR_EACH_SPACE(MOONEP_PORTABLE_EXTERN_SPACE)
}  // namespace moonep::impl::portable
#endif
