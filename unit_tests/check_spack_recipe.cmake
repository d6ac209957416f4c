# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# check_spack_recipe.cmake — run with `cmake -DSOURCE_DIR=<repo> -P ...`.
# Fails when the Spack recipe and the CMake options drift apart:
#   * every MoonEP_* define in the recipe's cmake_args must be a CMake option
#     (option() or a CACHE variable in CMakeLists.txt);
#   * every CMake option must be set by the recipe (the recipe fixes the
#     ones it has no variant for, so a new option forces a decision there);
#   * every variant the recipe declares must feed a define_from_variant
#     or constrain Kokkos (depends_on("kokkos+X", when="+X")), and the
#     CudaPackage variants must reach their options.
# unit_tests/check_spack_recipe.py checks the directives themselves.
# -DINJECT_DRIFT=ON renames an option in the recipe text before checking, to
# prove the check can fail (a CTest case expects that run to fail).

cmake_minimum_required(VERSION 3.18)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "pass -DSOURCE_DIR=<moonep source dir>")
endif()
file(READ "${SOURCE_DIR}/CMakeLists.txt" cmake_text)
file(READ "${SOURCE_DIR}/spack/spack_repo/moonep/packages/moonep/package.py" recipe)
if(INJECT_DRIFT)
  string(REPLACE "\"MoonEP_ENABLE_MPI\"" "\"MoonEP_USE_MPI\"" recipe "${recipe}")
endif()

# CMake options.
string(REGEX MATCHALL "option\\((MoonEP_[A-Za-z0-9_]+)" _opts "${cmake_text}")
string(REGEX MATCHALL "set\\((MoonEP_[A-Za-z0-9_]+)[^)\n]*CACHE" _caches "${cmake_text}")
set(cmake_options "")
foreach(_m IN LISTS _opts _caches)
  string(REGEX REPLACE "^(option|set)\\((MoonEP_[A-Za-z0-9_]+).*" "\\2" _name "${_m}")
  list(APPEND cmake_options ${_name})
endforeach()
list(REMOVE_DUPLICATES cmake_options)

# Recipe defines and variants.
string(REGEX MATCHALL "define(_from_variant)?\\(\"((MoonEP_|BUILD_SHARED_LIBS)[A-Za-z0-9_]*)\"(, \"[a-z_]+\")?" _defs "${recipe}")
set(recipe_options "")
set(variants_used "")
foreach(_m IN LISTS _defs)
  string(REGEX REPLACE ".*\\(\"((MoonEP_|BUILD_SHARED_LIBS)[A-Za-z0-9_]*)\".*" "\\1" _name "${_m}")
  if(_name MATCHES "^MoonEP_")
    list(APPEND recipe_options ${_name})
  endif()
  if(_m MATCHES ", \"([a-z_]+)\"$")
    list(APPEND variants_used ${CMAKE_MATCH_1})
  endif()
endforeach()
if(recipe MATCHES "variants\\[\"cuda_arch\"\\][^\n]*\n[^\n]*MoonEP_CUDA_ARCHITECTURES"
   OR recipe MATCHES "MoonEP_CUDA_ARCHITECTURES\"[^\n]*cuda_arch")
  list(APPEND variants_used cuda_arch)
endif()
# Variants passed on to Kokkos only.
string(REGEX MATCHALL "depends_on\\(\"kokkos\\+([a-z_]+)\", when=\"\\+([a-z_]+)\"\\)" _kdeps "${recipe}")
foreach(_m IN LISTS _kdeps)
  string(REGEX REPLACE ".*kokkos\\+([a-z_]+)\", when=\"\\+([a-z_]+)\".*" "\\1;\\2" _pair "${_m}")
  list(GET _pair 0 _kv)
  list(GET _pair 1 _ov)
  if(_kv STREQUAL _ov)
    list(APPEND variants_used ${_ov})
  endif()
endforeach()
string(REGEX MATCHALL "variant\\(\"([a-z_]+)\"" _vars "${recipe}")
set(variants "cuda;cuda_arch")  # inherited from CudaPackage
foreach(_m IN LISTS _vars)
  string(REGEX REPLACE "variant\\(\"([a-z_]+)\"" "\\1" _v "${_m}")
  list(APPEND variants ${_v})
endforeach()

set(errors "")
foreach(_o IN LISTS recipe_options)
  if(NOT _o IN_LIST cmake_options)
    list(APPEND errors "recipe sets ${_o}, which CMakeLists.txt does not define")
  endif()
endforeach()
foreach(_o IN LISTS cmake_options)
  if(NOT _o IN_LIST recipe_options)
    list(APPEND errors "CMake option ${_o} is not set by the Spack recipe (add a variant or fix it in cmake_args)")
  endif()
endforeach()
foreach(_v IN LISTS variants)
  if(NOT _v IN_LIST variants_used)
    list(APPEND errors "recipe variant '${_v}' reaches no CMake option")
  endif()
endforeach()

list(LENGTH cmake_options _n)
if(_n EQUAL 0)
  list(APPEND errors "found no MoonEP_* options in CMakeLists.txt (parser out of date?)")
endif()
if(errors)
  string(REPLACE ";" "\n  " _lines "${errors}")
  message(FATAL_ERROR "Spack recipe and CMake options drifted apart:\n  ${_lines}")
endif()
message(STATUS "Spack recipe matches the CMake options: ${cmake_options}")
