# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The installed package: `cmake --install` this build into a temporary
# prefix, then build and run a downstream project with find_package(MoonEP).
set(_install_extra "")
# The downstream must find the same Kokkos (and Kokkos Kernels) as this build.
foreach(_var Kokkos_DIR KokkosKernels_DIR)
  if(${_var})
    list(APPEND _install_extra "-D${_var}=${${_var}}")
  endif()
endforeach()
# ... and be compiled and linked with this build's flags: a libmoonep.a built
# with -fsanitize=address,undefined (scripts/test_sanitizers.sh) links only
# into a program that links the sanitizer runtimes too.
foreach(_var CMAKE_CXX_FLAGS CMAKE_EXE_LINKER_FLAGS)
  if(NOT "${${_var}}" STREQUAL "")
    list(APPEND _install_extra "-D${_var}=${${_var}}")
  endif()
endforeach()
# The user's prefixes (Spack views etc.) come after the install prefix.
string(REPLACE ";" "|" _install_prefixes "${CMAKE_PREFIX_PATH}")
string(REPLACE ";" "|" _install_extra "${_install_extra}")
set(_install_build_type "${CMAKE_BUILD_TYPE}")
if(NOT _install_build_type)
  set(_install_build_type Release)
endif()
add_test(NAME install_test
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR}
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/install_test
    "-DGENERATOR=${CMAKE_GENERATOR}"
    -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DBUILD_TYPE=${_install_build_type}
    "-DEXTRA_ARGS=${_install_extra}"
    "-DUSER_PREFIXES=${_install_prefixes}"
    -DHAVE_MPI=${MoonEP_HAVE_MPI} -DHAVE_CUDA=${MoonEP_HAVE_CUDA} "-DKOKKOS_DIR=${Kokkos_DIR}"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/install_test/run_install_test.cmake)
# Installs the whole build: run it alone, after everything is built.
set_tests_properties(install_test PROPERTIES RUN_SERIAL TRUE TIMEOUT 600)
