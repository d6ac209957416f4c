# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# moonep-layer --world mpi under mpirun (one process per rank), run as a
# user runs it by run_layer_case.cmake: its files against the direct layer
# (layer_cli_files check), on both MPI worlds; and failures: every process
# exits with the same status, the job prints one line, no file is written.
# Included from tests_mpi.cmake (its mpirun flags and environment).
if(NOT TARGET moonep-layer OR NOT TARGET layer_cli_files)
  return()
endif()

# moonep_layer_mpi_cli_test(NAME NP WORLD MAKE a|b ARGS a|b [EXPECT_RC n] [EXPECT_STDERR t|t] [CHECK dtype] [ABSENT f|f])
function(moonep_layer_mpi_cli_test name np world)
  cmake_parse_arguments(T "" "MAKE;ARGS;EXPECT_RC;EXPECT_STDERR;CHECK;ABSENT" "" ${ARGN})
  moonep_mpirun_args(_args ${np})
  set(defs -DEXE=${MPIEXEC_EXECUTABLE} -DFILES=$<TARGET_FILE:layer_cli_files>
           -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layer_cli_work/mpi_${name} "-DMAKE=${T_MAKE}"
           "-DARGS=${_args}|$<TARGET_FILE:moonep-layer>|--world|mpi|${T_ARGS}")
  foreach(key EXPECT_RC EXPECT_STDERR CHECK ABSENT)
    if(DEFINED T_${key})
      list(APPEND defs "-D${key}=${T_${key}}")
    endif()
  endforeach()
  add_test(NAME layer_cli_mpi_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_SOURCE_DIR}/layer_cli/run_layer_case.cmake)
  set_tests_properties(layer_cli_mpi_${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np} LABELS mpi
                       ENVIRONMENT "${_moonep_mpi_env};MOONEP_MPI_WORLD=${world}")
endfunction()

set(_in "--input|@W@/problem.json|--x|@W@/x.npy|--weights|@W@/w.npy")
set(_all "${_in}|--output|@W@/out.npy|--recv|@W@/recv.npy|--grad-out|@W@/g.npy|--grad-x|@W@/gx.npy|--grad-weights|@W@/gw.npy")
# R E K S B tp H seed [ragged|fine]
set(_step "4|16|4|12|2|4|5|7")
moonep_layer_mpi_cli_test(ragged_shared 4 shared MAKE "${_step}|ragged" ARGS "${_all}" CHECK float)
moonep_layer_mpi_cli_test(fine_double_rma 4 rma MAKE "${_step}|fine" ARGS "${_all}|--dtype|double" CHECK double)
moonep_layer_mpi_cli_test(bf16_np2 2 auto MAKE "2|8|4|12|2|4|5|7|fine" ARGS "${_all}|--dtype|bf16" CHECK bf16)
moonep_layer_mpi_cli_test(one_rank 1 auto MAKE "1|4|3|9|1|2|3|5" ARGS "${_all}" CHECK float)
moonep_layer_mpi_cli_test(wrong_np 3 auto MAKE ${_step} EXPECT_RC 2 ARGS "${_all}"
  EXPECT_STDERR "the problem has ranks = 4 but 3 MPI processes were started|mpirun -np 4" ABSENT "@W@/recv.npy")
moonep_layer_mpi_cli_test(bad_weights 2 auto MAKE "2|8|4|12|2|4|5|7" EXPECT_RC 2
  ARGS "--input|@W@/problem.json|--x|@W@/x.npy|--weights|@W@/x.npy|--output|@W@/out.npy"
  EXPECT_STDERR "weights file '@W@/x.npy': shape (2, 12, 5) is not [R][S][K] = [2][12][4]")
moonep_layer_mpi_cli_test(with_backend 2 auto MAKE "2|8|4|12|2|4|5|7" EXPECT_RC 2 ARGS "${_all}|--backend|portable"
  EXPECT_STDERR "--world mpi runs its own layer")
# Rank 0 cannot write one output (a directory): exit 1, no other file.
moonep_layer_mpi_cli_test(output_directory 2 auto MAKE "2|8|4|12|2|4|5|7" EXPECT_RC 1
  ARGS "${_in}|--output|@W@/out.npy|--recv|@W@/recv.npy|--grad-out|@W@/g.npy|--grad-x|@W@|--grad-weights|@W@/gw.npy"
  EXPECT_STDERR "grad-x file" ABSENT "@W@/recv.npy|@W@/gw.npy")

# Linear experts (--experts M.npy, H' = 3) on MpiMoeLayer: out, gx, gw and
# every expert's gradient against the direct linear layer, exact data.
set(_lin "${_in}|--experts|@W@/M.npy|--output|@W@/out.npy|--grad-out|@W@/g.npy|--grad-x|@W@/gx.npy|--grad-weights|@W@/gw.npy|--grad-experts|@W@/gM.npy")
moonep_layer_mpi_cli_test(linear_shared 4 shared MAKE "${_step}|linear" ARGS "${_lin}" CHECK float)
moonep_layer_mpi_cli_test(linear_double_rma 4 rma MAKE "${_step}|linear" ARGS "${_lin}|--dtype|double" CHECK double)
moonep_layer_mpi_cli_test(linear_ragged 4 auto MAKE "${_step}|linear-ragged" ARGS "${_lin}" CHECK float)
# B = 2 < epn = 4, every remote expert still copied.
moonep_layer_mpi_cli_test(linear_small_b 4 auto MAKE "4|16|3|12|2|2|4|3|linear" ARGS "${_lin}" CHECK float)
moonep_layer_mpi_cli_test(linear_one_rank 1 auto MAKE "1|4|3|9|1|2|3|5|linear" ARGS "${_lin}" CHECK float)
# B = 1 < epn = 8: rank 1 would run expert 25, which it holds no copy of;
# every process stops with that line before anything moves, no file.
moonep_layer_mpi_cli_test(linear_uncopied 4 auto MAKE "4|32|4|16|1|1|3|3|linear" EXPECT_RC 2 ARGS "${_lin}"
  EXPECT_STDERR "forward: rank 1: rank 1 would run expert 25 (5 slots) that it neither owns nor holds in a copy slot"
  ABSENT "@W@/gx.npy|@W@/gw.npy|@W@/gM.npy")

# --world gpu under mpirun (builds with CUDA): one process per rank over a
# GPU world, every process on GPU 0 (--devices 0: each its own context),
# GpuWorldLayer's files against the direct layer; skipped where no GPU is
# visible (the one error line of such a machine).
if(MoonEP_HAVE_CUDA)
  # moonep_layer_gpu_mpi_cli_test(NAME NP MAKE a|b ARGS a|b [EXPECT_RC n] [EXPECT_STDERR t|t] [CHECK dtype] [ABSENT f|f])
  function(moonep_layer_gpu_mpi_cli_test name np)
    cmake_parse_arguments(T "" "MAKE;ARGS;EXPECT_RC;EXPECT_STDERR;CHECK;ABSENT" "" ${ARGN})
    moonep_mpirun_args(_args ${np})
    set(defs -DEXE=${MPIEXEC_EXECUTABLE} -DFILES=$<TARGET_FILE:layer_cli_files>
             -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layer_cli_work/gpu_mpi_${name} "-DMAKE=${T_MAKE}"
             "-DARGS=${_args}|$<TARGET_FILE:moonep-layer>|--world|gpu|--devices|0|${T_ARGS}" -DNEEDS_GPU=ON)
    foreach(key EXPECT_RC EXPECT_STDERR CHECK ABSENT)
      if(DEFINED T_${key})
        list(APPEND defs "-D${key}=${T_${key}}")
      endif()
    endforeach()
    add_test(NAME layer_cli_gpu_mpi_${name}
             COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_SOURCE_DIR}/layer_cli/run_layer_case.cmake)
    set_tests_properties(layer_cli_gpu_mpi_${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np} LABELS mpi
                         ENVIRONMENT "${_moonep_mpi_env}"
                         SKIP_REGULAR_EXPRESSION "run_layer_case: skipped, no CUDA device")
  endfunction()
  foreach(dtype float double bf16)
    moonep_layer_gpu_mpi_cli_test(${dtype} 4 MAKE "${_step}|fine" ARGS "${_all}|--dtype|${dtype}" CHECK ${dtype})
  endforeach()
  moonep_layer_gpu_mpi_cli_test(ragged_np4 4 MAKE "${_step}|ragged" ARGS "${_all}" CHECK float)
  moonep_layer_gpu_mpi_cli_test(np2 2 MAKE "2|8|4|12|2|4|5|7|fine" ARGS "${_all}" CHECK float)
  # Refused while reading, before any GPU is touched (so these run without
  # a GPU too): every process exits 2 with one line, no file written.
  moonep_layer_gpu_mpi_cli_test(wrong_np 3 MAKE ${_step} EXPECT_RC 2 ARGS "${_all}"
    EXPECT_STDERR "the problem has ranks = 4 but 3 MPI processes were started|mpirun -np 4" ABSENT "@W@/recv.npy")
  # Linear experts (GpuWorldMoeLayer, one process per rank): out, gx, gw
  # and every expert's gradient against the direct linear layer, exact
  # data; and the refusal of an unrunnable plan on every process.
  moonep_layer_gpu_mpi_cli_test(linear 4 MAKE "${_step}|linear" ARGS "${_lin}" CHECK float)
  moonep_layer_gpu_mpi_cli_test(linear_double_ragged 4 MAKE "${_step}|linear-ragged" ARGS "${_lin}|--dtype|double" CHECK double)
  moonep_layer_gpu_mpi_cli_test(linear_small_b_np4 4 MAKE "4|16|3|12|2|2|4|3|linear" ARGS "${_lin}" CHECK float)
  moonep_layer_gpu_mpi_cli_test(linear_uncopied 4 MAKE "4|32|4|16|1|1|3|3|linear" EXPECT_RC 2 ARGS "${_lin}"
    EXPECT_STDERR "rank 1 would run expert 25 (5 slots) that it neither owns nor holds in a copy slot"
    ABSENT "@W@/gx.npy|@W@/gw.npy|@W@/gM.npy")
endif()
