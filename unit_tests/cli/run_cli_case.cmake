# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs moonep-plan once (or twice) and checks what it did; run by CTest as
#   cmake -DEXE=... -DARGS=a|b|c -DWORK=dir [options] -P run_cli_case.cmake
# Options (lists are separated by |):
#   EXPECT_RC       exit status, or "nonzero"
#   EXPECT_STDERR   bad-input runs: stderr must hold exactly one line
#                   starting with "moonep-plan", and it is one whole line
#                   "moonep-plan: error: ...\n" containing these texts
#                   (keep [ and ] balanced in every list element: CMake
#                   does not split a list inside brackets)
#   EXPECT_STDOUT   texts standard output must contain
#   ALLOW_STDERR    successful runs may write anything to stderr (the
#                   summary goes there when the plan goes to stdout);
#                   without it a run must write no line starting with
#                   "moonep-plan" there
#   OUTPUT          the plan file the run names; OUTPUT_MODE says what to
#                   expect of it: absent (not created), untouched (a file
#                   that existed before keeps its content), both (absent,
#                   then untouched: two runs), created, replaced (a file
#                   that existed before was replaced)
#   STDOUT_FILE     save standard output there
#   INPUT_FILE      feed this file on standard input
#   CHECK           a command that must succeed afterwards
# Lines on stderr that do not start with "moonep-plan" are ignored: they are
# a dependency's (Kokkos 4.x's OpenMP backend warns about OMP_PROC_BIND at
# initialize, MPI may print notices), not moonep-plan's output, and no test
# should fail on them. The cli_runner_* tests (tests_cli.cmake, with
# fake_moonep_plan.sh) check that a missing, repeated or partial error line
# still fails.
cmake_minimum_required(VERSION 3.18)

string(REPLACE "|" ";" args "${ARGS}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(sentinel "pre-existing content, must survive a failed run\n")

function(fail msg)
  message(FATAL_ERROR "moonep-plan ${ARGS}\n${msg}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endfunction()

# Sets ours (the number of stderr lines starting with "moonep-plan"),
# our_line (the last of them, without its newline) and our_line_whole (ON
# when that line ends with a newline) in the caller.
function(moonep_lines_of text)
  set(rest "${text}")
  set(count 0)
  set(last "")
  set(whole OFF)
  while(NOT rest STREQUAL "")
    string(FIND "${rest}" "\n" nl)
    if(nl EQUAL -1)
      set(line "${rest}")
      set(rest "")
      set(ended OFF)
    else()
      string(SUBSTRING "${rest}" 0 ${nl} line)
      math(EXPR nl "${nl} + 1")
      string(SUBSTRING "${rest}" ${nl} -1 rest)
      set(ended ON)
    endif()
    string(FIND "${line}" "moonep-plan" at)
    if(at EQUAL 0)
      math(EXPR count "${count} + 1")
      set(last "${line}")
      set(whole ${ended})
    endif()
  endwhile()
  set(ours ${count} PARENT_SCOPE)
  set(our_line "${last}" PARENT_SCOPE)
  set(our_line_whole ${whole} PARENT_SCOPE)
endfunction()

function(run_once mode)
  if(mode STREQUAL "untouched" OR mode STREQUAL "replaced")
    file(WRITE "${OUTPUT}" "${sentinel}")
  elseif(OUTPUT AND NOT IS_DIRECTORY "${OUTPUT}")
    file(REMOVE "${OUTPUT}")
  endif()
  set(extra)
  if(INPUT_FILE)
    list(APPEND extra INPUT_FILE "${INPUT_FILE}")
  endif()
  execute_process(COMMAND "${EXE}" ${args} ${extra}
    WORKING_DIRECTORY "${WORK}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)

  if(NOT rc MATCHES "^[0-9]+$")
    fail("did not exit normally: ${rc}")
  endif()
  if(EXPECT_RC STREQUAL "nonzero")
    if(rc EQUAL 0)
      fail("exit status 0, expected a failure")
    endif()
  elseif(NOT rc EQUAL EXPECT_RC)
    fail("exit status ${rc}, expected ${EXPECT_RC}")
  endif()

  moonep_lines_of("${err}")
  if(DEFINED EXPECT_STDERR)
    if(NOT ours EQUAL 1)
      fail("stderr has ${ours} lines starting with 'moonep-plan', expected exactly one 'moonep-plan: error: ...'")
    endif()
    if(NOT our_line_whole OR NOT our_line MATCHES "^moonep-plan: error: ")
      fail("stderr's moonep-plan line is not one whole line 'moonep-plan: error: ...'")
    endif()
    string(REPLACE "|" ";" wanted "${EXPECT_STDERR}")
    foreach(text IN LISTS wanted)
      string(FIND "${our_line}" "${text}" at)
      if(at EQUAL -1)
        fail("stderr does not name '${text}'")
      endif()
    endforeach()
  elseif(NOT ALLOW_STDERR AND NOT ours EQUAL 0)
    fail("unexpected moonep-plan output on stderr")
  endif()

  string(REPLACE "|" ";" wanted "${EXPECT_STDOUT}")
  foreach(text IN LISTS wanted)
    string(FIND "${out}" "${text}" at)
    if(at EQUAL -1)
      fail("stdout does not contain '${text}'")
    endif()
  endforeach()

  if(OUTPUT)
    if(mode STREQUAL "absent" AND EXISTS "${OUTPUT}" AND NOT IS_DIRECTORY "${OUTPUT}")
      fail("a failed run created ${OUTPUT}")
    elseif(mode STREQUAL "untouched")
      file(READ "${OUTPUT}" now)
      if(NOT now STREQUAL sentinel)
        fail("a failed run changed the existing ${OUTPUT}")
      endif()
    elseif(mode STREQUAL "created" AND NOT EXISTS "${OUTPUT}")
      fail("${OUTPUT} was not written")
    elseif(mode STREQUAL "replaced")
      file(READ "${OUTPUT}" now)
      if(now STREQUAL sentinel)
        fail("the existing ${OUTPUT} was not replaced")
      endif()
    endif()
    get_filename_component(dir "${OUTPUT}" DIRECTORY)
    file(GLOB leftovers "${dir}/.*.tmp.*")
    if(leftovers)
      fail("temporary files left behind: ${leftovers}")
    endif()
  endif()
endfunction()

if(OUTPUT_MODE STREQUAL "both")
  run_once(absent)
  run_once(untouched)
else()
  run_once("${OUTPUT_MODE}")
endif()

if(STDOUT_FILE)
  file(WRITE "${STDOUT_FILE}" "${out}")
endif()
if(CHECK)
  string(REPLACE "|" ";" check "${CHECK}")
  execute_process(COMMAND ${check} WORKING_DIRECTORY "${WORK}"
    RESULT_VARIABLE crc OUTPUT_VARIABLE cout ERROR_VARIABLE cerr)
  if(NOT crc EQUAL 0)
    fail("check failed (${crc}): ${CHECK}\n${cout}${cerr}")
  endif()
endif()
