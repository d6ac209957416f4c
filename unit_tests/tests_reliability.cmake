# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Issue 19 (reliability): special output paths, hostile input, memory
# limits, MPI agreement, and a fuzz smoke test of moonep-plan. The tests
# that run moonep-plan find it, and the CLI test problems, through
# compile definitions.
if(NOT TARGET moonep-plan)
  return()
endif()

add_library(moonep_run_process OBJECT ${CMAKE_CURRENT_LIST_DIR}/reliability/run_process.cpp)
target_compile_features(moonep_run_process PUBLIC cxx_std_17)

# moonep_add_cli_test(NAME source...): a Catch2 binary that may run moonep-plan.
function(moonep_add_cli_test name)
  moonep_add_test(${name} ${ARGN} $<TARGET_OBJECTS:moonep_run_process>)
  target_compile_definitions(${name} PRIVATE
    MOONEP_PLAN_EXE="$<TARGET_FILE:moonep-plan>"
    MOONEP_CLI_DIR="${CMAKE_CURRENT_LIST_DIR}/cli")
  add_dependencies(${name} moonep-plan)
endfunction()

moonep_add_cli_test(test_output_paths test_output_paths.cpp)
moonep_add_cli_test(test_error_lines test_error_lines.cpp)
moonep_add_cli_test(test_cli_launch test_cli_launch.cpp)
moonep_add_cli_test(test_memory_limit test_memory_limit.cpp)
moonep_add_cli_test(test_output_sets test_output_sets.cpp)

# ---- MPI: worlds that disagree or wait for a peer that does not come
# (library), and moonep-plan processes started differently (CLI). Uses the
# MPI test helper of tests_mpi.cmake when it is there.
if(MoonEP_HAVE_MPI AND COMMAND moonep_add_mpi_test)
  moonep_add_mpi_test(test_mpi_timeouts 3 test_mpi_timeouts.cpp)
endif()
# moonep-plan under mpirun, started differently per process (MPMD command
# lines). Open MPI only: it uses --oversubscribe, -q and -x.
if(MoonEP_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _rel_mpiexec_version
                  ERROR_QUIET TIMEOUT 20)
  if(_rel_mpiexec_version MATCHES "Open MPI|OpenRTE")
    moonep_add_cli_test(test_mpi_cli_agreement test_mpi_cli_agreement.cpp)
    target_compile_definitions(test_mpi_cli_agreement PRIVATE MOONEP_MPIEXEC="${MPIEXEC_EXECUTABLE}")
    # One processor, not its 4 ranks': its processes spend the minute it
    # takes waiting out --mpi-timeout cases (its bounds allow 4x and more),
    # so CTest may run other tests beside it instead of leaving the other
    # core idle. COST starts it first: started last (its number, in a
    # fresh build with no timings yet), only multi-rank MPI tests were left,
    # which cannot share the cores with it, and nothing was gained.
    set_tests_properties(test_mpi_cli_agreement PROPERTIES TIMEOUT 600 PROCESSORS 1 COST 1000 LABELS mpi)
  endif()
endif()
# The fuzz smoke test in two shards of one mutant sequence, which CTest
# runs side by side (-j): under the sanitizers the whole sequence was the
# suite's longest test (a minute).
moonep_add_cli_test(test_fuzz_cli test_fuzz_cli.cpp)
set_tests_properties(test_fuzz_cli PROPERTIES TIMEOUT 600 LABELS fuzz ENVIRONMENT MOONEP_FUZZ_SHARD=0/2)
add_test(NAME test_fuzz_cli_shard2 COMMAND test_fuzz_cli)
set_tests_properties(test_fuzz_cli_shard2 PROPERTIES TIMEOUT 600 LABELS fuzz ENVIRONMENT MOONEP_FUZZ_SHARD=1/2)
