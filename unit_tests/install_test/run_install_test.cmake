# Installs the MoonEP build tree into a fresh prefix, then configures,
# builds and runs the downstream project in this directory against it.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
#         -DBUILD_TYPE=... [-DEXTRA_ARGS=a|b] [-DUSER_PREFIXES=p|q]
#         -P run_install_test.cmake
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
step("configuring the downstream project" "${CMAKE_COMMAND}" -S "${here}" -B "${WORK_DIR}/build"
     -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
     "-DCMAKE_PREFIX_PATH=${prefixes}" ${extra})
step("building the downstream project" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
step("running the downstream program" "${WORK_DIR}/build/moonep_downstream")
message(STATUS "${step_output}")
