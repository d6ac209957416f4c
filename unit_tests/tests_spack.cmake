# The Spack recipe's variants and cmake_args against our CMake options.
add_test(NAME spack_recipe_matches_cmake_options
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_spack_recipe.cmake)
# The same check must fail on a recipe with a renamed option.
add_test(NAME spack_recipe_check_detects_drift
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DINJECT_DRIFT=ON
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_spack_recipe.cmake)
set_tests_properties(spack_recipe_check_detects_drift PROPERTIES WILL_FAIL TRUE)
# The recipe must at least be valid Python (Spack itself is not installed here).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME spack_recipe_is_valid_python
    COMMAND ${Python3_EXECUTABLE} -c
      "import ast,sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])"
      ${PROJECT_SOURCE_DIR}/spack/packages/moonep/package.py)
endif()
