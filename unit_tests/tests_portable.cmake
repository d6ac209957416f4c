# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The portable (Kokkos) planner and its in-process world.
moonep_add_test(test_portable_vs_reference test_portable_vs_reference.cpp $<TARGET_OBJECTS:moonep_plan_invariants>)
moonep_add_test(test_portable_reuse test_portable_reuse.cpp)
moonep_add_test(test_portable_bad_input test_portable_bad_input.cpp)
moonep_add_test(test_portable_world test_portable_world.cpp)
moonep_add_test(test_portable_labels test_portable_labels.cpp)
moonep_add_test(test_portable_histogram test_portable_histogram.cpp)
moonep_add_test(test_planner_concept test_planner_concept.cpp)
moonep_add_test(test_portable_multiprocess test_portable_multiprocess.cpp)
find_package(Threads REQUIRED)
target_link_libraries(test_portable_multiprocess PRIVATE Threads::Threads)
# Its own main: starts without Kokkos initialized.
add_executable(test_planner_without_kokkos test_planner_without_kokkos.cpp)
target_link_libraries(test_planner_without_kokkos PRIVATE moonep moonep_catch2)
target_include_directories(test_planner_without_kokkos PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME test_planner_without_kokkos COMMAND test_planner_without_kokkos)
# The device form of the kernels runs on the host execution spaces too, in
# the same binaries (unit_tests/test_exec_spaces.hpp: every host space's
# variants include Planner<Exec, impl::PortableDeviceForm>).
