# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs the MoonEP build tree into a fresh prefix, then configures,
# builds and runs the downstream project in this directory against it.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
#         -DBUILD_TYPE=... [-DEXTRA_ARGS=a|b] [-DUSER_PREFIXES=p|q]
#         -DHAVE_MPI=ON|OFF -DHAVE_CUDA=ON|OFF -DKOKKOS_DIR=<the build's>
#         -P run_install_test.cmake
# Then probes find_package(MoonEP) the ways it must fail softly: components
# this MoonEP lacks (a copy of the package config saying it was built
# without them), an unknown component, a missing Kokkos, a Kokkos of
# another version; and checks that QUIET stays quiet and that the Kokkos
# MoonEP was built with is found without being pointed at.
cmake_minimum_required(VERSION 3.18)
get_filename_component(here "${CMAKE_SCRIPT_MODE_FILE}" DIRECTORY)
set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")

# What a downstream needs is there, and nothing of MoonEP's private
# build-only dependencies (nlohmann_json) leaks into the exported targets.
foreach(f include/moonep/moonep.hpp include/moonep/moonep_config.hpp include/moonep/io.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
if(EXISTS "${prefix}/include/moonep/moonep_config.hpp.in")
  message(FATAL_ERROR "the template moonep_config.hpp.in was installed next to the header")
endif()
file(GLOB_RECURSE configs "${prefix}/*/MoonEPConfig.cmake")
if(NOT configs)
  message(FATAL_ERROR "MoonEPConfig.cmake was not installed")
endif()
file(GLOB_RECURSE exported "${prefix}/*/MoonEPTargets*.cmake")
foreach(f IN LISTS exported)
  file(READ "${f}" text)
  if(text MATCHES "nlohmann")
    message(FATAL_ERROR "${f} makes downstream projects depend on nlohmann_json")
  endif()
endforeach()

string(REPLACE "|" ";" extra "${EXTRA_ARGS}")
string(REPLACE "|" ";" prefixes "${USER_PREFIXES}")
list(PREPEND prefixes "${prefix}")
set(components "")
if(HAVE_MPI)
  list(APPEND components mpi)
endif()
if(HAVE_CUDA)
  list(APPEND components cuda)
endif()
string(REPLACE ";" "," components "${components}")
step("configuring the downstream project" "${CMAKE_COMMAND}" -S "${here}" -B "${WORK_DIR}/build"
     -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
     "-DCMAKE_PREFIX_PATH=${prefixes}" "-DMOONEP_COMPONENTS=${components}" ${extra})
step("building the downstream project" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
step("running the downstream program" "${WORK_DIR}/build/moonep_downstream")
message(STATUS "${step_output} (components required: ${components})")

# ---- find_package(MoonEP) probes ---------------------------------------
list(GET configs 0 config)
get_filename_component(config_dir "${config}" DIRECTORY)
file(RELATIVE_PATH config_rel "${prefix}" "${config_dir}")

# A copy of the package config in its own prefix, with one line rewritten:
# what an install built otherwise would say. No libraries: every probe of a
# copy must stop before the targets are loaded.
function(fake_prefix name from to)
  set(dir "${WORK_DIR}/fake-${name}")
  file(MAKE_DIRECTORY "${dir}/${config_rel}")
  file(GLOB files "${config_dir}/*.cmake")
  file(COPY ${files} DESTINATION "${dir}/${config_rel}")
  file(READ "${dir}/${config_rel}/MoonEPConfig.cmake" text)
  string(FIND "${text}" "${from}" at)
  if(at LESS 0)
    message(FATAL_ERROR "MoonEPConfig.cmake has no '${from}' to rewrite")
  endif()
  string(REPLACE "${from}" "${to}" text "${text}")
  file(WRITE "${dir}/${config_rel}/MoonEPConfig.cmake" "${text}")
endfunction()

# probe(NAME FIND_ARGS [PREFIX dir] [OWN_PREFIXES_ONLY] [FAILS] [FOUND regex]
#       [MATCH regex] [QUIET_OUTPUT] [EXTRA args...])
# Configures the downstream in probe mode with find_package(MoonEP FIND_ARGS)
# and checks: the configure fails (FAILS) or succeeds; the probe line's
# MoonEP_FOUND...; the output matches MATCH; QUIET_OUTPUT: nothing on
# standard error and no line but the probe's naming MoonEP or Kokkos.
set(probes 0)
function(probe name find_args)
  cmake_parse_arguments(P "OWN_PREFIXES_ONLY;FAILS;QUIET_OUTPUT" "PREFIX;FOUND;MATCH" "EXTRA" ${ARGN})
  if(NOT P_PREFIX)
    set(P_PREFIX "${prefix}")
  endif()
  set(search "${P_PREFIX}")
  set(args "")
  if(NOT P_OWN_PREFIXES_ONLY)
    list(APPEND search ${prefixes})
    list(REMOVE_ITEM search "${prefix}")
    list(PREPEND search "${P_PREFIX}")
    set(args ${extra})
  endif()
  # --no-warn-unused-cli: a probe that stops early leaves -D values unused.
  execute_process(COMMAND "${CMAKE_COMMAND}" --no-warn-unused-cli -S "${here}" -B "${WORK_DIR}/probe-${name}"
    -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${search}"
    "-DMOONEP_PROBE=${find_args}" ${args} ${P_EXTRA}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(all "${out}${err}")
  set(what "probe ${name}: find_package(MoonEP ${find_args})")
  if(P_FAILS AND rc EQUAL 0)
    message(FATAL_ERROR "${what}: the configure should have failed:\n${all}")
  elseif(NOT P_FAILS AND NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: the configure failed (${rc}); a missing package must not stop it:\n${all}")
  endif()
  if(DEFINED P_FOUND AND NOT out MATCHES "probe: MoonEP_FOUND=${P_FOUND}")
    message(FATAL_ERROR "${what}: expected MoonEP_FOUND=${P_FOUND}:\n${all}")
  endif()
  # CMake wraps a package's reason: match with the white space folded.
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${all}")
  if(P_MATCH AND NOT flat MATCHES "${P_MATCH}")
    message(FATAL_ERROR "${what}: the output does not say '${P_MATCH}':\n${all}")
  endif()
  if(P_QUIET_OUTPUT)
    string(REGEX REPLACE "-- probe: [^\n]*" "" rest "${out}")
    if(NOT err STREQUAL "" OR rest MATCHES "MoonEP|Kokkos")
      message(FATAL_ERROR "${what}: QUIET printed something:\n${all}")
    endif()
  endif()
  math(EXPR n "${probes} + 1")
  set(probes ${n} PARENT_SCOPE)
  set(probe_output "${out}" PARENT_SCOPE)
endfunction()

# The real package: optional components report what was built; the Kokkos
# MoonEP was built with is found with nothing but MoonEP's prefix given.
probe(optional "REQUIRED,OPTIONAL_COMPONENTS,mpi,cuda" FOUND "(1|TRUE) mpi=${HAVE_MPI} cuda=${HAVE_CUDA}")
probe(hint "REQUIRED" OWN_PREFIXES_ONLY FOUND "(1|TRUE) ")
string(REGEX MATCH "Kokkos_DIR=([^\n]*)" _ "${probe_output}")
get_filename_component(found_kokkos "${CMAKE_MATCH_1}" REALPATH)
get_filename_component(built_kokkos "${KOKKOS_DIR}" REALPATH)
if(NOT found_kokkos STREQUAL built_kokkos)
  message(FATAL_ERROR "probe hint: found Kokkos in ${found_kokkos}, not the one MoonEP was built with (${built_kokkos})")
endif()
probe(unknown "REQUIRED,COMPONENTS,foo" FAILS MATCH "has no component 'foo'")
# Kokkos missing.
probe(no_kokkos_quiet "QUIET" FOUND "(0|FALSE) " QUIET_OUTPUT EXTRA -DCMAKE_DISABLE_FIND_PACKAGE_Kokkos=ON)
# (REQUIRED reaches find_dependency(Kokkos), where CMake refuses to disable
# a required package in words of its own: the configure must still fail
# and name Kokkos.)
probe(no_kokkos "REQUIRED" FAILS MATCH "Kokkos" EXTRA -DCMAKE_DISABLE_FIND_PACKAGE_Kokkos=ON)
# Components this MoonEP was not built with.
fake_prefix(no_mpi "set(MoonEP_HAVE_MPI ${HAVE_MPI})" "set(MoonEP_HAVE_MPI OFF)")
fake_prefix(no_cuda "set(MoonEP_HAVE_CUDA ${HAVE_CUDA})" "set(MoonEP_HAVE_CUDA OFF)")
probe(no_mpi "COMPONENTS,mpi" PREFIX "${WORK_DIR}/fake-no_mpi" FOUND "(0|FALSE) "
      MATCH "component 'mpi' is not available: the MoonEP in [^\n]* was built without MPI worlds")
probe(no_mpi_required "REQUIRED,COMPONENTS,mpi,cuda" PREFIX "${WORK_DIR}/fake-no_mpi" FAILS
      MATCH "component 'mpi' is not available")
probe(no_cuda_quiet "QUIET,COMPONENTS,cuda" PREFIX "${WORK_DIR}/fake-no_cuda" FOUND "(0|FALSE) " QUIET_OUTPUT)
probe(no_cuda_required "REQUIRED,COMPONENTS,cuda" PREFIX "${WORK_DIR}/fake-no_cuda" FAILS
      MATCH "component 'cuda' is not available: [^\n]*built without the CUDA specialization")
# A Kokkos of another major.minor than MoonEP's.
fake_prefix(other_kokkos "set(MoonEP_KOKKOS_VERSION_BUILT \"" "set(MoonEP_KOKKOS_VERSION_BUILT \"99.0.00\")\n#\"")
probe(other_kokkos_quiet "QUIET" PREFIX "${WORK_DIR}/fake-other_kokkos" FOUND "(0|FALSE) " QUIET_OUTPUT)
probe(other_kokkos "REQUIRED" PREFIX "${WORK_DIR}/fake-other_kokkos" FAILS
      MATCH "MoonEP was built with Kokkos 99.0.00 [^\n]*but Kokkos [0-9.]+ was found")
message(STATUS "find_package(MoonEP): ${probes} probes behaved")
