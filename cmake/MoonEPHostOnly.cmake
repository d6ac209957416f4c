# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# MoonEPHostOnly.cmake — moonep_host_only(TARGET source...): where the C++
# compiler is Kokkos' nvcc_wrapper (a Kokkos built for CUDA), the listed
# sources of TARGET are compiled by nvcc_wrapper's host compiler alone
# (nvcc_wrapper --host-only) rather than through nvcc; elsewhere nothing.
#
# Why: the sources listed are MoonEP's Kokkos-free host code (the reference
# planner, validation, file formats, the CLI's parts, the CUDA
# specialization's host side, Catch2's session): no kernel, no Kokkos
# header. nvcc takes 2.5 to 5 times as long as GCC over the same host code
# (here: catch2_session.cpp 36 -> 11 s, io/plan_io.cpp 13.7 -> 5.0 s,
# core/config.cpp 5.0 -> 1.0 s), the largest part of a Kokkos-CUDA build
# (CI's cuda leg, `spack install moonep+cuda`) that is not device code.
#
# What must stay true: only sources that include no Kokkos header, not even
# through MoonEP's own headers, are listed. One that does fails to compile
# under --host-only ("KOKKOS_ENABLE_CUDA defined but the compiler is not
# defining the __CUDACC__ macro"), so list only sources that CI's cuda leg
# (scripts/test_kokkos46.sh) builds: a stale entry then fails CI rather
# than a user's build.
get_filename_component(_moonep_cxx_name "${CMAKE_CXX_COMPILER}" NAME)
if(_moonep_cxx_name STREQUAL "nvcc_wrapper")
  set(MoonEP_CXX_IS_NVCC_WRAPPER ON)
else()
  set(MoonEP_CXX_IS_NVCC_WRAPPER OFF)
endif()

#
# moonep_host_only(TARGET [CUDA_HEADERS] source...): CUDA_HEADERS for host
# code that includes the CUDA runtime's or driver's headers (cuda.h,
# cuda_runtime_api.h), which nvcc finds by itself and the host compiler
# only with the toolkit's include directory, passed as a system one (CMake
# drops it from a target's -I list: nvcc_wrapper reports it as implicit).
function(moonep_host_only target)
  if(NOT MoonEP_CXX_IS_NVCC_WRAPPER)
    return()
  endif()
  set(sources ${ARGN})
  set(options --host-only)
  list(GET sources 0 first)
  if(first STREQUAL "CUDA_HEADERS")
    list(REMOVE_AT sources 0)
    foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
      list(APPEND options -isystem ${dir})
    endforeach()
  endif()
  # (TARGET_DIRECTORY: the sources' properties as the directory that
  # defines the target sees them; paths relative to the calling one.)
  set_source_files_properties(${sources} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${options}")
endfunction()
