# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The layer operations (docs/spec/layer.md): the reference against the
# direct MoE computation, its backward, the expert copies, bad input; the
# host layers' row loops, compiled per instruction set (src/core/row_loops.hpp).
moonep_add_test(test_layer
  test_layer_forward.cpp
  test_layer_backward.cpp
  test_layer_experts.cpp
  test_layer_bad_input.cpp
  test_row_loops.cpp)
# NumPy .npy files (src/io/npy.cpp), moonep-layer's file format.
moonep_add_test(test_npy test_npy.cpp)
# The moonep-layer command line.
include(${CMAKE_CURRENT_LIST_DIR}/layer_cli/tests_layer_cli.cmake)
# The portable dispatch and combine (moonep/layer.hpp) against the reference.
moonep_add_test(test_layer_portable test_layer_portable.cpp)
# The one layer interface (moonep/impl/layer_concept.hpp) and its refusals.
moonep_add_test(test_layer_concept test_layer_concept.cpp)
