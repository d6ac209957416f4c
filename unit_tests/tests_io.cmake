# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# File formats (src/io) and the moonep-plan command line (src/tools).
moonep_add_test(test_io test_io.cpp)
find_package(nlohmann_json 3.2 REQUIRED)  # the JSON checks of the CLI tests
include(${CMAKE_CURRENT_LIST_DIR}/cli/tests_cli.cmake)
# moonep-plan's summary and progress line, and its command line: the
# parts moonep-plan is linked from (src/tools, moonep_plan_parts).
moonep_add_test(test_cli_summary test_cli_summary.cpp)
target_link_libraries(test_cli_summary PRIVATE moonep_plan_parts)
moonep_add_test(test_cli_options test_cli_options.cpp)
target_link_libraries(test_cli_options PRIVATE moonep_plan_parts)
