# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# moonep-plan, run as a user runs it: exit status, the one error line on
# stderr, and what happens to the output file. Included from tests_io.cmake.
set(_cli_dir ${CMAKE_CURRENT_LIST_DIR})
set(_cli_work ${CMAKE_CURRENT_BINARY_DIR}/cli_work)

add_executable(moonep_check_plan_file ${_cli_dir}/check_plan_file.cpp)
target_link_libraries(moonep_check_plan_file PRIVATE moonep)

# moonep_cli_test(NAME ARGS a|b|c [KEY value]...) — see run_cli_case.cmake
# for the keys. Each test works in its own directory, cli_work/NAME.
function(moonep_cli_test name)
  cmake_parse_arguments(T "ALLOW_STDERR" "ARGS;EXPECT_RC;EXPECT_STDERR;EXPECT_STDOUT;OUTPUT;OUTPUT_MODE;STDOUT_FILE;INPUT_FILE;CHECK" "" ${ARGN})
  set(defs -DEXE=$<TARGET_FILE:moonep-plan> "-DARGS=${T_ARGS}" -DWORK=${_cli_work}/${name}
           -DEXPECT_RC=${T_EXPECT_RC})
  foreach(key EXPECT_STDERR EXPECT_STDOUT OUTPUT OUTPUT_MODE STDOUT_FILE INPUT_FILE CHECK)
    if(DEFINED T_${key})
      list(APPEND defs "-D${key}=${T_${key}}")
    endif()
  endforeach()
  if(T_ALLOW_STDERR)
    list(APPEND defs -DALLOW_STDERR=ON)
  endif()
  add_test(NAME cli_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${_cli_dir}/run_cli_case.cmake)
endfunction()

# ---- the runner itself (run_cli_case.cmake), on fake_moonep_plan.sh: a
# dependency's lines on stderr are ignored, but a bad-input run still needs
# exactly one whole "moonep-plan: error: ..." line naming the texts, and a
# successful run no moonep-plan line. A case given FAILS_WITH passes only
# when the runner fails with that message.
find_program(MoonEP_SH NAMES sh)
function(moonep_cli_runner_test name mode)
  cmake_parse_arguments(T "" "EXPECT_RC;EXPECT_STDERR;EXPECT_STDOUT;FAILS_WITH" "" ${ARGN})
  set(defs -DEXE=${MoonEP_SH} "-DARGS=${_cli_dir}/fake_moonep_plan.sh|${mode}"
           -DWORK=${_cli_work}/runner_${name} -DEXPECT_RC=${T_EXPECT_RC})
  foreach(key EXPECT_STDERR EXPECT_STDOUT)
    if(DEFINED T_${key})
      list(APPEND defs "-D${key}=${T_${key}}")
    endif()
  endforeach()
  add_test(NAME cli_runner_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${_cli_dir}/run_cli_case.cmake)
  if(DEFINED T_FAILS_WITH)
    set_tests_properties(cli_runner_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${T_FAILS_WITH}")
  endif()
endfunction()
if(MoonEP_SH)
  set(_fake_error "p.json: |routing[2][7]: expected an integer expert id")
  moonep_cli_runner_test(ignores_warning_before_error warning_then_error EXPECT_RC 2 EXPECT_STDERR "${_fake_error}")
  moonep_cli_runner_test(ignores_warning_after_error error_then_warning EXPECT_RC 2 EXPECT_STDERR "${_fake_error}")
  moonep_cli_runner_test(ignores_warning_on_success success_warning EXPECT_RC 0 EXPECT_STDOUT "ok")
  moonep_cli_runner_test(fails_without_error_line warning_only EXPECT_RC 2 EXPECT_STDERR "${_fake_error}"
    FAILS_WITH "stderr has 0 lines starting with 'moonep-plan'")
  moonep_cli_runner_test(fails_on_two_error_lines two_errors EXPECT_RC 2 EXPECT_STDERR "${_fake_error}"
    FAILS_WITH "stderr has 2 lines starting with 'moonep-plan'")
  moonep_cli_runner_test(fails_on_partial_error_line partial_error EXPECT_RC 2 EXPECT_STDERR "p.json: "
    FAILS_WITH "moonep-plan line is not one whole line")
  moonep_cli_runner_test(fails_on_error_mid_line error_mid_line EXPECT_RC 2 EXPECT_STDERR "${_fake_error}"
    FAILS_WITH "stderr has 0 lines starting with 'moonep-plan'")
  moonep_cli_runner_test(fails_on_missing_text warning_then_error EXPECT_RC 2 EXPECT_STDERR "p.json: |not named here"
    FAILS_WITH "stderr does not name 'not named here'")
  moonep_cli_runner_test(fails_on_moonep_line_on_success success_moonep_line EXPECT_RC 0
    FAILS_WITH "unexpected moonep-plan output on stderr")
else()
  message(STATUS "MoonEP: no sh found; the cli_runner_* tests of run_cli_case.cmake are skipped")
endif()

# ---- bad problem files: exit 2, one line naming the file and the place, no
# output file, an existing output file untouched. (Expected texts: keep [ ]
# balanced, CMake lists do not split inside brackets.)
set(_bad_cases
  "truncated|invalid JSON at byte 163"
  "not_json|invalid JSON at byte 1"
  "empty|invalid JSON at byte 1"
  "top_level_array|top level: expected an object"
  "duplicate_key|key \"topk\" appears twice"
  "missing_routing|missing required field \"routing\""
  "missing_topk|missing required field \"topk\""
  "ranks_string|ranks: expected an integer, got \"4\""
  "ranks_float|ranks: expected an integer, got 4.5"
  "ranks_negative|ranks must be in 1..128, got -4"
  "ranks_huge|ranks: 4294967296 does not fit in a 32-bit integer"
  "ranks_too_many|ranks must be in 1..128, got 129"
  "experts_not_multiple|experts (18) must be a multiple of ranks (4)"
  "copy_slots_zero|copy_slots must be >= 1"
  "topk_too_large|topk must be in 1..32"
  "token_padding_zero|token_padding must be >= 1"
  "tokens_zero|tokens must be >= 1"
  "int32_overflow|exceeds int32"
  "routing_not_nested|routing[0]: expected an array of expert ids"
  "routing_string_id|routing[2][7]: expected an integer expert id, got \"x\""
  "expert_out_of_range|routing[1][3] = 16 is not an expert id in"
  "expert_negative|routing[0][0] = -1 is not an expert id"
  "routing_short|routing[3] has 15 entries"
  "routing_missing_rank|routing has 3 rank arrays, expected ranks = 4"
  "tpe_mismatch|tokens_per_expert[2][5]"
  "tpe_short|tokens_per_expert[1] has 15 counts")
foreach(_case IN LISTS _bad_cases)
  string(FIND "${_case}" "|" _bar)
  string(SUBSTRING "${_case}" 0 ${_bar} _name)
  math(EXPR _bar "${_bar} + 1")
  string(SUBSTRING "${_case}" ${_bar} -1 _expected)
  moonep_cli_test(bad_${_name}
    ARGS "--input|${_cli_dir}/bad/${_name}.json|--output|${_cli_work}/bad_${_name}/plan.json"
    EXPECT_RC 2 EXPECT_STDERR "bad/${_name}.json: |${_expected}"
    OUTPUT ${_cli_work}/bad_${_name}/plan.json OUTPUT_MODE both)
endforeach()

# ---- bad usage
moonep_cli_test(usage_unknown_option ARGS "--frobnicate" EXPECT_RC 2 EXPECT_STDERR "unknown option '--frobnicate'")
moonep_cli_test(usage_missing_value ARGS "--input" EXPECT_RC 2 EXPECT_STDERR "--input needs a value")
moonep_cli_test(usage_bad_number ARGS "--ranks|eight" EXPECT_RC 2 EXPECT_STDERR "--ranks: expected an integer, got 'eight'")
moonep_cli_test(usage_bad_backend ARGS "--backend|gpu" EXPECT_RC 2 EXPECT_STDERR "unknown backend 'gpu'")
moonep_cli_test(usage_bad_world ARGS "--world|cluster" EXPECT_RC 2 EXPECT_STDERR "--world: unknown world 'cluster'")
moonep_cli_test(usage_synthetic_with_input
  ARGS "--input|${_cli_dir}/problems/good.json|--ranks|4" EXPECT_RC 2 EXPECT_STDERR "--ranks is for synthetic mode")
moonep_cli_test(missing_input_file
  ARGS "--input|${_cli_work}/missing_input_file/nope.json|--output|${_cli_work}/missing_input_file/plan.json"
  EXPECT_RC 2 EXPECT_STDERR "cannot read problem file"
  OUTPUT ${_cli_work}/missing_input_file/plan.json OUTPUT_MODE both)
moonep_cli_test(bad_synthetic_config
  ARGS "--ranks|4|--experts|10|--output|${_cli_work}/bad_synthetic_config/plan.json"
  EXPECT_RC 2 EXPECT_STDERR "experts (10) must be a multiple of ranks (4)"
  OUTPUT ${_cli_work}/bad_synthetic_config/plan.json OUTPUT_MODE both)
# [R][E] tables alone would take terabytes: refused up front (exit 2, the
# sizes named), not OOM-killed.
moonep_cli_test(synthetic_too_large_for_memory
  ARGS "--ranks|128|--experts|8388608|--tokens|1|--token-padding|1|--steps|1"
  EXPECT_RC 2 EXPECT_STDERR "planning R=128 E=8388608|GiB), more than the memory limit of")
moonep_cli_test(help ARGS "--help" EXPECT_RC 0 EXPECT_STDOUT "usage: moonep-plan|--backend|--imbalance")
moonep_cli_test(bad_mpi_world_kind ARGS "--world|mpi|--mpi-world|ring" EXPECT_RC 2 EXPECT_STDERR "--mpi-world: unknown kind 'ring'")
if(NOT MoonEP_HAVE_MPI OR NOT EXISTS ${PROJECT_SOURCE_DIR}/src/tools/world_mpi.cpp)
  moonep_cli_test(world_mpi_unavailable ARGS "--world|mpi" EXPECT_RC 1 EXPECT_STDERR "--world mpi is not available")
endif()
if(NOT MoonEP_HAVE_CUDA)
  moonep_cli_test(backend_cuda_unavailable ARGS "--backend|cuda|--steps|1" EXPECT_RC 1 EXPECT_STDERR "backend cuda is not available")
  moonep_cli_test(world_gpu_unavailable ARGS "--world|gpu|--steps|1" EXPECT_RC 1
    EXPECT_STDERR "--world gpu needs MoonEP built with CUDA")
endif()
moonep_cli_test(usage_world_gpu_other_backend ARGS "--world|gpu|--backend|portable" EXPECT_RC 2
  EXPECT_STDERR "--world gpu plans with the cuda backend, not --backend portable")
moonep_cli_test(usage_devices_without_world_gpu ARGS "--devices|0,1" EXPECT_RC 2
  EXPECT_STDERR "--devices is for --world gpu")
moonep_cli_test(usage_bad_devices ARGS "--world|gpu|--devices|0,x" EXPECT_RC 2
  EXPECT_STDERR "--devices: expected an integer, got 'x'")
# --multicast is an opt-in of the GPU world only (refused at once, in every
# build: no GPU is needed to say so).
moonep_cli_test(usage_multicast_without_world_gpu ARGS "--multicast|--steps|1" EXPECT_RC 2
  EXPECT_STDERR "--multicast is for --world gpu")
moonep_cli_test(usage_multicast_with_world_mpi ARGS "--world|mpi|--multicast" EXPECT_RC 2
  EXPECT_STDERR "--multicast is for --world gpu")

# ---- runtime failures writing the output: exit 1, nothing left behind
moonep_cli_test(output_dir_missing
  ARGS "--input|${_cli_dir}/problems/good.json|--output|${_cli_work}/output_dir_missing/no/plan.json"
  EXPECT_RC 1 EXPECT_STDERR "cannot write plan file"
  OUTPUT ${_cli_work}/output_dir_missing/no/plan.json OUTPUT_MODE absent)
moonep_cli_test(output_is_directory
  ARGS "--input|${_cli_dir}/problems/good.json|--output|${_cli_work}/output_is_directory"
  EXPECT_RC 1 EXPECT_STDERR "cannot write plan file"
  OUTPUT ${_cli_work}/output_is_directory OUTPUT_MODE absent)

# ---- planning problem files end to end: the plan file is plan_reference's
# (good_ragged: a ragged step with an empty and a full rank, planned by the
# default backend: portable here, cuda on a machine with a GPU)
foreach(_p good good_tpe good_ragged)
  moonep_cli_test(plan_${_p}
    ARGS "--input|${_cli_dir}/problems/${_p}.json|--output|${_cli_work}/plan_${_p}/plan.json"
    EXPECT_RC 0 OUTPUT ${_cli_work}/plan_${_p}/plan.json OUTPUT_MODE created
    CHECK "$<TARGET_FILE:moonep_check_plan_file>|${_cli_dir}/problems/${_p}.json|${_cli_work}/plan_${_p}/plan.json")
endforeach()
moonep_cli_test(plan_reference_backend
  ARGS "--backend|reference|--input|${_cli_dir}/problems/good.json|--output|${_cli_work}/plan_reference_backend/plan.json"
  EXPECT_RC 0 OUTPUT ${_cli_work}/plan_reference_backend/plan.json OUTPUT_MODE created
  CHECK "$<TARGET_FILE:moonep_check_plan_file>|${_cli_dir}/problems/good.json|${_cli_work}/plan_reference_backend/plan.json")
moonep_cli_test(plan_replaces_existing_output
  ARGS "--input|${_cli_dir}/problems/good.json|--output|${_cli_work}/plan_replaces_existing_output/plan.json"
  EXPECT_RC 0 OUTPUT ${_cli_work}/plan_replaces_existing_output/plan.json OUTPUT_MODE replaced
  CHECK "$<TARGET_FILE:moonep_check_plan_file>|${_cli_dir}/problems/good.json|${_cli_work}/plan_replaces_existing_output/plan.json")
moonep_cli_test(plan_to_stdout
  ARGS "--input|${_cli_dir}/problems/good.json|--output|-"
  EXPECT_RC 0 EXPECT_STDOUT "\"plans\":" STDOUT_FILE ${_cli_work}/plan_to_stdout/plan.json
  CHECK "$<TARGET_FILE:moonep_check_plan_file>|${_cli_dir}/problems/good.json|${_cli_work}/plan_to_stdout/plan.json")
moonep_cli_test(plan_from_stdin
  ARGS "--input|-|--output|${_cli_work}/plan_from_stdin/plan.json"
  INPUT_FILE ${_cli_dir}/problems/good.json
  EXPECT_RC 0 OUTPUT ${_cli_work}/plan_from_stdin/plan.json OUTPUT_MODE created
  CHECK "$<TARGET_FILE:moonep_check_plan_file>|${_cli_dir}/problems/good.json|${_cli_work}/plan_from_stdin/plan.json")

# ---- synthetic mode: the summary, and its problem/plan files agree
moonep_cli_test(synthetic_summary
  ARGS "--ranks|8|--experts|64|--topk|4|--tokens|512|--copy-slots|4|--token-padding|16|--imbalance|1.5|--steps|3"
  EXPECT_RC 0
  EXPECT_STDOUT "R=8 E=64 K=4 S=512 B=4 tp=16|load before|max/mean |-> 1.00 (busiest rank|experts copied: |padding slots: |time per step: ")
# Without --copy-slots: E/R per rank (planning.md "Copy slots"), 1 with one rank.
moonep_cli_test(synthetic_default_copy_slots
  ARGS "--ranks|4|--experts|32|--topk|4|--tokens|64|--token-padding|4|--imbalance|3|--steps|1"
  EXPECT_RC 0 EXPECT_STDOUT "R=4 E=32 K=4 S=64 B=8 tp=4|in total, of 32 copy slots")
moonep_cli_test(synthetic_default_copy_slots_one_rank
  ARGS "--ranks|1|--experts|16|--topk|2|--tokens|8|--token-padding|4|--steps|1"
  EXPECT_RC 0 EXPECT_STDOUT "R=1 E=16 K=2 S=8 B=1 tp=4")
moonep_cli_test(synthetic_copy_slots_zero ARGS "--copy-slots|0|--steps|1"
  EXPECT_RC 2 EXPECT_STDERR "copy_slots must be >= 1, got 0")
# The timing line says how the backend ran (the Kokkos execution space).
moonep_cli_test(synthetic_portable_details
  ARGS "--ranks|2|--experts|8|--topk|2|--tokens|64|--copy-slots|1|--token-padding|4|--steps|2|--backend|portable"
  EXPECT_RC 0 EXPECT_STDOUT "backend portable: Kokkos ")
moonep_cli_test(synthetic_files
  ARGS "--ranks|4|--experts|32|--topk|4|--tokens|128|--copy-slots|2|--token-padding|8|--imbalance|2|--seed|9|--steps|2|--save-problem|${_cli_work}/synthetic_files/problem.json|--output|${_cli_work}/synthetic_files/plan.json"
  EXPECT_RC 0 EXPECT_STDOUT "max/mean " OUTPUT ${_cli_work}/synthetic_files/plan.json OUTPUT_MODE created
  CHECK "$<TARGET_FILE:moonep_check_plan_file>|${_cli_work}/synthetic_files/problem.json|${_cli_work}/synthetic_files/plan.json")
# A ragged synthetic step (--ragged): the counts are drawn from the seed,
# the summary says what each rank must receive, and the plan file (with
# the problem saved beside it) is exactly plan_reference's.
moonep_cli_test(synthetic_ragged
  ARGS "--ragged|--ranks|4|--experts|16|--topk|4|--tokens|64|--copy-slots|4|--token-padding|4|--seed|3|--steps|2|--backend|portable|--save-problem|${_cli_work}/synthetic_ragged/problem.json|--output|${_cli_work}/synthetic_ragged/plan.json"
  EXPECT_RC 0 EXPECT_STDOUT "ragged synthetic step|a ragged step of T = |tokens per rank: |max/mean "
  OUTPUT ${_cli_work}/synthetic_ragged/plan.json OUTPUT_MODE created
  CHECK "$<TARGET_FILE:moonep_check_plan_file>|${_cli_work}/synthetic_ragged/problem.json|${_cli_work}/synthetic_ragged/plan.json")
moonep_cli_test(usage_ragged_with_input
  ARGS "--input|${_cli_dir}/problems/good.json|--ragged" EXPECT_RC 2 EXPECT_STDERR "--ragged is for synthetic mode")
moonep_cli_test(synthetic_plan_to_stdout
  ARGS "--ranks|2|--experts|8|--topk|2|--tokens|16|--copy-slots|1|--token-padding|4|--steps|1|--output|-"
  EXPECT_RC 0 ALLOW_STDERR EXPECT_STDOUT "{\"ranks\":2,\"experts\":8")

# ---- --version, --json, --table
moonep_cli_test(version ARGS "--version" EXPECT_RC 0
  EXPECT_STDOUT "moonep-plan ${PROJECT_VERSION}|built with Kokkos ${MoonEP_KOKKOS_VERSION}|backends: reference, portable")
# The JSON summary, parsed and checked against the plan and problem files
# of the same run (check_summary_json.cpp).
add_executable(moonep_check_summary_json ${_cli_dir}/check_summary_json.cpp)
target_link_libraries(moonep_check_summary_json PRIVATE moonep nlohmann_json::nlohmann_json)
set(_w ${_cli_work}/json_synthetic)
moonep_cli_test(json_synthetic
  ARGS "--ranks|8|--experts|64|--topk|4|--tokens|512|--copy-slots|4|--token-padding|16|--imbalance|1.5|--steps|3|--backend|reference|--json|--save-problem|${_w}/problem.json|--output|${_w}/plan.json"
  EXPECT_RC 0 EXPECT_STDOUT "{\"" STDOUT_FILE ${_w}/summary.json
  CHECK "$<TARGET_FILE:moonep_check_summary_json>|${_w}/summary.json|${_w}/problem.json|${_w}/plan.json|3|reference")
set(_w ${_cli_work}/json_ragged)
moonep_cli_test(json_ragged
  ARGS "--ragged|--ranks|4|--experts|16|--topk|4|--tokens|64|--token-padding|4|--seed|5|--steps|2|--backend|portable|--json|--save-problem|${_w}/problem.json|--output|${_w}/plan.json"
  EXPECT_RC 0 EXPECT_STDOUT "\"tokens_per_rank\":" STDOUT_FILE ${_w}/summary.json
  CHECK "$<TARGET_FILE:moonep_check_summary_json>|${_w}/summary.json|${_w}/problem.json|${_w}/plan.json|2|portable")
set(_w ${_cli_work}/json_input)
moonep_cli_test(json_input
  ARGS "--input|${_cli_dir}/problems/good.json|--output|${_w}/plan.json|--json|--steps|2|--backend|portable"
  EXPECT_RC 0 EXPECT_STDOUT "\"mode\":\"file\"" STDOUT_FILE ${_w}/summary.json
  CHECK "$<TARGET_FILE:moonep_check_summary_json>|${_w}/summary.json|${_cli_dir}/problems/good.json|${_w}/plan.json|2|portable")
# Many ranks: the extremes and a histogram, not a row per rank.
moonep_cli_test(table_compact
  ARGS "--ranks|64|--experts|256|--topk|2|--tokens|64|--copy-slots|2|--token-padding|4|--steps|1"
  EXPECT_RC 0
  EXPECT_STDOUT "64 ranks: the 4 busiest and the 4 least loaded|   ...|ranks per range|load after: 128 on every rank|max/mean ")
moonep_cli_test(bad_table ARGS "--table|wide" EXPECT_RC 2 EXPECT_STDERR "--table: unknown style 'wide'")
# Progress: only on a terminal (script(1) provides one), only past a second.
find_program(MoonEP_SCRIPT NAMES script)
if(MoonEP_SCRIPT)
  add_test(NAME cli_progress_on_terminal_only
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:moonep-plan> -DSCRIPT=${MoonEP_SCRIPT}
            -DWORK=${_cli_work}/progress -P ${_cli_dir}/check_progress_tty.cmake)
  set_tests_properties(cli_progress_on_terminal_only PROPERTIES TIMEOUT 120)
endif()
