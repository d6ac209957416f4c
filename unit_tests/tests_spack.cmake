# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The Spack recipe's variants and cmake_args against our CMake options.
add_test(NAME spack_recipe_matches_cmake_options
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_spack_recipe.cmake)
# The same check must fail on a recipe with a renamed option.
add_test(NAME spack_recipe_check_detects_drift
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DINJECT_DRIFT=ON
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_spack_recipe.cmake)
set_tests_properties(spack_recipe_check_detects_drift PROPERTIES WILL_FAIL TRUE)
# The recipe's directives, loaded with stand-ins for Spack's modules
# (Spack itself is not installed here; spack/README.md says what a real
# Spack reported), and the same check must fail on the old recipe's faults.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME spack_recipe_directives
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_spack_recipe.py ${PROJECT_SOURCE_DIR})
  add_test(NAME spack_recipe_directives_detect_regressions
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_spack_recipe.py ${PROJECT_SOURCE_DIR}
            --inject-regressions)
  set_tests_properties(spack_recipe_directives_detect_regressions PROPERTIES
    PASS_REGULAR_EXPRESSION "Spack recipe check failed:.*is conditioned on itself.*cmake_args raised NameError")
endif()
# The license: every source file carries the SPDX line of LICENSE
# (unit_tests/check_spdx.cmake), and the check fails on files that lack it.
add_test(NAME license_spdx_lines
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/check_spdx.cmake)
add_test(NAME license_spdx_check_detects_missing
  COMMAND ${CMAKE_COMMAND} -DSELF_TEST_DIR=${CMAKE_CURRENT_BINARY_DIR}/spdx_self_test
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_spdx.cmake)
