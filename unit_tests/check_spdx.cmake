# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# check_spdx.cmake — every source file of the repository carries the line
#   SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# on its first line, or its second after a shebang (LICENSE has the text).
#   cmake -DSOURCE_DIR=<repo> -P check_spdx.cmake
# Source files: C++/CUDA sources and headers, CMake files, shell and Python
# scripts (.ci/run too), the .in templates of those; the files git tracks in
# SOURCE_DIR when it is a git checkout, else every such file outside build*/.
# Fails naming each file without it.
#   cmake -DSELF_TEST_DIR=<empty dir> -P check_spdx.cmake
# proves the check can fail: it writes files with and without the line
# there, and expects the check to fail naming exactly those without.
cmake_policy(VERSION 3.18)

if(SELF_TEST_DIR)
  file(REMOVE_RECURSE "${SELF_TEST_DIR}")
  set(_line "SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception")
  file(WRITE "${SELF_TEST_DIR}/good.sh" "#!/bin/sh\n# ${_line}\necho\n")
  file(WRITE "${SELF_TEST_DIR}/src/good.hpp" "// ${_line}\n#pragma once\n")
  file(WRITE "${SELF_TEST_DIR}/src/CMakeLists.txt" "# ${_line}\n")
  file(WRITE "${SELF_TEST_DIR}/src/late.cpp" "// a comment first\n// ${_line}\n")
  file(WRITE "${SELF_TEST_DIR}/src/none.cu" "__global__ void k() {}\n")
  file(WRITE "${SELF_TEST_DIR}/shebang_only.py" "#!/usr/bin/env python3\n")
  file(WRITE "${SELF_TEST_DIR}/notes.md" "not a source file\n")
  execute_process(COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${SELF_TEST_DIR} -P "${CMAKE_CURRENT_LIST_FILE}"
                  RESULT_VARIABLE _rc ERROR_VARIABLE _err OUTPUT_VARIABLE _out)
  set(_wrong "")
  foreach(_f shebang_only.py src/late.cpp src/none.cu)
    string(FIND "${_err}" "${_f}" _at)
    if(_at EQUAL -1)
      list(APPEND _wrong "not named: ${_f}")
    endif()
  endforeach()
  foreach(_f good.sh src/good.hpp src/CMakeLists.txt notes.md)
    string(FIND "${_err}" "${_f}" _at)
    if(NOT _at EQUAL -1)
      list(APPEND _wrong "named: ${_f}")
    endif()
  endforeach()
  if(_rc EQUAL 0 OR _wrong OR NOT _err MATCHES "3 of 6 source files")
    message(FATAL_ERROR "check_spdx.cmake self-test: expected a failure naming the 3 of 6 source "
                        "files without the line; got exit ${_rc} (${_wrong}):\n${_err}")
  endif()
  message(STATUS "check_spdx.cmake self-test: the check failed as it should, naming the 3 files without the line")
  return()
endif()

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_spdx.cmake: pass -DSOURCE_DIR=<repository>")
endif()
set(_want "SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception")
set(_source_regex "(\\.(c|cc|cpp|h|hpp|cu|cuh|cmake|sh|py)(\\.in)?|CMakeLists\\.txt|^\\.ci/run)$")

set(_files "")
find_program(_git git)
if(_git AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${_git}" -C "${SOURCE_DIR}" ls-files
                  OUTPUT_VARIABLE _listed RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "check_spdx.cmake: git ls-files failed in ${SOURCE_DIR}")
  endif()
  string(REPLACE "\n" ";" _files "${_listed}")
else()
  file(GLOB_RECURSE _files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/*")
  list(FILTER _files EXCLUDE REGEX "^(build[^/]*|\\.git)/")
endif()
list(FILTER _files INCLUDE REGEX "${_source_regex}")

set(_missing "")
set(_checked 0)
foreach(_f IN LISTS _files)
  if(NOT EXISTS "${SOURCE_DIR}/${_f}")  # deleted in the work tree, not yet in git
    continue()
  endif()
  math(EXPR _checked "${_checked} + 1")
  file(STRINGS "${SOURCE_DIR}/${_f}" _head LIMIT_COUNT 2)
  list(GET _head 0 _first)
  set(_top "${_first}")
  if(_first MATCHES "^#!")
    list(LENGTH _head _n)
    if(_n GREATER 1)
      list(GET _head 1 _top)
    else()
      set(_top "")
    endif()
  endif()
  string(FIND "${_top}" "${_want}" _at)
  if(_at EQUAL -1)
    list(APPEND _missing "${_f}")
  endif()
endforeach()

if(_checked EQUAL 0)
  message(FATAL_ERROR "check_spdx.cmake: no source files found in ${SOURCE_DIR}")
endif()
if(_missing)
  list(LENGTH _missing _nm)
  string(REPLACE ";" "\n  " _list "${_missing}")
  message(FATAL_ERROR "${_nm} of ${_checked} source files lack '${_want}' on their first line "
                      "(the second after a shebang; scripts/add_spdx.py adds it):\n  ${_list}")
endif()
message(STATUS "all ${_checked} source files carry '${_want}'")
