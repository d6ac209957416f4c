# File formats (src/io) and the moonep-plan command line (src/tools).
moonep_add_test(test_io test_io.cpp)
find_package(nlohmann_json 3.2 REQUIRED)  # the JSON checks of the CLI tests
include(${CMAKE_CURRENT_LIST_DIR}/cli/tests_cli.cmake)
# moonep-plan's summary and progress line, from its sources.
moonep_add_test(test_cli_summary test_cli_summary.cpp
  ${PROJECT_SOURCE_DIR}/src/tools/plan_summary.cpp ${PROJECT_SOURCE_DIR}/src/tools/progress.cpp)
find_package(Threads REQUIRED)
target_link_libraries(test_cli_summary PRIVATE nlohmann_json::nlohmann_json Threads::Threads)
# moonep-plan's command line, from its sources.
moonep_add_test(test_cli_options test_cli_options.cpp
  ${PROJECT_SOURCE_DIR}/src/tools/plan_options.cpp ${PROJECT_SOURCE_DIR}/src/tools/memory_budget.cpp)
