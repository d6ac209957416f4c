# File formats (src/io) and the moonep-plan command line (src/tools).
moonep_add_test(test_io test_io.cpp)
include(${CMAKE_CURRENT_LIST_DIR}/cli/tests_cli.cmake)
