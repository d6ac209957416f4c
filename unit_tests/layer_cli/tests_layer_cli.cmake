# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# moonep-layer run as a user runs it (run_layer_case.cmake): its files
# against the direct layer (layer_cli_files check), and bad usage or input:
# exit status, the one error line, no file written. Included from
# tests_layer.cmake.
set(_layer_cli_dir ${CMAKE_CURRENT_LIST_DIR})
add_executable(layer_cli_files ${_layer_cli_dir}/layer_cli_files.cpp)
target_include_directories(layer_cli_files PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(layer_cli_files PRIVATE moonep)

# moonep_layer_cli_test(NAME MAKE a|b ARGS a|b [EXPECT_RC n] [EXPECT_STDERR t|t] [CHECK dtype] [ABSENT f|f]
#                       [NEEDS_GPU])
# NEEDS_GPU: skipped (not failed) where moonep-layer finds no CUDA device.
function(moonep_layer_cli_test name)
  cmake_parse_arguments(T "NEEDS_GPU" "MAKE;ARGS;EXPECT_RC;EXPECT_STDERR;CHECK;ABSENT" "" ${ARGN})
  set(defs -DEXE=$<TARGET_FILE:moonep-layer> -DFILES=$<TARGET_FILE:layer_cli_files>
           -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layer_cli_work/${name} "-DMAKE=${T_MAKE}" "-DARGS=${T_ARGS}")
  foreach(key EXPECT_RC EXPECT_STDERR CHECK ABSENT)
    if(DEFINED T_${key})
      list(APPEND defs "-D${key}=${T_${key}}")
    endif()
  endforeach()
  if(T_NEEDS_GPU)
    list(APPEND defs -DNEEDS_GPU=ON)
  endif()
  add_test(NAME layer_cli_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${_layer_cli_dir}/run_layer_case.cmake)
  if(T_NEEDS_GPU)
    set_tests_properties(layer_cli_${name} PROPERTIES SKIP_REGULAR_EXPRESSION "run_layer_case: skipped, no CUDA device")
  endif()
endfunction()

set(_in "--input|@W@/problem.json|--x|@W@/x.npy|--weights|@W@/w.npy")
set(_all "${_in}|--output|@W@/out.npy|--recv|@W@/recv.npy|--grad-out|@W@/g.npy|--grad-x|@W@/gx.npy|--grad-weights|@W@/gw.npy")
# R E K S B tp H seed [ragged]
set(_step "4|16|4|12|2|4|5|7")
foreach(dtype float double bf16)
  moonep_layer_cli_test(full_${dtype} MAKE ${_step} ARGS "${_all}|--dtype|${dtype}" CHECK ${dtype})
endforeach()
# Rows whose sums need more than bf16's 8 bits: the bf16 result is the
# exact sum rounded once to bf16 (and differs from float's).
moonep_layer_cli_test(fine_bf16 MAKE "${_step}|fine" ARGS "${_all}|--dtype|bf16" CHECK bf16)
moonep_layer_cli_test(fine_float MAKE "${_step}|fine" ARGS "${_all}" CHECK float)
moonep_layer_cli_test(ragged MAKE "${_step}|ragged" ARGS "${_all}" CHECK float)
# The portable backend (the Kokkos planner and InProcessLayer) against the
# same direct layer: full, ragged, R = 1, fine data, every element type
# (bf16: the exact sums rounded once to nearest even, as the reference's).
foreach(dtype float double bf16)
  moonep_layer_cli_test(portable_${dtype} MAKE "${_step}|fine" ARGS "${_all}|--backend|portable|--dtype|${dtype}"
    CHECK ${dtype})
endforeach()
moonep_layer_cli_test(portable_ragged MAKE "${_step}|ragged" ARGS "${_all}|--backend|portable" CHECK float)
moonep_layer_cli_test(portable_one_rank MAKE "1|4|3|9|1|2|3|5" ARGS "${_all}|--backend|portable" CHECK float)
moonep_layer_cli_test(portable_bf16_ragged MAKE "${_step}|ragged" ARGS "${_all}|--backend|portable|--dtype|bf16"
  CHECK bf16)
moonep_layer_cli_test(portable_bf16_one_rank MAKE "1|4|3|9|1|2|3|5" ARGS "${_all}|--backend|portable|--dtype|bf16"
  CHECK bf16)
moonep_layer_cli_test(one_rank MAKE "1|4|3|9|1|2|3|5" ARGS "${_all}|--backend|reference|--world|inprocess" CHECK float)

set(_bad_out "${_in}|--output|@W@/out.npy")
moonep_layer_cli_test(bad_weights_shape MAKE ${_step} EXPECT_RC 2
  ARGS "--input|@W@/problem.json|--x|@W@/x.npy|--weights|@W@/x.npy|--output|@W@/out.npy"
  EXPECT_STDERR "weights file '@W@/x.npy': shape (4, 12, 5) is not [R][S][K] = [4][12][4]")
moonep_layer_cli_test(x_not_npy MAKE ${_step} EXPECT_RC 2
  ARGS "--input|@W@/problem.json|--x|@W@/problem.json|--weights|@W@/w.npy|--output|@W@/out.npy"
  EXPECT_STDERR "x file '@W@/problem.json': not a .npy file")
moonep_layer_cli_test(problem_not_json MAKE ${_step} EXPECT_RC 2
  ARGS "--input|@W@/x.npy|--x|@W@/x.npy|--weights|@W@/w.npy|--output|@W@/out.npy"
  EXPECT_STDERR "@W@/x.npy")
moonep_layer_cli_test(grad_alone MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--grad-out|@W@/g.npy"
  EXPECT_STDERR "--grad-out, --grad-x and --grad-weights go together")
if(MoonEP_HAVE_CUDA)
  # The CUDA backend (VirtualRankPlanner and VirtualRankLayer) against the
  # same direct layer, bit for bit: every element type, fine data, ragged,
  # R = 1 (its linear layer: below).
  foreach(dtype float double bf16)
    moonep_layer_cli_test(cuda_${dtype} MAKE "${_step}|fine" ARGS "${_all}|--backend|cuda|--dtype|${dtype}"
      CHECK ${dtype} NEEDS_GPU)
  endforeach()
  moonep_layer_cli_test(cuda_ragged MAKE "${_step}|ragged" ARGS "${_all}|--backend|cuda" CHECK float NEEDS_GPU)
  moonep_layer_cli_test(cuda_one_rank MAKE "1|4|3|9|1|2|3|5" ARGS "${_all}|--backend|cuda" CHECK float NEEDS_GPU)
else()
  moonep_layer_cli_test(backend_cuda MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--backend|cuda"
    EXPECT_STDERR "--backend cuda is not available in this build of moonep-layer: MoonEP was built without CUDA")
endif()
if(MoonEP_HAVE_CUDA)
  # The GPU world (GpuWorld and GpuWorldLayer, every rank on device 0)
  # against the same direct layer, bit for bit.
  foreach(dtype float double bf16)
    moonep_layer_cli_test(gpu_world_${dtype} MAKE "${_step}|fine" ARGS "${_all}|--world|gpu|--devices|0|--dtype|${dtype}"
      CHECK ${dtype} NEEDS_GPU)
  endforeach()
  moonep_layer_cli_test(gpu_world_ragged MAKE "${_step}|ragged" ARGS "${_all}|--world|gpu|--devices|0" CHECK float NEEDS_GPU)
  moonep_layer_cli_test(gpu_world_one_rank MAKE "1|4|3|9|1|2|3|5" ARGS "${_all}|--world|gpu|--devices|0" CHECK float
    NEEDS_GPU)
  moonep_layer_cli_test(gpu_world_backend MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--world|gpu|--backend|cuda"
    EXPECT_STDERR "--world gpu runs its own layer (moonep::cuda::GpuWorldLayer); leave out --backend")
  moonep_layer_cli_test(gpu_world_bad_device MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--world|gpu|--devices|0,x"
    EXPECT_STDERR "--devices: 'x' is not a device number in 0..1023")
else()
  moonep_layer_cli_test(world_gpu MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--world|gpu"
    EXPECT_STDERR "--world gpu is not available in this build of moonep-layer: MoonEP was built without CUDA")
endif()
moonep_layer_cli_test(devices_without_gpu_world MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--devices|0"
  EXPECT_STDERR "--devices is for --world gpu")
moonep_layer_cli_test(dtype_unknown MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--dtype|half"
  EXPECT_STDERR "--dtype: unknown type 'half' (float, double or bf16)")
moonep_layer_cli_test(missing_output MAKE ${_step} EXPECT_RC 2 ARGS "${_in}" EXPECT_STDERR "missing --output")
moonep_layer_cli_test(same_output_twice MAKE ${_step} EXPECT_RC 2 ARGS "${_bad_out}|--recv|@W@/out.npy"
  EXPECT_STDERR "--output and --recv name the same file")
# An output that cannot be written (a directory): exit 1, and no other
# output written either.
moonep_layer_cli_test(output_directory MAKE ${_step} EXPECT_RC 1
  ARGS "${_in}|--output|@W@/out.npy|--recv|@W@/recv.npy|--grad-out|@W@/g.npy|--grad-x|@W@|--grad-weights|@W@/gw.npy"
  EXPECT_STDERR "grad-x file" ABSENT "@W@/recv.npy|@W@/gw.npy")

# Linear experts (--experts M.npy, H' = 3): out, gx, gw and every expert's
# gradient against the direct linear layer, on exact data, every backend
# (cuda: VirtualRankMoeLayer, its cuBLAS GEMMs exact on this data too) and
# the GPU world (gpu_world: GpuWorldMoeLayer, every rank on device 0).
set(_lin "${_in}|--experts|@W@/M.npy|--output|@W@/out.npy|--grad-out|@W@/g.npy|--grad-x|@W@/gx.npy|--grad-weights|@W@/gw.npy|--grad-experts|@W@/gM.npy")
set(_linear_backends reference portable)
if(MoonEP_HAVE_CUDA)
  list(APPEND _linear_backends cuda gpu_world)
endif()
foreach(backend IN LISTS _linear_backends)
  set(_gpu "")
  set(_where "--backend|${backend}")
  if(backend STREQUAL "cuda")
    set(_gpu NEEDS_GPU)
  elseif(backend STREQUAL "gpu_world")
    set(_gpu NEEDS_GPU)
    set(_where "--world|gpu|--devices|0")
  endif()
  foreach(dtype float double)
    moonep_layer_cli_test(linear_${backend}_${dtype} MAKE "${_step}|linear" ARGS "${_lin}|${_where}|--dtype|${dtype}"
      CHECK ${dtype} ${_gpu})
  endforeach()
  moonep_layer_cli_test(linear_${backend}_ragged MAKE "${_step}|linear-ragged" ARGS "${_lin}|${_where}"
    CHECK float ${_gpu})
  # B = 2 < epn = 4, every remote expert still copied.
  moonep_layer_cli_test(linear_${backend}_small_b MAKE "4|16|3|12|2|2|4|3|linear" ARGS "${_lin}|${_where}"
    CHECK float ${_gpu})
  moonep_layer_cli_test(linear_${backend}_one_rank MAKE "1|4|3|9|1|2|3|5|linear" ARGS "${_lin}|${_where}"
    CHECK float ${_gpu})
  # B = 1 < epn = 8: rank 1 would run expert 25, which it holds no copy of.
  moonep_layer_cli_test(linear_${backend}_uncopied MAKE "4|32|4|16|1|1|3|3|linear" EXPECT_RC 2
    ARGS "${_lin}|${_where}" EXPECT_STDERR "rank 1 would run expert 25 (5 slots) that it neither owns nor holds in a copy slot"
    ABSENT "@W@/gx.npy|@W@/gw.npy|@W@/gM.npy" ${_gpu})
endforeach()
moonep_layer_cli_test(experts_shape MAKE "${_step}|linear" EXPECT_RC 2
  ARGS "${_in}|--output|@W@/out.npy|--experts|@W@/x.npy"
  EXPECT_STDERR "experts file '@W@/x.npy': shape (4, 12, 5) is not [E][H][H'] = [16][5][H'] (H of the x file)")
moonep_layer_cli_test(linear_grad_out_shape MAKE "${_step}|linear" EXPECT_RC 2
  ARGS "${_in}|--experts|@W@/M.npy|--output|@W@/out.npy|--grad-out|@W@/x.npy|--grad-x|@W@/gx.npy|--grad-weights|@W@/gw.npy|--grad-experts|@W@/gM.npy"
  EXPECT_STDERR "grad-out file '@W@/x.npy': shape (4, 12, 5) is not [R][S][H'] = [4][12][3] (H' of the experts file)"
  ABSENT "@W@/gx.npy|@W@/gw.npy|@W@/gM.npy")
moonep_layer_cli_test(grad_experts_alone MAKE "${_step}|linear" EXPECT_RC 2
  ARGS "${_bad_out}|--grad-experts|@W@/gM.npy" EXPECT_STDERR "--grad-experts needs --experts")
moonep_layer_cli_test(linear_grad_together MAKE "${_step}|linear" EXPECT_RC 2
  ARGS "${_bad_out}|--experts|@W@/M.npy|--grad-out|@W@/g.npy|--grad-x|@W@/gx.npy|--grad-weights|@W@/gw.npy"
  EXPECT_STDERR "with --experts, --grad-out, --grad-x, --grad-weights and --grad-experts go together")

# docs/layer_cli.md quotes moonep-layer --help as it is.
add_test(NAME docs_layer_cli_help COMMAND ${CMAKE_COMMAND} -DDOC=${PROJECT_SOURCE_DIR}/docs/layer_cli.md
  -DPLANNER=$<TARGET_FILE:moonep-layer> -DPROGRAM=moonep-layer -P ${PROJECT_SOURCE_DIR}/examples/check_cli_help.cmake)
