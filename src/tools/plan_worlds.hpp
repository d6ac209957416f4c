// Private to moonep-plan: the ways of running the ranks (--world). Each
// returns the process exit status and throws UsageError, InputError or
// RuntimeError, which main() turns into one line on standard error.
#pragma once

#include "plan_options.hpp"

namespace moonep::tools {

// Every rank planned in this process (virtual ranks); plain C++ + Kokkos.
int run_inprocess_world(const PlanOptions& options, const char* program);

// One MPI process per rank (mpirun -np R moonep-plan --world mpi ...).
// mpi_world.cpp when MoonEP is built with MPI worlds, else no_mpi_world.cpp.
int run_mpi_world(const PlanOptions& options, const char* program);

}  // namespace moonep::tools
