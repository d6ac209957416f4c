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
moonep_add_cli_test(test_memory_limit test_memory_limit.cpp)
