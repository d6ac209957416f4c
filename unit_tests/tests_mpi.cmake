# MPI worlds (and, with the portable planner, planning over them), run under
# mpirun with 1..4 processes. Each binary is one Catch2 session per process;
# the main initialises MPI and makes every rank agree on the exit code.
if(NOT MoonEP_HAVE_MPI)
  return()
endif()

add_library(moonep_test_main_mpi OBJECT test_main.cpp)
target_link_libraries(moonep_test_main_mpi PUBLIC moonep moonep_catch2)
target_include_directories(moonep_test_main_mpi PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(moonep_test_main_mpi PUBLIC MOONEP_TEST_WITH_MPI)

# Open MPI refuses more processes than cores (CI has 2) and root without
# being told.
set(_moonep_mpi_preflags ${MPIEXEC_PREFLAGS})
set(_moonep_mpi_env "")
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _moonep_mpiexec_version
                ERROR_QUIET TIMEOUT 20)
if(_moonep_mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND _moonep_mpi_preflags --oversubscribe)
  set(_moonep_mpi_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
endif()

# moonep_add_mpi_test(NAME MAXNP source...): NAME_np1 .. NAME_npMAXNP.
function(moonep_add_mpi_test name maxnp)
  add_executable(${name} ${ARGN} $<TARGET_OBJECTS:moonep_test_main_mpi>)
  target_link_libraries(${name} PRIVATE moonep moonep_catch2)
  target_compile_definitions(${name} PRIVATE MOONEP_TEST_WITH_MPI)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
  foreach(np RANGE 1 ${maxnp})
    add_test(NAME ${name}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${_moonep_mpi_preflags}
                     $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${name}_np${np} PROPERTIES TIMEOUT 120 PROCESSORS ${np}
                         ENVIRONMENT "${_moonep_mpi_env}" LABELS mpi)
  endforeach()
endfunction()

moonep_add_mpi_test(test_mpi_world 4 test_mpi_world.cpp)
if(EXISTS ${PROJECT_SOURCE_DIR}/include/moonep/planner.hpp)
  moonep_add_mpi_test(test_mpi_planner 4 test_mpi_planner.cpp)
endif()

# Open MPI on one node puts MPI_Win_allocate windows in shared memory (osc
# sm) too; forcing osc pt2pt sends every MPI_Put as a message, as across
# nodes. Only the rma world can run there.
if(_moonep_mpiexec_version MATCHES "Open MPI|OpenRTE")
  foreach(_t test_mpi_world test_mpi_planner)
    if(TARGET ${_t})
      add_test(NAME ${_t}_rma_pt2pt_np3
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3 ${_moonep_mpi_preflags} --mca osc pt2pt
                       $<TARGET_FILE:${_t}> ${MPIEXEC_POSTFLAGS})
      set_tests_properties(${_t}_rma_pt2pt_np3 PROPERTIES TIMEOUT 120 PROCESSORS 3 LABELS mpi
                           ENVIRONMENT "${_moonep_mpi_env};MOONEP_TEST_MPI_WORLDS=rma")
    endif()
  endforeach()
endif()
