# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# docs/spec/formats.md shows the worked example's problem file and the plan
# moonep-plan writes for it (docs/concepts.md explains that plan line by
# line). This test (cmake -P) plans the shown problem with the reference
# backend and fails when the shown plan is not what comes out.
#   -DDOC=docs/spec/formats.md -DPLANNER=<moonep-plan> -DWORK_DIR=<scratch>
file(READ "${DOC}" doc)
function(block_after marker out)
  string(FIND "${doc}" "<!-- worked example: ${marker} -->\n```json\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${DOC}: no json block after '<!-- worked example: ${marker} -->'")
  endif()
  string(SUBSTRING "${doc}" ${at} -1 rest)
  string(REGEX REPLACE "^[^\n]*\n```json\n" "" rest "${rest}")
  string(FIND "${rest}" "```" end)
  string(SUBSTRING "${rest}" 0 ${end} body)
  set(${out} "${body}" PARENT_SCOPE)
endfunction()
block_after(problem problem)
block_after(plan shown_plan)

file(MAKE_DIRECTORY "${WORK_DIR}")
file(WRITE "${WORK_DIR}/problem.json" "${problem}")
execute_process(COMMAND "${PLANNER}" --input "${WORK_DIR}/problem.json" --output - --backend reference
                RESULT_VARIABLE rc OUTPUT_VARIABLE planned ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "moonep-plan failed on the documented problem (${rc}): ${err}")
endif()
string(STRIP "${planned}" planned)
string(STRIP "${shown_plan}" shown_plan)
if(NOT planned STREQUAL shown_plan)
  message(FATAL_ERROR "${DOC} shows a different plan than moonep-plan writes:\n${planned}")
endif()
message(STATUS "the worked example's plan in ${DOC} is what moonep-plan writes")
