# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The linear MoE layer through the library's operations
# (moonep/moe_layer.hpp) against the direct layer; with Kokkos Kernels'
# gemm where the build has it, and the portable kernel.
moonep_add_test(test_moe_layer test_moe_layer.cpp)
if(MoonEP_HAVE_KOKKOSKERNELS)
  target_link_libraries(test_moe_layer PRIVATE Kokkos::kokkoskernels)
  target_compile_definitions(test_moe_layer PRIVATE MOONEP_GEMM_WITH_KOKKOSKERNELS=1)
endif()
