# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# moonep-plan's progress line: shown on a terminal once a run passes a
# second, never when standard error is not a terminal.
#   cmake -DEXE=moonep-plan -DSCRIPT=script -DWORK=dir -P check_progress_tty.cmake
# `script` gives the run a pseudo-terminal; the same run with standard
# error captured (a pipe) must print no progress.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
# About 2 s on the CI machine: reference backend, 64 ranks.
set(args --ranks 64 --experts 256 --tokens 4096 --backend reference --steps 12)
string(REPLACE ";" " " cmdline "'${EXE}' ${args}")
execute_process(COMMAND "${SCRIPT}" -qec "${cmdline}" /dev/null
                WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc OUTPUT_VARIABLE tty ERROR_VARIABLE tty_err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "on a terminal: exit ${rc}\n${tty}${tty_err}")
endif()
if(NOT tty MATCHES "moonep-plan: planning: step [0-9]+/12, [0-9.]+ s")
  message(FATAL_ERROR "on a terminal, a run of more than a second showed no progress:\n${tty}")
endif()
string(ASCII 27 esc)
if(NOT tty MATCHES "\r${esc}\\[K[^\n]*moonep-plan: synthetic step")
  message(FATAL_ERROR "the progress line was not erased before the summary:\n${tty}")
endif()
execute_process(COMMAND "${EXE}" ${args} WORKING_DIRECTORY "${WORK}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "max/mean ")
  message(FATAL_ERROR "without a terminal: exit ${rc}\n${out}${err}")
endif()
if(err MATCHES "planning: step|\r")
  message(FATAL_ERROR "progress on standard error although it is not a terminal:\n${err}")
endif()
message(STATUS "progress on a terminal only")
