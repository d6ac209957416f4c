# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
# Up to 4 processes share the cores here, each with a Kokkos OpenMP pool
# where Kokkos has OpenMP. Threads that spin while they wait (OpenMP's
# default) then take the cores from the ranks they wait for: with Kokkos
# 4.6 OpenMP and OMP_NUM_THREADS=2 on 2 cores, test_mpi_planner_np4 took
# 49 s instead of 0.7 s. Passive waiting keeps the threads (the ranks still
# plan with OpenMP) and takes 1.6 s. OMP_NUM_THREADS=1 would be as fast but
# would no longer test OpenMP inside MPI ranks.
set(_moonep_mpi_env OMP_WAIT_POLICY=passive)
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _moonep_mpiexec_version
                ERROR_QUIET TIMEOUT 20)
if(_moonep_mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND _moonep_mpi_preflags --oversubscribe)
  list(APPEND _moonep_mpi_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
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
moonep_add_mpi_test(test_mpi_planner 4 test_mpi_planner.cpp)
moonep_add_mpi_test(test_mpi_layer 4 test_mpi_layer.cpp)
moonep_add_mpi_test(test_mpi_expert_copies 4 test_mpi_expert_copies.cpp)
moonep_add_mpi_test(test_mpi_moe_layer 4 test_mpi_moe_layer.cpp)

# Open MPI on one node backs MPI_Win_allocate windows with shared memory
# (osc rdma over vader); forcing osc pt2pt sends every MPI_Put as a message,
# as across nodes. Only the rma world can run there. These runs also cover
# the rma world on split communicators, which the default runs skip with
# Open MPI < 5 (its osc rdma lets disjoint communicators' windows collide:
# open-mpi/ompi#9492).
if(_moonep_mpiexec_version MATCHES "Open MPI|OpenRTE")
  foreach(_t test_mpi_world test_mpi_planner test_mpi_layer test_mpi_expert_copies test_mpi_moe_layer)
    if(TARGET ${_t})
      add_test(NAME ${_t}_rma_pt2pt_np4
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${_moonep_mpi_preflags} --mca osc pt2pt
                       $<TARGET_FILE:${_t}> ${MPIEXEC_POSTFLAGS})
      set_tests_properties(${_t}_rma_pt2pt_np4 PROPERTIES TIMEOUT 120 PROCESSORS 4 LABELS mpi
                           ENVIRONMENT "${_moonep_mpi_env};MOONEP_TEST_MPI_WORLDS=rma")
    endif()
  endforeach()
endif()

# moonep_mpirun_args(OUT NP): mpirun's arguments before a command line run
# as a user runs it ("a|b|c", the CLI runners' lists): NP processes, the
# flags above, and -q (Open MPI's mpirun itself stays quiet).
function(moonep_mpirun_args out np)
  string(REPLACE ";" "|" _pre "${_moonep_mpi_preflags}")
  set(_args "${MPIEXEC_NUMPROC_FLAG}|${np}")
  if(_pre)
    set(_args "${_args}|${_pre}")
  endif()
  if(_moonep_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(_args "${_args}|-q")
  endif()
  set(${out} "${_args}" PARENT_SCOPE)
endfunction()

# ---- moonep-plan --world mpi, run as a user runs it (mpirun -q: mpirun
# itself stays quiet; the runner ignores stderr lines that are not
# moonep-plan's, such as Kokkos' OpenMP warning of every rank). Reuses the
# CLI test runner and plan checker of the io tests (unit_tests/cli).
set(_moonep_cli_runner ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_cli_case.cmake)
set(_checker moonep_check_plan_file)
if(TARGET moonep-plan AND TARGET ${_checker})
  set(_problems ${CMAKE_CURRENT_SOURCE_DIR}/cli/problems)
  set(_work ${CMAKE_CURRENT_BINARY_DIR}/mpi_cli_work)
  # moonep_mpi_cli_test(NAME NP WORLD ARGS a|b|c [run_cli_case keys...]):
  # mpirun -np NP moonep-plan --world mpi ARGS, with the MPI world WORLD;
  # WORLD gpu: mpirun -np NP moonep-plan --world gpu ARGS (one process per
  # rank over a GPU world), skipped where no GPU is visible.
  function(moonep_mpi_cli_test name np world)
    cmake_parse_arguments(T "" "ARGS;EXPECT_RC;EXPECT_STDERR;EXPECT_STDOUT;OUTPUT;OUTPUT_MODE;CHECK" "" ${ARGN})
    moonep_mpirun_args(_args ${np})
    set(_world_option mpi)
    set(_env "${_moonep_mpi_env};MOONEP_MPI_WORLD=${world}")
    if(world STREQUAL "gpu")
      set(_world_option gpu)
      set(_env "${_moonep_mpi_env}")
    endif()
    set(_args "${_args}|$<TARGET_FILE:moonep-plan>|--world|${_world_option}|${T_ARGS}")
    set(defs -DEXE=${MPIEXEC_EXECUTABLE} "-DARGS=${_args}" -DWORK=${_work}/${name} -DEXPECT_RC=${T_EXPECT_RC})
    foreach(key EXPECT_STDERR EXPECT_STDOUT OUTPUT OUTPUT_MODE CHECK)
      if(DEFINED T_${key})
        list(APPEND defs "-D${key}=${T_${key}}")
      endif()
    endforeach()
    add_test(NAME mpi_cli_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${_moonep_cli_runner})
    set_tests_properties(mpi_cli_${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np} LABELS mpi
                         ENVIRONMENT "${_env}")
    if(world STREQUAL "gpu")
      # The one error line of a machine without a GPU (world_gpu_mpi.cpp).
      set_tests_properties(mpi_cli_${name} PROPERTIES
                           SKIP_REGULAR_EXPRESSION "moonep-plan: error: --world gpu: no (usable )?CUDA device")
    endif()
  endfunction()

  # Problem files: the plan rank 0 writes is plan_reference's.
  foreach(_world shared rma)
    foreach(_p good good_tpe good_ragged)
      moonep_mpi_cli_test(plan_${_p}_${_world} 4 ${_world}
        ARGS "--input|${_problems}/${_p}.json|--output|${_work}/plan_${_p}_${_world}/plan.json"
        EXPECT_RC 0 OUTPUT ${_work}/plan_${_p}_${_world}/plan.json OUTPUT_MODE created
        CHECK "$<TARGET_FILE:${_checker}>|${_problems}/${_p}.json|${_work}/plan_${_p}_${_world}/plan.json")
    endforeach()
  endforeach()
  # Synthetic steps at np 1..3 (auto world), with the summary on rank 0.
  foreach(_np 1 2 3)
    math(EXPR _e "16 * ${_np}")
    set(_d ${_work}/synthetic_np${_np})
    moonep_mpi_cli_test(synthetic_np${_np} ${_np} auto
      ARGS "--ranks|${_np}|--experts|${_e}|--topk|4|--tokens|64|--copy-slots|2|--token-padding|8|--imbalance|2|--steps|2|--save-problem|${_d}/problem.json|--output|${_d}/plan.json"
      EXPECT_RC 0 EXPECT_STDOUT "max/mean |MPI ranks, shared world" OUTPUT ${_d}/plan.json OUTPUT_MODE created
      CHECK "$<TARGET_FILE:${_checker}>|${_d}/problem.json|${_d}/plan.json")
  endforeach()
  # --mpi-world overrides $MOONEP_MPI_WORLD (set to shared here).
  moonep_mpi_cli_test(option_overrides_env 2 shared
    ARGS "--mpi-world|rma|--ranks|2|--experts|8|--topk|2|--tokens|32|--steps|1"
    EXPECT_RC 0 EXPECT_STDOUT "max/mean |MPI ranks, rma world")
  # Failures: every process exits non-zero, rank 0 prints one line, no file
  # is written (and an existing one is left alone), nobody hangs.
  moonep_mpi_cli_test(bad_input 4 auto
    ARGS "--input|${CMAKE_CURRENT_SOURCE_DIR}/cli/bad/expert_out_of_range.json|--output|${_work}/bad_input/plan.json"
    EXPECT_RC 2 EXPECT_STDERR "expert_out_of_range.json: |routing[1][3] = 16 is not an expert id"
    OUTPUT ${_work}/bad_input/plan.json OUTPUT_MODE both)
  moonep_mpi_cli_test(wrong_np 3 auto
    ARGS "--input|${_problems}/good.json|--output|${_work}/wrong_np/plan.json"
    EXPECT_RC 2 EXPECT_STDERR "the problem has ranks = 4 but 3 MPI processes were started|mpirun -np 4"
    OUTPUT ${_work}/wrong_np/plan.json OUTPUT_MODE both)
  moonep_mpi_cli_test(missing_input 2 auto
    ARGS "--input|${_work}/missing_input/nope.json|--output|${_work}/missing_input/plan.json"
    EXPECT_RC 2 EXPECT_STDERR "cannot read problem file"
    OUTPUT ${_work}/missing_input/plan.json OUTPUT_MODE absent)
  moonep_mpi_cli_test(stdin_input 2 auto ARGS "--input|-" EXPECT_RC 2 EXPECT_STDERR "give a file, not '-'")
  moonep_mpi_cli_test(unknown_world 2 nccl ARGS "--input|${_problems}/good.json" EXPECT_RC 2
    EXPECT_STDERR "unknown MPI world 'nccl' (expected auto, shared or rma)")
  # --world gpu under mpirun (builds with CUDA): one process per rank over
  # a GPU world, every rank on GPU rank mod (visible GPUs); the plan rank 0
  # writes is plan_reference's, and the summary names the world.
  if(MoonEP_HAVE_CUDA)
    foreach(_p good good_tpe good_ragged)
      moonep_mpi_cli_test(gpu_plan_${_p} 4 gpu
        ARGS "--input|${_problems}/${_p}.json|--output|${_work}/gpu_plan_${_p}/plan.json"
        EXPECT_RC 0 OUTPUT ${_work}/gpu_plan_${_p}/plan.json OUTPUT_MODE created
        CHECK "$<TARGET_FILE:${_checker}>|${_problems}/${_p}.json|${_work}/gpu_plan_${_p}/plan.json")
    endforeach()
    set(_d ${_work}/gpu_synthetic_np2)
    moonep_mpi_cli_test(gpu_synthetic_np2 2 gpu
      ARGS "--ranks|2|--experts|32|--topk|4|--tokens|256|--copy-slots|2|--token-padding|8|--imbalance|2|--steps|3|--save-problem|${_d}/problem.json|--output|${_d}/plan.json"
      EXPECT_RC 0 EXPECT_STDOUT "max/mean |slowest of 2 MPI ranks, gpu world" OUTPUT ${_d}/plan.json
      OUTPUT_MODE created CHECK "$<TARGET_FILE:${_checker}>|${_d}/problem.json|${_d}/plan.json")
    # A ragged synthetic step (--ragged): each process stages its rank's
    # count for its kernel; the plan is the reference's for those counts.
    set(_d ${_work}/gpu_ragged)
    moonep_mpi_cli_test(gpu_ragged 2 gpu
      ARGS "--ranks|2|--experts|8|--topk|2|--tokens|32|--ragged|--seed|4|--steps|2|--save-problem|${_d}/problem.json|--output|${_d}/plan.json"
      EXPECT_RC 0 EXPECT_STDOUT "ragged synthetic step|a ragged step of T = |slowest of 2 MPI ranks, gpu world"
      OUTPUT ${_d}/plan.json OUTPUT_MODE created
      CHECK "$<TARGET_FILE:${_checker}>|${_d}/problem.json|${_d}/plan.json")
    # Bad input and the wrong process count: refused by every process alike
    # while reading the problem, before any GPU is touched (so these two
    # run without a GPU too).
    moonep_mpi_cli_test(gpu_bad_input 4 gpu
      ARGS "--input|${CMAKE_CURRENT_SOURCE_DIR}/cli/bad/expert_out_of_range.json|--output|${_work}/gpu_bad_input/plan.json"
      EXPECT_RC 2 EXPECT_STDERR "expert_out_of_range.json: |routing[1][3] = 16 is not an expert id"
      OUTPUT ${_work}/gpu_bad_input/plan.json OUTPUT_MODE both)
    moonep_mpi_cli_test(gpu_wrong_np 3 gpu
      ARGS "--input|${_problems}/good.json|--output|${_work}/gpu_wrong_np/plan.json"
      EXPECT_RC 2 EXPECT_STDERR "the problem has ranks = 4 but 3 MPI processes were started|mpirun -np 4"
      OUTPUT ${_work}/gpu_wrong_np/plan.json OUTPUT_MODE both)
  endif()
  moonep_mpi_cli_test(output_dir_missing 4 auto
    ARGS "--input|${_problems}/good.json|--output|${_work}/output_dir_missing/no/plan.json"
    EXPECT_RC 1 EXPECT_STDERR "cannot write plan file"
    OUTPUT ${_work}/output_dir_missing/no/plan.json OUTPUT_MODE absent)
endif()

# ---- The GPU world with one MPI process per rank, under mpirun (2 and 4
# processes; on one GPU each process has its own context).
if(MoonEP_HAVE_CUDA)
  # moonep_add_gpu_mpi_test(NAME TIMEOUT [NP...]): NAME.cpp, run as
  # NAME_np<n> for each NP (default 2 and 4; skipped, exit 77, where no GPU
  # is visible).
  function(moonep_add_gpu_mpi_test name timeout)
    set(nps ${ARGN})
    if(NOT nps)
      set(nps 2 4)
    endif()
    add_executable(${name} ${name}.cpp test_cuda_main.cpp)
    target_link_libraries(${name} PRIVATE moonep moonep_catch2 CUDA::cudart MPI::MPI_CXX)
    target_compile_definitions(${name} PRIVATE MOONEP_TEST_WITH_MPI)
    target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
    foreach(np IN LISTS nps)
      add_test(NAME ${name}_np${np}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${_moonep_mpi_preflags}
                       $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
      set_tests_properties(${name}_np${np} PROPERTIES TIMEOUT ${timeout} PROCESSORS ${np} LABELS mpi
                           SKIP_RETURN_CODE 77 ENVIRONMENT "${_moonep_mpi_env}")
    endforeach()
  endfunction()
  # The world's planning (GpuWorld over make_mpi_gpu_world).
  moonep_add_gpu_mpi_test(test_gpu_world_mpi 300)
  # The layer on that world (GpuWorldLayer, one process per rank), R = 1
  # too.
  moonep_add_gpu_mpi_test(test_gpu_world_layer_mpi 600 1 2 4)
  # The expert copies and the MoE layer on that world
  # (GpuWorldExpertCopies, GpuWorldMoeLayer, one process per rank), R = 1
  # too.
  moonep_add_gpu_mpi_test(test_gpu_world_moe_mpi 600 1 2 4)
endif()

# ---- moonep-layer --world mpi under mpirun.
include(${CMAKE_CURRENT_SOURCE_DIR}/layer_cli/tests_layer_cli_mpi.cmake)
