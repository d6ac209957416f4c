# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# CUDA specialization tests: only when MoonEP is built with CUDA. Their main
# (test_cuda_main.cpp) exits 77 when no GPU is visible, which CTest reports
# as skipped.
if(MoonEP_HAVE_CUDA)
  # The CUDA tests' main, compiled once for all of them (its Kokkos
  # headers alone take 14 s under nvcc_wrapper).
  add_library(moonep_test_main_cuda OBJECT test_cuda_main.cpp)
  target_link_libraries(moonep_test_main_cuda PUBLIC moonep moonep_catch2 CUDA::cudart)
  target_include_directories(moonep_test_main_cuda PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  function(moonep_add_cuda_test name)
    add_executable(${name} ${ARGN} $<TARGET_OBJECTS:moonep_test_main_cuda>)
    target_link_libraries(${name} PRIVATE moonep moonep_cuda_bench moonep_catch2 CUDA::cudart)
    target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  endfunction()
  moonep_add_cuda_test(test_cuda_planner test_cuda_planner.cpp)
  moonep_add_cuda_test(test_gpu_world test_gpu_world.cpp)
  moonep_add_cuda_test(test_cuda_layer test_cuda_layer.cpp support/soak_problem.cu)
  # The layer on a GPU world held by one process (slot buffers in symmetric
  # memory, the contract's transport) against the reference.
  moonep_add_cuda_test(test_gpu_world_layer test_gpu_world_layer.cpp)
  # Expert copies' fetch and reduce against the reference (layer.md).
  moonep_add_cuda_test(test_cuda_expert_copies test_cuda_expert_copies.cpp)
  # The linear MoE layer against the direct layer: forward, and backward
  # (the latter needs VirtualRankLayer's backward).
  moonep_add_cuda_test(test_cuda_moe_layer test_cuda_moe_layer.cpp)
  moonep_add_cuda_test(test_cuda_moe_layer_backward test_cuda_moe_layer_backward.cpp)
  # The same on a GPU world held by one process (every rank on device 0):
  # fetch and reduce against the reference, the MoE layer against the
  # direct layer.
  moonep_add_cuda_test(test_gpu_world_expert_copies test_gpu_world_expert_copies.cpp)
  moonep_add_cuda_test(test_gpu_world_moe_layer test_gpu_world_moe_layer.cpp)
  # Planner<Kokkos::Cuda> itself (both paths) is tested by the
  # test_portable_* binaries of a build against a CUDA-enabled Kokkos; over
  # a GPU world (moonep::OnGpuWorld) by test_gpu_world_planner, in such a
  # build only (bundle_gpu.sh's build-gpu-kokkos).
  if("CUDA" IN_LIST Kokkos_DEVICES)
    moonep_add_cuda_test(test_gpu_world_planner test_gpu_world_planner.cpp)
  endif()
endif()
# The CUDA kernel's table layout is plain C++: checked on the
# host in every build, GPU or not.
moonep_add_test(test_cuda_layout test_cuda_layout.cpp)
