# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# mpi_bench: time per step over the MPI worlds next to the in-process world
# (run perf_tests/run_mpi_bench.sh). Included from perf_tests/CMakeLists.txt.
if(NOT MoonEP_HAVE_MPI)
  return()
endif()
add_executable(mpi_bench ${CMAKE_CURRENT_LIST_DIR}/mpi_bench.cpp)
target_link_libraries(mpi_bench PRIVATE moonep)
moonep_perf_csv(mpi_bench)
# The MPI layer's dispatch and combine next to MPI_Alltoallv (by hand; see
# perf_tests/README.md).
add_executable(mpi_layer_bench ${CMAKE_CURRENT_LIST_DIR}/mpi_layer_bench.cpp)
target_link_libraries(mpi_layer_bench PRIVATE moonep)

if(MoonEP_ENABLE_TESTS)
  # Smoke test: the benchmark still runs (tiny configuration, 2 processes).
  set(_flags ${MPIEXEC_PREFLAGS})
  set(_env "")
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _version ERROR_QUIET TIMEOUT 20)
  if(_version MATCHES "Open MPI|OpenRTE")
    list(APPEND _flags --oversubscribe)
    set(_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  endif()
  add_test(NAME perf_mpi_bench_smoke
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${_flags} $<TARGET_FILE:mpi_bench> --smoke
                   ${MPIEXEC_POSTFLAGS})
  set_tests_properties(perf_mpi_bench_smoke PROPERTIES LABELS "perf;mpi" TIMEOUT 120 PROCESSORS 2
                       ENVIRONMENT "${_env}")
  add_test(NAME perf_mpi_layer_bench_smoke
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${_flags} $<TARGET_FILE:mpi_layer_bench> --smoke
                   ${MPIEXEC_POSTFLAGS})
  set_tests_properties(perf_mpi_layer_bench_smoke PROPERTIES LABELS "perf;mpi" TIMEOUT 120 PROCESSORS 2
                       ENVIRONMENT "${_env}")
  add_test(NAME perf_mpi_bench_inprocess_smoke COMMAND mpi_bench --inprocess --ranks 2 --smoke)
  set_tests_properties(perf_mpi_bench_inprocess_smoke PROPERTIES LABELS perf TIMEOUT 60)
endif()
