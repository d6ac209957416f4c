// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Custom Catch2 main: Kokkos (and MPI, when a test binary needs it) must be
// initialised around the whole session, not per test. The session itself
// is catch2_session.cpp's.
#include <Kokkos_Core.hpp>

#include "catch2_session.hpp"

#ifdef MOONEP_TEST_WITH_MPI
#include <mpi.h>
#endif

int main(int argc, char* argv[]) {
#ifdef MOONEP_TEST_WITH_MPI
  MPI_Init(&argc, &argv);
#endif
  int result = 0;
  Kokkos::initialize(argc, argv);
  { result = moonep::test::run_catch_session(argc, argv); }
  Kokkos::finalize();
#ifdef MOONEP_TEST_WITH_MPI
  // Every rank must agree on failure, or mpirun reports only the loudest.
  int any = 0;
  MPI_Allreduce(&result, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  result = any;
  MPI_Finalize();
#endif
  return result;
}
