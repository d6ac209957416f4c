// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: the ways of running the ranks (--world). Each
// returns the process exit status and throws UsageError, InputError or
// RuntimeError, which main() turns into one line on standard error.
#pragma once

#include <functional>
#include <memory>

#include "moonep/backend.hpp"
#include "plan_options.hpp"

namespace moonep::tools {

// Every rank planned in this process (virtual ranks); plain C++ + Kokkos.
int run_inprocess_world(const PlanOptions& options, const char* program);

// What run_inprocess_world does, with the planner `make` builds (inside
// the Kokkos session) for `backend`: load, steps, plan file, summary.
int run_in_this_process(const PlanOptions& options, const char* program, Backend backend,
                        const std::function<std::unique_ptr<HostPlanner>(const Config&)>& make);

// One launch per rank, each on its GPU (moonep::cuda::GpuWorld):
// world_gpu.cpp when MoonEP is built with CUDA, else world_gpu_unavailable.cpp.
// Under an MPI launch of several processes it runs run_mpi_gpu_world.
int run_gpu_world(const PlanOptions& options, const char* program);

// --world gpu with one MPI process per rank (mpirun -np R moonep-plan
// --world gpu ...; make_mpi_gpu_world): world_gpu_mpi.cpp when MoonEP is
// built with CUDA and MPI, else world_gpu_mpi_unavailable.cpp (CUDA builds only).
int run_mpi_gpu_world(const PlanOptions& options, const char* program);

// One MPI process per rank (mpirun -np R moonep-plan --world mpi ...).
// world_mpi.cpp when MoonEP is built with MPI worlds, else world_mpi_unavailable.cpp.
int run_mpi_world(const PlanOptions& options, const char* program);

}  // namespace moonep::tools
